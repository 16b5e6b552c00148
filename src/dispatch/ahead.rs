//! Fires claimed ahead of their instant (`scheduler.claim_ahead_millis`): recorded, claim and
//! PENDING rows, before the instant, and held here until it comes, when their attempts start
//! and the calls go out with no database round trip in between.
//!
//! Rules (see also docs/design.md, "Claims written ahead"):
//! - a fire waiting here is this instance's: its rows name this instance and their lease
//!   starts at the instant (`due_time` = `fire_time`), so if the instance dies, compensation
//!   dispatches them once the lease has run out;
//! - it is *withdrawn* (taken out of here, its claim and rows deleted) when its job is
//!   edited, disabled or deleted before the instant; the engine then owes the instant again
//!   under the job's new definition, exactly as if it had never been claimed;
//! - it stays when ownership of its job moves: the claim makes it this instance's, the new
//!   owner's schedule starts after it;
//! - an operator's cancel of one of its rows takes that row out;
//! - on shutdown, fires due within the grace period are still called; later ones are left
//!   PENDING for compensation.
//!
//! Launched is final: once the instant came and the attempts started, the fire is out of
//! here and can no longer be withdrawn, so a call and a withdrawal never both happen.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use tokio::sync::Notify;

use super::Hold;
use crate::jobs::{Execution, JobDefinition};

/// One fire waiting for its instant.
pub struct WaitingFire {
    /// The definition the fire was claimed (and its rows planned) under.
    pub job: Arc<JobDefinition>,
    pub fire_time: DateTime<Utc>,
    pub rows: Vec<Execution>,
    pub hold: Hold,
}

type Key = (DateTime<Utc>, String);

#[derive(Default)]
struct Queue {
    fires: BTreeMap<Key, WaitingFire>,
    by_job: HashMap<String, BTreeSet<DateTime<Utc>>>,
}

impl Queue {
    /// The definition `job`'s earliest waiting fire was claimed under.
    fn earliest(&self, job: &str) -> Option<Arc<JobDefinition>> {
        let first = *self.by_job.get(job)?.first()?;
        self.fires
            .get(&(first, job.to_string()))
            .map(|f| f.job.clone())
    }

    fn remove(&mut self, key: &Key) -> Option<WaitingFire> {
        let fire = self.fires.remove(key)?;
        if let Some(times) = self.by_job.get_mut(&key.1) {
            times.remove(&key.0);
            if times.is_empty() {
                self.by_job.remove(&key.1);
            }
        }
        Some(fire)
    }
}

/// The fires claimed ahead and not launched yet, in instant order.
#[derive(Default)]
pub struct Waiting {
    queue: Mutex<Queue>,
    /// Signalled when a fire earlier than any other arrives.
    pub earlier: Notify,
}

impl Waiting {
    pub fn add(&self, fire: WaitingFire) {
        let key = (fire.fire_time, fire.job.name().to_string());
        let mut q = self.queue.lock().expect("waiting lock");
        let first = q.fires.first_key_value().is_none_or(|(k, _)| key < *k);
        q.by_job
            .entry(key.1.clone())
            .or_default()
            .insert(fire.fire_time);
        q.fires.insert(key, fire);
        drop(q);
        metrics::gauge!("scheduler_fires_claimed_ahead").increment(1.0);
        if first {
            self.earlier.notify_one();
        }
    }

    /// The earliest instant waiting.
    pub fn next(&self) -> Option<DateTime<Utc>> {
        let q = self.queue.lock().expect("waiting lock");
        q.fires.first_key_value().map(|(k, _)| k.0)
    }

    /// Takes out the fires whose instant is at or before `now`: they launch.
    pub fn take_due(&self, now: DateTime<Utc>) -> Vec<WaitingFire> {
        self.take_while(|at| at <= now)
    }

    /// Takes out the fires whose instant is after `deadline` (shutdown).
    pub fn take_after(&self, deadline: DateTime<Utc>) -> Vec<WaitingFire> {
        let mut q = self.queue.lock().expect("waiting lock");
        let keys: Vec<Key> = q.fires.keys().filter(|k| k.0 > deadline).cloned().collect();
        let out: Vec<_> = keys.iter().filter_map(|k| q.remove(k)).collect();
        drop(q);
        metrics::gauge!("scheduler_fires_claimed_ahead").decrement(out.len() as f64);
        out
    }

    fn take_while(&self, due: impl Fn(DateTime<Utc>) -> bool) -> Vec<WaitingFire> {
        let mut q = self.queue.lock().expect("waiting lock");
        let mut out = Vec::new();
        while let Some(key) = q.fires.first_key_value().map(|(k, _)| k.clone()) {
            if !due(key.0) {
                break;
            }
            out.extend(q.remove(&key));
        }
        drop(q);
        metrics::gauge!("scheduler_fires_claimed_ahead").decrement(out.len() as f64);
        out
    }

    /// Takes out every waiting fire of `job` (it is withdrawn).
    pub fn withdraw(&self, job: &str) -> Vec<WaitingFire> {
        let mut q = self.queue.lock().expect("waiting lock");
        let times = q.by_job.get(job).cloned().unwrap_or_default();
        let out: Vec<_> = times
            .into_iter()
            .filter_map(|t| q.remove(&(t, job.to_string())))
            .collect();
        drop(q);
        metrics::gauge!("scheduler_fires_claimed_ahead").decrement(out.len() as f64);
        out
    }

    /// Takes one row out of its waiting fire (an operator cancelled it); `true` if it waited.
    pub fn forget_row(&self, exec: &Execution) -> bool {
        let key = (exec.fire_time, exec.job_name.clone());
        let mut q = self.queue.lock().expect("waiting lock");
        let Some(fire) = q.fires.get_mut(&key) else {
            return false;
        };
        let before = fire.rows.len();
        fire.rows.retain(|r| r.trace_id != exec.trace_id);
        let found = fire.rows.len() < before;
        if fire.rows.is_empty() {
            q.remove(&key);
            drop(q);
            metrics::gauge!("scheduler_fires_claimed_ahead").decrement(1.0);
        }
        found
    }

    /// For each job with a waiting fire, the definition its earliest one was claimed under.
    pub fn claimed_under(&self) -> Vec<Arc<JobDefinition>> {
        let q = self.queue.lock().expect("waiting lock");
        q.by_job.keys().filter_map(|job| q.earliest(job)).collect()
    }

    /// The definition `job`'s earliest waiting fire was claimed under.
    pub fn claimed_under_job(&self, job: &str) -> Option<Arc<JobDefinition>> {
        self.queue.lock().expect("waiting lock").earliest(job)
    }

    pub fn is_empty(&self) -> bool {
        self.queue.lock().expect("waiting lock").fires.is_empty()
    }
}
