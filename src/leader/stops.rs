//! Runs cancelled while their handler may still go on (see [`Stopping`]) are counted as runs
//! of their job by guarded admission: a SKIP fire beside one is skipped, a COVER fire waits
//! for it to stop. Whoever asks for the stop usually hears it confirmed at once (the cancel
//! answer, the covering fire polling, the interrupted call's answer or report). The leader
//! settles the rest on each recovery pass, asking each run's executor:
//!
//! | what the executor says | the run |
//! |---|---|
//! | finished, never had it, restarted, no status endpoint | stopped |
//! | running, or no answer | still stopping, until its timeout + [`STOP_ALLOWANCE`] after the request |
//!
//! Past that bound the run is taken to have stopped (an executor stops a handler at its
//! timeout), with a warning: a handler that ignores both the cancel and its timeout is the
//! one case where a job's overlap policy cannot hold.

use std::sync::Arc;

use super::recovery::STOP_ALLOWANCE;
use crate::clock::Clock;
use crate::dispatch::Attempts;
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
    if probe.stopped() {
        return true;
    }
    let timeout = match store.get_job(&stop.job_name).await {
        Ok(job) => job.map_or(0, |j| j.spec.timeout_seconds.into()),
        Err(_) => return false,
    };
    let bound = stop.requested_at + chrono::Duration::seconds(timeout) + STOP_ALLOWANCE;
    if clock.now() < bound {
        return false;
    }
    tracing::warn!(
        trace_id = %stop.trace_id,
        job_name = %stop.job_name,
        answer = ?probe,
        "a cancelled run is still not known to have stopped, past its timeout; its job's overlap policy no longer waits for it"
    );
    true
}
