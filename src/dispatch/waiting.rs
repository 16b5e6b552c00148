//! The fires handed out ahead of their instant (`scheduler.claim_ahead_millis`), from the
//! hand-out until the instant comes: first while their claim and PENDING rows are being
//! recorded, then recorded and waiting. At the instant the launcher takes them out and
//! starts their calls, with no database write between the timer and the call.
//!
//! Rules (see also docs/design.md, "Claims written ahead"):
//! - a fire waiting here is this instance's: its rows name this instance and their lease
//!   starts at the instant (`due_time` = `fire_time`), so if the instance dies, compensation
//!   dispatches them once the lease has run out;
//! - it is *withdrawn* (taken out of here, its claim and rows deleted) when its job is
//!   edited, disabled or deleted before the instant, also while it is still being recorded
//!   (its recording then ends in its withdrawal); the engine owes the instant again under the
//!   job's new definition, exactly as if it had never been claimed;
//! - it stays when ownership of its job moves: the claim makes it this instance's, and the
//!   new owner's schedule starts after it;
//! - an operator's cancel of one of its rows takes that row out.
//!
//! Launched is final: once taken out at its instant the fire can no longer be withdrawn, so
//! a call and a withdrawal never both happen. Everything happens under one lock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use foldhash::HashMap;
use tokio::sync::Notify;

use super::admission::Hold;
use crate::jobs::{Execution, JobDefinition, OverlapPolicy};

/// One fire between its hand-out and its instant.
#[derive(Debug)]
pub struct WaitingFire {
    /// The definition the fire was handed out (and its rows planned) under.
    pub job: Arc<JobDefinition>,
    pub fire_time: DateTime<Utc>,
    /// Its rows once recorded (`None` while they are being written).
    pub rows: Option<Vec<Execution>>,
    pub hold: Hold,
    /// Withdrawn while being recorded: its rows are deleted once written.
    withdrawn: bool,
}

type Key = (DateTime<Utc>, String);

#[derive(Default)]
struct Queue {
    fires: BTreeMap<Key, WaitingFire>,
    by_job: HashMap<String, BTreeSet<DateTime<Utc>>>,
    /// Recorded fires of guarded jobs per instant: the launcher looks up the next instant
    /// to judge on every wake-up, which a scan of every fire waiting would make cost as much
    /// as the fires of ALLOW jobs in the room.
    guarded: BTreeMap<DateTime<Utc>, usize>,
}

fn is_guarded(fire: &WaitingFire) -> bool {
    fire.rows.is_some() && fire.job.spec.overlap_policy != OverlapPolicy::Allow
}

impl Queue {
    fn remove(&mut self, key: &Key) -> Option<WaitingFire> {
        let fire = self.fires.remove(key)?;
        if is_guarded(&fire)
            && let Some(n) = self.guarded.get_mut(&key.0)
        {
            *n -= 1;
            if *n == 0 {
                self.guarded.remove(&key.0);
            }
        }
        if let Some(times) = self.by_job.get_mut(&key.1) {
            times.remove(&key.0);
            if times.is_empty() {
                self.by_job.remove(&key.1);
            }
        }
        metrics::gauge!("scheduler_fires_claimed_ahead").decrement(1.0);
        Some(fire)
    }
}

/// The fires handed out and not launched yet, in instant order.
#[derive(Default)]
pub struct WaitingRoom {
    queue: Mutex<Queue>,
    /// Signalled when a recorded fire may be due before the launcher's next wake-up.
    pub changed: Notify,
}

impl WaitingRoom {
    /// A fire handed out: it waits here from now on, while it is recorded.
    pub fn enter(&self, job: Arc<JobDefinition>, fire_time: DateTime<Utc>, hold: Hold) {
        let key = (fire_time, job.name().to_string());
        let mut q = self.queue.lock().expect("waiting lock");
        q.by_job.entry(key.1.clone()).or_default().insert(fire_time);
        q.fires.insert(
            key,
            WaitingFire {
                job,
                fire_time,
                rows: None,
                hold,
                withdrawn: false,
            },
        );
        metrics::gauge!("scheduler_fires_claimed_ahead").increment(1.0);
    }

    /// The fire's rows are written. `Err` hands the fire back when it was withdrawn while
    /// they were written (the caller deletes them).
    pub fn recorded(
        &self,
        job: &str,
        fire_time: DateTime<Utc>,
        rows: Vec<Execution>,
    ) -> Result<(), WaitingFire> {
        let key = (fire_time, job.to_string());
        let mut q = self.queue.lock().expect("waiting lock");
        let Some(fire) = q.fires.get_mut(&key) else {
            return Ok(());
        };
        if fire.withdrawn {
            let mut fire = q.remove(&key).expect("present");
            fire.rows = Some(rows);
            return Err(fire);
        }
        fire.rows = Some(rows);
        let guarded = is_guarded(fire);
        if guarded {
            *q.guarded.entry(fire_time).or_default() += 1;
        }
        drop(q);
        self.changed.notify_one();
        Ok(())
    }

    /// Drops a fire that was not recorded (another scheduler had it, or the database failed).
    pub fn forget(&self, job: &str, fire_time: DateTime<Utc>) {
        let key = (fire_time, job.to_string());
        self.queue.lock().expect("waiting lock").remove(&key);
    }

    /// The earliest instant of a recorded fire.
    pub fn next(&self) -> Option<DateTime<Utc>> {
        let q = self.queue.lock().expect("waiting lock");
        q.fires
            .iter()
            .find(|(_, f)| f.rows.is_some())
            .map(|(k, _)| k.0)
    }

    /// The earliest instant after `after` with a recorded fire of a guarded (SKIP or COVER)
    /// job: the next to judge ahead.
    pub fn next_guarded(&self, after: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
        let q = self.queue.lock().expect("waiting lock");
        q.guarded
            .keys()
            .find(|at| after.is_none_or(|a| **at > a))
            .copied()
    }

    /// The recorded fires of guarded jobs at instant `at`, copied (they stay here until
    /// their instant, withdrawable).
    pub fn guarded_at(&self, at: DateTime<Utc>) -> Vec<(Arc<JobDefinition>, Vec<Execution>)> {
        let q = self.queue.lock().expect("waiting lock");
        q.fires
            .range((at, String::new())..)
            .take_while(|(k, _)| k.0 == at)
            .filter(|(_, f)| is_guarded(f))
            .filter_map(|(_, f)| Some((f.job.clone(), f.rows.clone()?)))
            .collect()
    }

    /// Takes out the recorded fires whose instant is at or before `now`: they launch. Fires
    /// still being recorded stay until they are.
    pub fn take_due(&self, now: DateTime<Utc>) -> Vec<WaitingFire> {
        let mut q = self.queue.lock().expect("waiting lock");
        let due: Vec<Key> = q
            .fires
            .iter()
            .take_while(|(k, _)| k.0 <= now)
            .filter(|(_, f)| f.rows.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        due.iter().filter_map(|k| q.remove(k)).collect()
    }

    /// Takes out the recorded fires whose instant is after `deadline` (shutdown).
    pub fn take_after(&self, deadline: DateTime<Utc>) -> Vec<WaitingFire> {
        let mut q = self.queue.lock().expect("waiting lock");
        let keys: Vec<Key> = q
            .fires
            .iter()
            .filter(|(k, f)| k.0 > deadline && f.rows.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        keys.iter().filter_map(|k| q.remove(k)).collect()
    }

    /// The jobs with fires here.
    pub fn jobs(&self) -> Vec<String> {
        let q = self.queue.lock().expect("waiting lock");
        q.by_job.keys().cloned().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.lock().expect("waiting lock").fires.is_empty()
    }

    /// Withdraws `job`'s fires that `keep` does not keep, given the definition each was handed
    /// out under and its instant. Recorded ones are returned, for the caller to take back;
    /// ones still being recorded are marked, and their recording ends in their withdrawal.
    pub fn withdraw(
        &self,
        job: &str,
        keep: impl Fn(&JobDefinition, DateTime<Utc>) -> bool,
    ) -> Vec<WaitingFire> {
        let mut q = self.queue.lock().expect("waiting lock");
        let times = q.by_job.get(job).cloned().unwrap_or_default();
        let mut out = Vec::new();
        for t in times {
            let key = (t, job.to_string());
            let Some(fire) = q.fires.get_mut(&key) else {
                continue;
            };
            if keep(&fire.job, t) {
                continue;
            }
            if fire.rows.is_none() {
                fire.withdrawn = true;
            } else {
                out.extend(q.remove(&key));
            }
        }
        out
    }

    /// Takes one row out of its waiting fire (an operator cancelled it); `true` if it waited.
    pub fn forget_row(&self, exec: &Execution) -> bool {
        let key = (exec.fire_time, exec.job_name.clone());
        let mut q = self.queue.lock().expect("waiting lock");
        let Some(rows) = q.fires.get_mut(&key).and_then(|f| f.rows.as_mut()) else {
            return false;
        };
        let before = rows.len();
        rows.retain(|r| r.trace_id != exec.trace_id);
        let found = rows.len() < before;
        if rows.is_empty() {
            q.remove(&key);
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, revision: i64) -> Arc<JobDefinition> {
        guarded(name, revision, "ALLOW")
    }

    fn guarded(name: &str, revision: i64, policy: &str) -> Arc<JobDefinition> {
        let at: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let body = serde_json::json!({"name": name, "serviceName": "s", "handler": "h",
            "cron": "* * * * * ?", "overlapPolicy": policy});
        let mut j = JobDefinition::stored(body, at);
        j.revision = revision;
        Arc::new(j)
    }

    fn at(s: u32) -> DateTime<Utc> {
        format!("2026-01-01T00:00:{s:02}Z").parse().unwrap()
    }

    #[test]
    fn a_fire_withdrawn_while_recorded_is_handed_back_once_its_rows_are_written() {
        let room = WaitingRoom::default();
        room.enter(job("a", 1), at(2), None);
        let taken = room.withdraw("a", |j, _| j.revision == 2);
        assert!(taken.is_empty(), "its rows are not written yet");
        let back = room.recorded("a", at(2), Vec::new()).unwrap_err();
        assert_eq!(back.fire_time, at(2));
        assert!(room.is_empty());
    }

    #[test]
    fn only_recorded_fires_launch_and_a_kept_definition_stays() {
        let room = WaitingRoom::default();
        room.enter(job("a", 1), at(1), None);
        room.enter(job("b", 1), at(1), None);
        room.recorded("a", at(1), Vec::new()).unwrap();
        assert_eq!(room.next(), Some(at(1)));
        let due = room.take_due(at(5));
        assert_eq!(due.len(), 1, "b is still being recorded");
        assert_eq!(due[0].job.name().as_str(), "a");
        assert!(room.withdraw("b", |j, _| j.revision == 1).is_empty());
        room.recorded("b", at(1), Vec::new()).unwrap();
        assert_eq!(room.take_due(at(5)).len(), 1);
    }

    #[test]
    fn the_next_guarded_instant_is_the_first_with_a_recorded_skip_or_cover_fire() {
        let room = WaitingRoom::default();
        room.enter(job("allow", 1), at(1), None);
        room.enter(guarded("skip", 1, "SKIP"), at(2), None);
        room.enter(guarded("cover", 1, "COVER"), at(3), None);
        room.enter(guarded("late", 1, "SKIP"), at(3), None);
        room.recorded("allow", at(1), Vec::new()).unwrap();
        room.recorded("cover", at(3), Vec::new()).unwrap();
        assert_eq!(
            room.next_guarded(None),
            Some(at(3)),
            "skip is being recorded"
        );
        room.recorded("skip", at(2), Vec::new()).unwrap();
        assert_eq!(room.next_guarded(None), Some(at(2)));
        assert_eq!(room.next_guarded(Some(at(2))), Some(at(3)));
        assert_eq!(room.next_guarded(Some(at(3))), None);
        let names = |at| {
            room.guarded_at(at)
                .iter()
                .map(|(j, _)| j.name().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(at(3)), ["cover"], "only recorded ones; they stay");
        assert_eq!(
            names(at(1)),
            Vec::<String>::new(),
            "ALLOW fires are not judged"
        );
        assert_eq!(room.take_due(at(3)).len(), 3);
    }
}
