//! Compensation, run only by the first instance of the sorted scheduler list, so a dead
//! instance's half-done work is finished by exactly one survivor. Two cadences:
//! - every `compensation.recovery_interval_millis` (seconds, not minutes): cancelled runs
//!   still stopping ([`super::stops`]), PENDING rows whose
//!   holder's lease ran out (`pending_grace_seconds` past their due time: the scheduler died
//!   or stalled before calling) or whose holder left the list half a lease past their due
//!   time, and RUNNING rows whose scheduler is no longer a member (the
//!   executor's answer went to a dead process);
//! - every `compensation.interval_seconds`: RUNNING rows past their job's timeout, and the
//!   hourly purge of old fire claims.
//!
//! A database outage stops every holder from writing RUNNING for the calls it made (fires
//! claimed ahead are called at their instant whatever the database does), so leases that ran
//! out during it say nothing: after a failed pass, lease-expired rows are looked at again only
//! a full lease (plus the writer's longest retry delay) after the database answers.
//!
//! Rows are read in keyset pages along their status index, and each is decided by
//! [`Recovery`] (which asks the executor first), at most `PROBES` at a time. A row that does
//! not read (a status a newer version wrote, a damaged value) is reported and passed over: it
//! never stops the sweep. A pass ends before the next begins, so no row is resumed twice,
//! and rows are resumed only while the backlog has room: the rest wait for the next pass.
//! Every change is compare-and-set, so a late result and the compensator never both win.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::recovery::{Recovered, Recovery};
use crate::clock::Clock;
use crate::config::CompensationSettings;
use crate::discovery::Discovery;
use crate::dispatch::Dispatcher;
use crate::engine::ClusterState;
use crate::jobs::Execution;
use crate::store::{Cursor, Store, StoreError, Swept};

/// Rows read per page.
const PAGE: u32 = 500;
/// Executor probes (status or cancel) in flight at once.
const PROBES: usize = 16;

/// What one compensation pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pass {
    pub resumed: usize,
    pub adopted: usize,
    pub settled: usize,
    pub still_running: usize,
    /// Cancelled runs whose executors confirmed the stop (see [`super::stops`]).
    pub stopped: usize,
}

impl Pass {
    fn count(&mut self, r: Recovered) {
        match r {
            Recovered::Resumed => self.resumed += 1,
            Recovered::Adopted => self.adopted += 1,
            Recovered::Settled => self.settled += 1,
            Recovered::Left => self.still_running += 1,
            Recovered::Raced => {}
        }
    }
}

pub struct Compensator {
    clock: Clock,
    store: Arc<dyn Store>,
    discovery: Arc<dyn Discovery>,
    dispatcher: Arc<Dispatcher>,
    recovery: Arc<Recovery>,
    cluster: Arc<ClusterState>,
    settings: CompensationSettings,
    fire_claim_retention: chrono::Duration,
}

/// Which rows a pass looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// Lease-expired PENDING rows and RUNNING rows of departed schedulers.
    Recovery,
    /// RUNNING rows past their job's timeout.
    Overdue,
}

impl Compensator {
    pub fn new(
        settings: CompensationSettings,
        misfire_threshold_seconds: u64,
        clock: Clock,
        store: Arc<dyn Store>,
        discovery: Arc<dyn Discovery>,
        dispatcher: Arc<Dispatcher>,
        cluster: Arc<ClusterState>,
    ) -> Self {
        // Fire claims must outlive the misfire window, or a gained job could fire twice.
        let retention =
            chrono::Duration::seconds((misfire_threshold_seconds * 2).max(86_400) as i64);
        let recovery = Arc::new(Recovery {
            clock,
            store: store.clone(),
            attempts: dispatcher.attempts().clone(),
            launcher: dispatcher.launcher().clone(),
            stuck_after: chrono::Duration::seconds(settings.stuck_after_seconds.get() as i64),
        });
        Self {
            clock,
            store,
            discovery,
            dispatcher,
            recovery,
            cluster,
            settings,
            fire_claim_retention: retention,
        }
    }

    pub async fn run(self, cancel: CancellationToken) {
        let recovery = Duration::from_millis(self.settings.recovery_interval_millis);
        let overdue = Duration::from_secs(self.settings.interval_seconds.get());
        let now = tokio::time::Instant::now();
        let (mut next_recovery, mut next_overdue, mut next_purge) =
            (now + recovery, now + overdue, now);
        // After the database failed a pass, leases are honoured again only once the holders
        // have had a full lease (and the writer's longest retry delay) with the database back
        // to write the RUNNING rows of the calls they made meanwhile.
        let relapse = Duration::from_secs(self.settings.pending_grace_seconds)
            + crate::dispatch::WRITE_RETRY_MAX;
        let (mut failing, mut leases_from) = (false, now);
        loop {
            let wake = next_recovery.min(next_overdue);
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep_until(wake) => {}
            }
            if self.cluster.ring().leader() != Some(self.discovery.self_id()) {
                next_recovery = tokio::time::Instant::now() + recovery;
                next_overdue = next_overdue.max(next_recovery);
                continue;
            }
            let now = tokio::time::Instant::now();
            let sweep = if now >= next_overdue {
                next_overdue = now + overdue;
                Sweep::Overdue
            } else {
                next_recovery = now + recovery;
                Sweep::Recovery
            };
            let leases = !failing && tokio::time::Instant::now() >= leases_from;
            let outcome = self.pass_with(sweep, leases).await;
            match (&outcome, failing) {
                (Err(_), _) => failing = true,
                (Ok(_), true) => {
                    failing = false;
                    leases_from = tokio::time::Instant::now() + relapse;
                    tracing::info!(
                        after_seconds = relapse.as_secs(),
                        "database answers again; expired leases are recovered once their holders could write"
                    );
                }
                (Ok(_), false) => {}
            }
            match outcome {
                Ok(p) if p != Pass::default() => tracing::info!(
                    ?sweep,
                    resumed = p.resumed,
                    adopted = p.adopted,
                    settled = p.settled,
                    still_running = p.still_running,
                    stopped = p.stopped,
                    "compensation pass"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "compensation pass failed"),
            }
            if sweep == Sweep::Overdue && tokio::time::Instant::now() >= next_purge {
                next_purge = tokio::time::Instant::now() + Duration::from_secs(3600);
                match self
                    .store
                    .purge_fire_claims(self.clock.now() - self.fire_claim_retention)
                    .await
                {
                    Ok(n) if n > 0 => tracing::info!(purged = n, "old fire claims purged"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "purging fire claims failed"),
                }
            }
        }
    }

    /// One pass of `sweep` over every matching row, page by page.
    pub async fn pass(&self, sweep: Sweep) -> Result<Pass, StoreError> {
        self.pass_with(sweep, true).await
    }

    /// A pass; lease-expired PENDING rows are looked at only with `leases`.
    async fn pass_with(&self, sweep: Sweep, leases: bool) -> Result<Pass, StoreError> {
        let mut pass = Pass::default();
        if sweep == Sweep::Recovery && leases {
            self.pending_expired(&mut pass).await?;
        }
        self.running(sweep, &mut pass).await?;
        if sweep == Sweep::Recovery {
            let attempts = self.dispatcher.attempts();
            pass.stopped = super::stops::confirm_stops(self.clock, &self.store, attempts).await?;
        }
        Ok(pass)
    }

    /// PENDING rows whose lease ran out, and those of schedulers that left the list once
    /// the first half of their lease is over: a holder calls without taking the row only
    /// within that half (a departed holder may still be alive, cut off from discovery, and
    /// calling), and after it takes the row first, which fails once compensation has it. So a
    /// fire claimed ahead by an instance killed inside the window is called half a lease after
    /// its instant.
    async fn pending_expired(&self, pass: &mut Pass) -> Result<(), StoreError> {
        let now = self.clock.now();
        let lease = chrono::Duration::seconds(self.settings.pending_grace_seconds as i64);
        let expired = now - lease;
        let members: HashSet<String> = self.cluster.ring().instances().iter().cloned().collect();
        let mut cursor: Cursor = None;
        let mut probes = JoinSet::new();
        loop {
            let page = self
                .store
                .pending_before(now - lease / 2, cursor, PAGE)
                .await?;
            let Some(last) = page.last() else { break };
            cursor = Some(position(last, |e| e.trigger_time));
            let full = page.len() == PAGE as usize;
            for exec in page.into_iter().filter_map(Result::ok) {
                let still_held = exec.due_time > expired
                    && exec
                        .scheduler_instance
                        .as_ref()
                        .is_none_or(|s| members.contains(s));
                if still_held {
                    continue;
                }
                // Resumed rows need a backlog place; without room the rest wait for the next
                // pass rather than piling up as waiting tasks.
                let Some(hold) = self.dispatcher.reserve(1).pop() else {
                    drain(&mut probes, pass).await;
                    return Ok(());
                };
                while probes.len() >= PROBES {
                    next(&mut probes, pass).await;
                }
                let r = self.recovery.clone();
                probes.spawn(async move { r.pending(exec, Some(Arc::new(hold))).await });
            }
            if !full {
                break;
            }
        }
        drain(&mut probes, pass).await;
        Ok(())
    }

    async fn running(&self, sweep: Sweep, pass: &mut Pass) -> Result<(), StoreError> {
        let now = self.clock.now();
        let grace = chrono::Duration::seconds(self.settings.pending_grace_seconds as i64);
        let members: HashSet<String> = self.cluster.ring().instances().iter().cloned().collect();
        let mut timeouts = std::collections::HashMap::new();
        let mut cursor: Cursor = None;
        let mut probes = JoinSet::new();
        loop {
            let page = self.store.running_before(now - grace, cursor, PAGE).await?;
            let Some(last) = page.last() else { break };
            cursor = Some(position(last, |e| e.trigger_time));
            let full = page.len() == PAGE as usize;
            for exec in page.into_iter().filter_map(Result::ok) {
                let timeout = match timeouts.get(&exec.job_name) {
                    Some(t) => *t,
                    None => {
                        let t = self
                            .store
                            .get_job(&exec.job_name)
                            .await?
                            .map_or(0, |j| j.spec.timeout_seconds as i64);
                        timeouts.insert(exec.job_name.clone(), t);
                        t
                    }
                };
                let started = exec.start_time.unwrap_or(exec.due_time);
                let overdue = now - started
                    > chrono::Duration::seconds(timeout)
                        + chrono::Duration::from_std(crate::dispatch::client::ANSWER_GRACE)
                            .unwrap_or_default()
                        + grace;
                let orphaned = !exec
                    .scheduler_instance
                    .as_ref()
                    .is_some_and(|s| members.contains(s));
                let wanted = match sweep {
                    Sweep::Recovery => orphaned && !overdue,
                    Sweep::Overdue => overdue,
                };
                if !wanted {
                    continue;
                }
                while probes.len() >= PROBES {
                    next(&mut probes, pass).await;
                }
                let hold = self.dispatcher.reserve(1).pop().map(Arc::new);
                let r = self.recovery.clone();
                probes.spawn(async move { r.running(exec, overdue, hold).await });
            }
            if !full {
                break;
            }
        }
        drain(&mut probes, pass).await;
        Ok(())
    }
}

/// Where a sweep goes on after `row`: its sort key (`key` of a readable row) and id.
fn position(
    row: &Swept,
    key: impl Fn(&Execution) -> chrono::DateTime<chrono::Utc>,
) -> (chrono::DateTime<chrono::Utc>, i64) {
    match row {
        Ok(e) => (key(e), e.id),
        Err(u) => (u.key, u.id),
    }
}

type Probe = Result<Recovered, StoreError>;

async fn next(probes: &mut JoinSet<Probe>, pass: &mut Pass) {
    match probes.join_next().await {
        Some(Ok(Ok(r))) => pass.count(r),
        Some(Ok(Err(e))) => tracing::warn!(error = %e, "compensation could not settle a row"),
        Some(Err(e)) => tracing::warn!(error = %e, "compensation probe failed"),
        None => {}
    }
}

async fn drain(probes: &mut JoinSet<Probe>, pass: &mut Pass) {
    while !probes.is_empty() {
        next(probes, pass).await;
    }
}
