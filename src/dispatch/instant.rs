//! What the launcher checks at an instant before it calls the fires claimed for it, in one
//! read of one row (the job revision and the cancel counter):
//!
//! - **jobs changed unseen**: when the revision moved past the engine's book, the changes
//!   since are read; the fires they overtake (made at or before the instant, see
//!   [`JobBook`]) are withdrawn (see [`launch`](super::launch));
//! - **rows cancelled elsewhere**: a row claimed ahead here and cancelled through another
//!   instance is not in this waiting room's reach. Every such cancel bumps the counter in its
//!   transaction; when it moved since the fires were recorded (since the last check whose
//!   read came back before the earliest of them was planned), the status of the rows about
//!   to be called is read, and those recorded PENDING and no longer so are not called. An executor that cannot be
//!   asked to stop (no cancel endpoint) then never sees the call.
//!
//! The fires wait for the answer. While the database does not answer, no new edit or cancel
//! can be answered either, but one answered just before the database stalled may not have
//! reached this instance's book yet: calling the fires as claimed could call the old
//! definition. So a read that fails or takes longer than [`CHECK_WAIT`] is asked again
//! (backing off up to a second) until the database answers; the fires are then late by the
//! stall, never stale. Rows called late are taken with a compare-and-set past the first half
//! of their lease (see [`attempt`](super::attempt)), so compensation never calls them too.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::waiting::WaitingFire;
use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::jobs::{ExecutionStatus, JobBook, JobChange};
use crate::store::{FireStore, JobStore, StoreError};

/// How long one read of the check may take before it is asked again.
const CHECK_WAIT: Duration = Duration::from_secs(1);

/// Between the reads of a check the database did not answer.
const RETRY: Backoff = Backoff::doubling(Duration::from_millis(100), Duration::from_secs(1));

/// What the check found for one instant's fires.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// The job revision moved past the engine's book (it should reload).
    pub revision_moved: bool,
    /// Changes in the database after the engine's book, of the jobs of the fires checked.
    pub changes: Vec<JobChange>,
    /// Rows cancelled (or taken over) since they were recorded.
    pub gone_rows: HashSet<String>,
}

/// How long the cancel counters read at past checks are kept: longer than a fire waits
/// between its recording and its instant.
const SEEN_KEPT: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// The cancel counter as read by past checks, with when each read had come back (on the
/// clock the fires' rows are planned on).
pub struct InstantCheck {
    clock: Clock,
    cancels_seen: Mutex<VecDeque<(DateTime<Utc>, i64)>>,
}

impl Found {
    /// Whether a change read at the instant overtakes `fire`.
    pub fn overtakes(&self, fire: &WaitingFire) -> bool {
        self.changes.iter().any(|c| {
            c.name == fire.job.name().as_str() && c.overtakes(fire.job.revision, fire.fire_time)
        })
    }
}

impl InstantCheck {
    pub fn new(clock: Clock) -> Self {
        Self {
            clock,
            cancels_seen: Mutex::default(),
        }
    }

    /// Checks `due` against the database (see the module documentation); waits until it
    /// answers.
    pub async fn check<S>(&self, store: &S, book: &JobBook, due: &[WaitingFire]) -> Found
    where
        S: FireStore + JobStore + ?Sized,
    {
        let mut failures = 0;
        loop {
            let error = match tokio::time::timeout(CHECK_WAIT, self.read(store, book, due)).await {
                Ok(Ok(found)) => {
                    if failures > 0 {
                        tracing::info!(
                            fires = due.len(),
                            reads = failures + 1,
                            "fires checked at the instant once the database answered"
                        );
                    }
                    return found;
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => "no answer within 1 s".to_string(),
            };
            failures += 1;
            if failures == 1 {
                tracing::warn!(fires = due.len(), error = %error, "fires not checked at their instant; they wait for the database");
            }
            tokio::time::sleep(RETRY.delay(failures)).await;
        }
    }

    async fn read<S>(
        &self,
        store: &S,
        book: &JobBook,
        due: &[WaitingFire],
    ) -> Result<Found, StoreError>
    where
        S: FireStore + JobStore + ?Sized,
    {
        let counters = store.instant_counters().await?;
        let mut found = Found::default();
        let known = book.revision();
        found.revision_moved = counters.job_revision != known;
        if found.revision_moved
            && let Some(changes) = store.jobs_changed_since(known).await?
        {
            let due: HashSet<&str> = due.iter().map(|f| f.job.name().as_str()).collect();
            found.changes = changes
                .into_iter()
                .filter(|c| due.contains(c.name.as_str()))
                .collect();
        }
        let read_at = self.clock.now();
        let recorded = due
            .iter()
            .flat_map(|f| f.rows.iter().flatten())
            .map(|r| r.trigger_time)
            .min();
        let before = self.counter_before(recorded);
        if before != Some(counters.cancels) {
            // Rows recorded PENDING only: a fire that found no executor was recorded FAILED,
            // which is no cancel (taken for one, it was left out of its fire's withdrawal,
            // and the fire recorded twice).
            let traces: Vec<String> = due
                .iter()
                .flat_map(|f| f.rows.iter().flatten())
                .filter(|r| r.status == ExecutionStatus::Pending)
                .map(|r| r.trace_id.clone())
                .collect();
            found.gone_rows = store
                .no_longer_pending(&traces)
                .await?
                .into_iter()
                .collect();
        }
        let mut seen = self.cancels_seen.lock().expect("cancels lock");
        seen.push_back((read_at, counters.cancels));
        while seen.len() > 1
            && seen
                .front()
                .is_some_and(|(at, _)| *at < read_at - SEEN_KEPT)
        {
            seen.pop_front();
        }
        Ok(found)
    }

    /// The cancel counter as read by the last check whose read came back before `recorded`
    /// (when the earliest of the fires was planned): a cancel of one of their rows came
    /// after their recording, so after that read, and moved the counter since. Comparing with
    /// the previous check alone missed a cancel made between a fire's recording and the
    /// check of an earlier instant (campaign seed 35). `None` when no such read is known.
    fn counter_before(&self, recorded: Option<DateTime<Utc>>) -> Option<i64> {
        let recorded = recorded?;
        let seen = self.cancels_seen.lock().expect("cancels lock");
        seen.iter()
            .rev()
            .find(|(at, _)| *at <= recorded)
            .map(|(_, counter)| *counter)
    }
}
