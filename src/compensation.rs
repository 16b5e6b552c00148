//! Compensation (SPEC §7), run only by the first instance of the sorted scheduler list, so a
//! dead instance's half-done work is finished by exactly one survivor:
//! - PENDING rows past their due time plus a grace period were never handed to an executor
//!   (the scheduler died between insert and call): dispatch them now;
//! - RUNNING rows older than max(job timeout, `stuck_after`): ask the executor
//!   (`GET {prefix}/status/{traceId}`); a final answer settles the row, "still running" leaves
//!   it, anything else marks it TIMEOUT; failures then get the retry policy.
//!
//! Every change is compare-and-set, so a result arriving late and the compensator never both
//! win.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::config::CompensationSettings;
use crate::discovery::{Discovery, ExecutorInstance, InstanceAddr};
use crate::dispatch::Dispatcher;
use crate::engine::ClusterState;
use crate::jobs::{Execution, ExecutionStatus};
use crate::store::{Store, StoreError};

const BATCH: u32 = 500;

/// What one compensation pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pass {
    pub resumed: usize,
    pub settled: usize,
    pub still_running: usize,
}

pub struct Compensator {
    store: Arc<dyn Store>,
    discovery: Arc<dyn Discovery>,
    dispatcher: Arc<Dispatcher>,
    cluster: Arc<ClusterState>,
    settings: CompensationSettings,
    fire_claim_retention: chrono::Duration,
}

#[derive(Debug, Deserialize)]
struct StatusAnswer {
    status: String,
    message: Option<String>,
}

impl Compensator {
    pub fn new(
        settings: CompensationSettings,
        misfire_threshold_seconds: u64,
        store: Arc<dyn Store>,
        discovery: Arc<dyn Discovery>,
        dispatcher: Arc<Dispatcher>,
        cluster: Arc<ClusterState>,
    ) -> Self {
        // Fire claims must outlive the misfire window, or a gained job could fire twice.
        let retention =
            chrono::Duration::seconds((misfire_threshold_seconds * 2).max(86_400) as i64);
        Self {
            store,
            discovery,
            dispatcher,
            cluster,
            settings,
            fire_claim_retention: retention,
        }
    }

    pub async fn run(self, cancel: CancellationToken) {
        let interval = Duration::from_secs(self.settings.interval_seconds.get());
        let mut next_purge = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(interval) => {}
            }
            if self.cluster.ring().leader() != Some(self.discovery.self_id()) {
                continue;
            }
            match self.pass().await {
                Ok(p) if p != Pass::default() => tracing::info!(
                    resumed = p.resumed,
                    settled = p.settled,
                    still_running = p.still_running,
                    "compensation pass"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "compensation pass failed"),
            }
            if tokio::time::Instant::now() >= next_purge {
                next_purge = tokio::time::Instant::now() + Duration::from_secs(3600);
                match self
                    .store
                    .purge_fire_claims(Utc::now() - self.fire_claim_retention)
                    .await
                {
                    Ok(n) if n > 0 => tracing::info!(purged = n, "old fire claims purged"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "purging fire claims failed"),
                }
            }
        }
    }

    /// One pass over stale PENDING and stuck RUNNING rows.
    pub async fn pass(&self) -> Result<Pass, StoreError> {
        let now = Utc::now();
        let mut pass = Pass::default();
        let grace = chrono::Duration::seconds(self.settings.pending_grace_seconds as i64);
        for exec in self.store.due_pending(now - grace, BATCH).await? {
            tracing::info!(trace_id = %exec.trace_id, job = %exec.job_name, "re-dispatching a PENDING execution nobody called");
            self.dispatcher.resume(exec).await?;
            pass.resumed += 1;
        }
        let stuck_after = chrono::Duration::seconds(self.settings.stuck_after_seconds.get() as i64);
        for exec in self.store.running_since(now - stuck_after, BATCH).await? {
            let job = self.store.get_job(&exec.job_name).await?;
            let timeout = chrono::Duration::seconds(
                job.as_ref().map_or(0, |j| j.spec.timeout_seconds) as i64,
            );
            if exec.start_time.is_some_and(|s| now - s <= timeout) {
                continue;
            }
            let service = job.as_ref().map(|j| j.spec.service_name.to_string());
            match self.ask_executor(&exec, service.as_deref()).await {
                Some(StatusAnswer { status, .. }) if status == "RUNNING" => pass.still_running += 1,
                Some(StatusAnswer { status, message })
                    if status == "SUCCESS" || status == "FAILED" =>
                {
                    let st = if status == "SUCCESS" {
                        ExecutionStatus::Success
                    } else {
                        ExecutionStatus::Failed
                    };
                    let msg =
                        message.unwrap_or_else(|| format!("{status} (reported to compensation)"));
                    if self.dispatcher.settle_stuck(&exec, st, msg).await? {
                        pass.settled += 1;
                    }
                }
                _ => {
                    let msg = format!(
                        "no result {}s after start; marked TIMEOUT by compensation",
                        exec.start_time.map_or(0, |s| (now - s).num_seconds())
                    );
                    if self
                        .dispatcher
                        .settle_stuck(&exec, ExecutionStatus::Timeout, msg)
                        .await?
                    {
                        tracing::warn!(trace_id = %exec.trace_id, job = %exec.job_name, "stuck execution marked TIMEOUT");
                        pass.settled += 1;
                    }
                }
            }
        }
        Ok(pass)
    }

    /// Asks the executor that ran `exec` for its status; `None` when it cannot say.
    async fn ask_executor(&self, exec: &Execution, service: Option<&str>) -> Option<StatusAnswer> {
        let addr = InstanceAddr::parse(exec.executor_instance.as_deref()?).ok()?;
        let known = match service {
            Some(s) => self
                .discovery
                .executors(s)
                .await
                .into_iter()
                .find(|e| e.addr == addr),
            None => None,
        };
        let instance = known.unwrap_or(ExecutorInstance {
            addr,
            path_prefix: None,
        });
        let (base, path) = self
            .dispatcher
            .endpoint(&instance, &format!("status/{}", exec.trace_id));
        let resp = self
            .dispatcher
            .http()
            .get(format!("{base}{path}"))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        if !resp.status().is_success() {
            return None;
        }
        let bytes = resp.bytes().await.ok()?;
        serde_json::from_slice(&bytes[..bytes.len().min(64 * 1024)]).ok()
    }
}
