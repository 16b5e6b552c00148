//! The calls this instance has in flight, per executor address: what `LEAST_BUSY` routing
//! (SPEC §13) counts. A call counts from `enter` until its guard is dropped.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::discovery::ExecutorInstance;

/// Calls in flight from this instance, per executor address (for `LEAST_BUSY`).
#[derive(Default)]
pub struct Busy {
    calls: Mutex<HashMap<String, usize>>,
}

/// Counts one call while it lives.
pub struct BusyCall<'a> {
    busy: &'a Busy,
    addr: String,
}

impl Busy {
    pub fn enter(&self, addr: String) -> BusyCall<'_> {
        *self
            .calls
            .lock()
            .expect("busy lock")
            .entry(addr.clone())
            .or_default() += 1;
        BusyCall { busy: self, addr }
    }

    pub fn of(&self, executors: &[ExecutorInstance]) -> Vec<usize> {
        let calls = self.calls.lock().expect("busy lock");
        executors
            .iter()
            .map(|e| calls.get(e.addr.as_str()).copied().unwrap_or(0))
            .collect()
    }
}

impl Drop for BusyCall<'_> {
    fn drop(&mut self) {
        let mut calls = self.busy.calls.lock().expect("busy lock");
        if let Some(n) = calls.get_mut(&self.addr) {
            *n -= 1;
            if *n == 0 {
                calls.remove(&self.addr);
            }
        }
    }
}
