//! What an attempt came to, and settling it: the compare-and-set of its row to the verdict,
//! written in one transaction with what the verdict earns:
//! - a FAILED or TIMEOUT with retries left earns its retry row (`RETRY`, or `COMPENSATION`
//!   when compensation reached the verdict), due after the backoff;
//! - a SUCCESS of a job with child jobs that completes its fire (every range of the fire has
//!   a SUCCESS) earns the children's rows, once per parent fire.
//!
//! Both are rows in the database before anyone acts on them, so neither is lost when the
//! instance dies right after the verdict: compensation dispatches them after their lease.
//! The caller starts them here when it can (see `Attempts`).

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::planner::Planner;
use super::rows::{child_rows, retry_row};
use super::series;
use super::settle::Settler;
use crate::alerts::Alerts;
use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::jobs::{
    Execution, ExecutionStatus, JobBook, JobDefinition, NewExecution, TriggerType, child_fire_id,
    fire_key,
};
use crate::store::{Applied, ChildTrigger, Follow, JobStore, Store, Transition};

use ExecutionStatus::{Failed, Success, Timeout};

/// A final verdict on a row, with what the executor said.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub status: ExecutionStatus,
    pub message: Option<String>,
    pub error: Option<String>,
    /// The trigger type of the retry this verdict earns: RETRY, or COMPENSATION when
    /// compensation reached the verdict.
    pub retry_as: TriggerType,
    /// The executor that gave it, written with it: its RUNNING (which also names it) may be
    /// decided after the verdict when both are in concurrent batches.
    pub executor: Option<String>,
    /// Written only while the row is still held by this instance and lease (holder and due
    /// time): a verdict on a row this instance has not called yet, which compensation may
    /// have taken over and called meanwhile (see [`Verdict::while_held`]).
    pub held_by: Option<(String, DateTime<Utc>)>,
}

impl Verdict {
    pub fn new(status: ExecutionStatus, error: impl Into<String>) -> Self {
        Self {
            status,
            message: None,
            error: Some(error.into()),
            retry_as: TriggerType::Retry,
            executor: None,
            held_by: None,
        }
    }

    pub fn failed(error: impl Into<String>) -> Self {
        Self::new(Failed, error)
    }

    /// What an executor told about a finished execution (its answer, a probe, a report).
    pub fn from_probe(status: ExecutionStatus, message: Option<String>) -> Self {
        if status == Success {
            Self {
                status,
                message,
                error: None,
                retry_as: TriggerType::Retry,
                executor: None,
                held_by: None,
            }
        } else {
            Self::new(
                status,
                message.unwrap_or_else(|| format!("{status} (told by the executor)")),
            )
        }
    }

    /// The same verdict, written only while `row` is still held as it was: a run this
    /// instance never called, whose holder may have paused past its lease.
    pub fn while_held(self, row: &Execution) -> Self {
        Self {
            held_by: row.lease(),
            ..self
        }
    }

    /// The same verdict, given by `executor`.
    pub fn by(self, executor: &str) -> Self {
        Self {
            executor: Some(executor.to_string()),
            ..self
        }
    }

    /// The same verdict, reached by compensation.
    pub fn by_compensation(self) -> Self {
        Self {
            error: self.error.map(|e| format!("{e} (compensation)")),
            retry_as: TriggerType::Compensation,
            ..self
        }
    }
}

/// Settles verdicts: the row's compare-and-set with its retry and children (see the module
/// documentation), and the metrics and alerts of a final status.
pub struct Outcomes {
    pub clock: Clock,
    pub settler: Settler,
    pub alerts: Arc<Alerts>,
    pub backoff: Backoff,
    pub planner: Arc<Planner>,
    pub jobs: Arc<dyn JobStore>,
    /// The engine's definitions, for a child the database cannot be asked about.
    pub book: Arc<JobBook>,
}

impl Outcomes {
    /// Settles through a group-committing writer of its own on `store`.
    pub fn new(
        clock: Clock,
        store: Arc<dyn Store>,
        alerts: Arc<Alerts>,
        backoff: Backoff,
        planner: Arc<Planner>,
        book: Arc<JobBook>,
        start_deferral: std::time::Duration,
    ) -> Self {
        Self {
            clock,
            settler: Settler::spawn(store.clone(), start_deferral),
            alerts,
            backoff,
            planner,
            jobs: store,
            book,
        }
    }

    /// Compare-and-set of `row` from one of `from` to `verdict`, with what it earns. `None`
    /// when someone else decided the row first; otherwise the rows it earned, for the caller
    /// to start. `job` is `None` for a row whose job was deleted (no retry policy is left).
    pub async fn settle(
        &self,
        job: Option<&Arc<JobDefinition>>,
        row: &Execution,
        from: &'static [ExecutionStatus],
        verdict: Verdict,
        started: Option<DateTime<Utc>>,
    ) -> Option<Follow> {
        let now = self.clock.now();
        let started = started.or(row.start_time);
        let duration_ms = started.map(|s| (now - s).num_milliseconds().max(0));
        let children = match job {
            Some(j) if verdict.status == Success && !j.spec.child_jobs.is_empty() => {
                self.children_of(j, row, now).await
            }
            _ => None,
        };
        let retry = job.and_then(|j| self.retry_for(j, row, verdict.status, verdict.retry_as));
        let t = Transition {
            executor_instance: verdict.executor.clone(),
            finish_time: Some(now),
            duration_ms,
            result_message: verdict.message.clone(),
            error_message: verdict.error.clone(),
            held_by: verdict.held_by.clone(),
            lock_job: job
                .filter(|j| locks_on_settle(j, retry.is_some()))
                .map(|j| j.name().to_string()),
            retry: retry.map(Box::new),
            children: children.map(Box::new),
            row_id: Some(row.id),
            ..Transition::to(from, verdict.status)
        };
        match self.settler.settle(&row.trace_id, t).await {
            Ok(Applied::Yes(follow)) => {
                self.finished(job, row, &verdict, now, duration_ms);
                Some(follow)
            }
            Ok(Applied::No) => None,
            Err(e) => {
                tracing::warn!(error = %e, "result not written: shutting down; compensation settles it");
                None
            }
        }
    }

    /// Metrics, the alert and the log line of a row that ended.
    fn finished(
        &self,
        job: Option<&Arc<JobDefinition>>,
        row: &Execution,
        verdict: &Verdict,
        now: DateTime<Utc>,
        duration_ms: Option<i64>,
    ) {
        series::ended(&row.job_name, verdict.status, duration_ms);
        let failed = matches!(verdict.status, Failed | Timeout);
        if let Some(job) = job {
            let ended = || Execution {
                status: verdict.status,
                error_message: verdict.error.clone(),
                finish_time: Some(now),
                ..row.clone()
            };
            self.alerts
                .execution_ended(job, verdict.status, row.retry_count, ended);
            if failed && row.retry_count >= job.spec.max_retry && job.spec.max_retry > 0 {
                tracing::warn!(retries = row.retry_count, "giving up after the last retry");
            }
        }
        if failed {
            tracing::warn!(status = %verdict.status, error = verdict.error.as_deref().unwrap_or(""), "execution failed");
        } else {
            tracing::debug!(status = %verdict.status, "execution finished");
        }
    }

    /// The retry row a `status` earns under the job's retry policy, due after the backoff.
    pub fn retry_for(
        &self,
        job: &JobDefinition,
        row: &Execution,
        status: ExecutionStatus,
        trigger: TriggerType,
    ) -> Option<NewExecution> {
        if !matches!(status, Failed | Timeout) || row.retry_count >= job.spec.max_retry {
            return None;
        }
        let now = self.clock.now();
        let delay = self.backoff.delay(row.retry_count + 1);
        let due = now + chrono::Duration::from_std(delay).unwrap_or_default();
        Some(retry_row(row, self.planner.me(), now, due, trigger))
    }

    /// The rows of `job`'s children, planned now, to insert if `row`'s SUCCESS completes its
    /// fire.
    async fn children_of(
        &self,
        job: &JobDefinition,
        row: &Execution,
        now: DateTime<Utc>,
    ) -> Option<ChildTrigger> {
        let parent_fire = fire_key(&row.execution_id).to_string();
        let mut rows = Vec::new();
        for name in &job.spec.child_jobs {
            let child = match self.jobs.get_job(name.as_str()).await {
                Ok(Some(child)) => Arc::new(child),
                Ok(None) => {
                    tracing::warn!(child = %name, "child job does not exist any more");
                    continue;
                }
                // The database does not answer (the SUCCESS itself is written once it does):
                // the engine's definition, current up to its last reload, plans the child.
                Err(e) => match self.book.get(name.as_str()) {
                    Some(child) => {
                        tracing::debug!(child = %name, error = %e, "child job planned from the engine's definitions");
                        child
                    }
                    None => {
                        tracing::warn!(child = %name, "child job does not exist any more");
                        continue;
                    }
                },
            };
            let planned = self
                .planner
                .plan_named(
                    &child,
                    now,
                    TriggerType::Child,
                    &child_fire_id(&parent_fire),
                    now,
                )
                .await;
            rows.extend(child_rows(&row.trace_id, planned));
        }
        Some(ChildTrigger {
            parent_job: job.name().to_string(),
            parent_fire,
            rows,
        })
    }
}

/// Whether settling a run of `job` locks the job's row first. Its fires' completion triggers
/// its children under that lock, so two ranges finishing together are decided one after the
/// other. A verdict that earns a retry waits for the lock too, whatever the policy `job` was
/// handed out under: guarded fires are admitted against the job's open runs under that lock,
/// and a retry inserted behind an admission's read would escape it, to run beside the fire
/// admitted. The job may have become guarded since its run was handed out, so the run's own
/// (ALLOW) definition does not tell. A verdict that ends a run for good needs no lock: a run
/// that ends and an admission reading it at the same moment may pass each other, the
/// admission then seeing the run still open (a SKIP fire skipped beside a run in its last
/// milliseconds, as if it had come a moment earlier; a COVER fire asks a run that has ended
/// to stop, which it confirms at once). Without that, the SUCCESS of each run of a guarded
/// job would hold back the admission of every guarded fire of its instance until its commit.
pub fn locks_on_settle(job: &JobDefinition, retries: bool) -> bool {
    !job.spec.child_jobs.is_empty() || retries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(body: serde_json::Value) -> JobDefinition {
        let mut all = serde_json::json!({"name": "j", "serviceName": "s", "handler": "h",
            "cron": "* * * * * ?"});
        all.as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        JobDefinition::stored(all, Utc::now())
    }

    #[test]
    fn a_verdict_that_earns_a_retry_locks_its_job_whatever_policy_its_run_had() {
        // Handed out ALLOW; the job may be SKIP by the time the retry is written.
        let allow = job(serde_json::json!({}));
        assert!(locks_on_settle(&allow, true));
        assert!(
            !locks_on_settle(&allow, false),
            "an end for good needs no lock"
        );
        let parent = job(serde_json::json!({"childJobs": ["c"]}));
        assert!(
            locks_on_settle(&parent, false),
            "children are decided under it"
        );
    }
}
