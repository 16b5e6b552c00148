//! The two bounds on the work in flight, and who holds what of them:
//!
//! - the **backlog** (`executor.max_backlog`): fires between their hand-off (their claim, up
//!   to `scheduler.claim_ahead_millis` ahead of the instant) and their last result. A fire's
//!   place, its [`Hold`], is shared by its executions and their retries and given back when
//!   the last of them ends. The engine takes places without waiting ([`Admission::reserve`]):
//!   a scheduler that cannot keep up leaves its fires in the schedule, under the misfire
//!   policy, instead of queueing them in memory;
//! - the **call slots** (`executor.max_in_flight`): executor calls at once. An attempt takes
//!   a slot for its call and gives it back with the answer.
//!
//! It also counts the calls in flight per executor address, which `LEAST_BUSY` routing reads.

use std::sync::{Arc, Mutex};

use foldhash::HashMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};

use crate::discovery::ExecutorInstance;

/// A fire's place in the backlog, shared by its executions (and their retries) and given back
/// when the last of them ends. `None` for work that was never handed out by the engine.
pub type Hold = Option<Arc<OwnedSemaphorePermit>>;

pub struct Admission {
    backlog: Arc<Semaphore>,
    backlog_size: usize,
    calls: Semaphore,
    max_calls: usize,
    busy: Mutex<HashMap<String, usize>>,
}

impl Admission {
    pub fn new(backlog: usize, calls: usize) -> Self {
        // With `scheduler_backlog`, how full the instance is: the overload alert reads both.
        metrics::gauge!("scheduler_backlog_capacity").set(backlog as f64);
        Self {
            backlog: Arc::new(Semaphore::new(backlog)),
            backlog_size: backlog,
            calls: Semaphore::new(calls),
            max_calls: calls,
            busy: Mutex::default(),
        }
    }

    /// Takes up to `max` places in the backlog, without waiting.
    pub fn reserve(&self, max: usize) -> Vec<OwnedSemaphorePermit> {
        let mut room = Vec::new();
        while room.len() < max {
            match self.backlog.clone().try_acquire_owned() {
                Ok(p) => room.push(p),
                Err(_) => break,
            }
        }
        metrics::gauge!("scheduler_backlog")
            .set((self.backlog_size - self.backlog.available_permits()) as f64);
        room
    }

    /// Resolves once the backlog has room (taking nothing).
    pub async fn room(&self) {
        let _ = self.backlog.acquire().await;
    }

    /// Waits for a call slot; the in-flight gauge follows it.
    pub async fn call_slot(&self) -> CallSlot<'_> {
        let permit = self
            .calls
            .acquire()
            .await
            .expect("call slots are never closed");
        self.publish_calls(0);
        CallSlot {
            _permit: permit,
            admission: self,
        }
    }

    fn publish_calls(&self, leaving: usize) {
        let in_flight = self.max_calls - self.calls.available_permits();
        metrics::gauge!("scheduler_calls_in_flight").set(in_flight.saturating_sub(leaving) as f64);
    }

    /// Counts a call to `addr` while the guard lives.
    pub fn enter(&self, addr: &str) -> BusyCall<'_> {
        *self
            .busy
            .lock()
            .expect("busy lock")
            .entry(addr.to_string())
            .or_default() += 1;
        BusyCall {
            admission: self,
            addr: addr.to_string(),
        }
    }

    /// The calls this instance has in flight to each of `executors`.
    pub fn busy(&self, executors: &[ExecutorInstance]) -> Vec<usize> {
        let calls = self.busy.lock().expect("busy lock");
        executors
            .iter()
            .map(|e| calls.get(e.addr.as_str()).copied().unwrap_or(0))
            .collect()
    }
}

/// A call slot.
pub struct CallSlot<'a> {
    _permit: SemaphorePermit<'a>,
    admission: &'a Admission,
}

impl Drop for CallSlot<'_> {
    fn drop(&mut self) {
        // The permit is released after this body: count it as gone already.
        self.admission.publish_calls(1);
    }
}

/// One call counted for its executor while it lives.
pub struct BusyCall<'a> {
    admission: &'a Admission,
    addr: String,
}

impl Drop for BusyCall<'_> {
    fn drop(&mut self) {
        let mut calls = self.admission.busy.lock().expect("busy lock");
        if let Some(n) = calls.get_mut(&self.addr) {
            *n -= 1;
            if *n == 0 {
                calls.remove(&self.addr);
            }
        }
    }
}
