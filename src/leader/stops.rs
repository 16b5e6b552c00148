//! Runs cancelled while their handler may still go on (see [`Stopping`]) are counted as runs
//! of their job by guarded admission: a SKIP fire beside one is skipped, a COVER fire waits
//! for it to stop. Whoever asks for the stop usually hears it confirmed at once (the cancel
//! answer, the covering fire polling, the interrupted call's answer or report). The leader
//! settles the rest on each recovery pass, asking each run's executor:
//!
//! | what the executor says | the run |
//! |---|---|
//! | finished | stopped |
//! | never had it, restarted, forgot it, no status endpoint | told to stop it, then what the cancel answers |
//! | running | still stopping, for as long as it says so |
//! | no answer | still stopping, until its timeout + [`STOP_ALLOWANCE`] after the request |
//!
//! A handler that ignores both its cancel and its timeout (a blocked thread the SDK cannot
//! interrupt) still runs, and its executor says so: its job's SKIP and COVER fires wait for
//! it however long it takes (the campaign found a COVER fire started beside one that ran 34 s
//! when the leader stopped waiting at the bound). Only an executor that does not answer at
//! all is taken, past the bound, to have stopped with its handler (it is gone, or cut off
//! from the schedulers), with a warning.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::recovery::STOP_ALLOWANCE;
use crate::clock::Clock;
use crate::dispatch::Attempts;
use crate::dispatch::client::Probe;
use crate::store::{Stopping, Store, StoreError};

/// Entries looked at per pass.
const PAGE: u32 = 500;

/// Settles the stops that can be confirmed now; the number confirmed.
pub async fn confirm_stops(
    clock: Clock,
    store: &Arc<dyn Store>,
    attempts: &Attempts,
) -> Result<usize, StoreError> {
    let mut confirmed = Vec::new();
    for stop in store.stopping(PAGE).await? {
        if has_stopped(clock, store, attempts, &stop).await {
            confirmed.push(stop.trace_id);
        }
    }
    store.stops_confirmed(&confirmed).await?;
    Ok(confirmed.len())
}

async fn has_stopped(
    clock: Clock,
    store: &Arc<dyn Store>,
    attempts: &Attempts,
    stop: &Stopping,
) -> bool {
    let Some(run) = &stop.run else {
        return true; // its row is gone
    };
    let Some((_, probe)) = attempts.status(run).await else {
        return true; // no executor named: never called
    };
    let probe = match probe {
        Probe::Unknown { .. } | Probe::Unsupported => match attempts.stop(run).await {
            Some(answer) => answer,
            None => return true,
        },
        known => known,
    };
    // Only a silent executor needs the job's timeout.
    if probe.stopped() || probe == Probe::Running {
        return settled(&probe, stop.requested_at, 0, clock.now());
    }
    let timeout = match store.get_job(&stop.job_name).await {
        Ok(job) => job.map_or(0, |j| j.spec.timeout_seconds.into()),
        Err(_) => return false,
    };
    let stopped = settled(&probe, stop.requested_at, timeout, clock.now());
    if stopped {
        tracing::warn!(
            trace_id = %stop.trace_id,
            job_name = %stop.job_name,
            answer = ?probe,
            "a cancelled run's executor has not answered past the run's timeout; taken to have stopped, its job's overlap policy no longer waits for it"
        );
    }
    stopped
}

/// Whether a run asked to stop at `requested_at`, of a job with `timeout` seconds, counts as
/// stopped at `now` given what its executor said (the table of the module documentation).
fn settled(probe: &Probe, requested_at: DateTime<Utc>, timeout: i64, now: DateTime<Utc>) -> bool {
    match probe {
        _ if probe.stopped() => true,
        Probe::Running => false,
        _ => now >= requested_at + chrono::Duration::seconds(timeout) + STOP_ALLOWANCE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_its_executor_says_runs_stays_stopping_however_long_and_a_silent_one_until_the_bound() {
        let asked: DateTime<Utc> = "2026-03-01T00:00:00Z".parse().unwrap();
        let later = |s: i64| asked + chrono::Duration::seconds(s);
        let silent = Probe::Unreachable("connection refused".into());
        // Timeout 5 s: the bound is 35 s after the request.
        assert!(!settled(&Probe::Running, asked, 5, later(36)));
        assert!(!settled(&Probe::Running, asked, 5, later(3600)));
        assert!(!settled(&silent, asked, 5, later(34)));
        assert!(settled(&silent, asked, 5, later(35)));
        let finished = Probe::Finished {
            status: crate::jobs::ExecutionStatus::Success,
            message: None,
        };
        assert!(settled(&finished, asked, 5, later(1)));
        assert!(settled(
            &Probe::Unknown { restarted: true },
            asked,
            5,
            later(1)
        ));
        assert!(settled(&Probe::Unsupported, asked, 5, later(1)));
    }
}
