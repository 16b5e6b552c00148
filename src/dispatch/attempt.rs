//! One attempt at one execution row: wait until it is due, take a call slot, call the
//! executors in order until one answers, and settle the row with what it said.
//!
//! Who may call for a row is decided by its state in the database, never by memory alone:
//! - a PENDING row is *held* by the instance it names (`scheduler_instance`) from its
//!   `due_time` for `compensation.pending_grace_seconds` (the lease). Within the first half
//!   of the lease the holder calls at once and writes RUNNING right after the call went out
//!   (no database round trip between the instant and the call); later it first takes the
//!   row with a compare-and-set on (instance, due_time), so a row compensation has taken over
//!   is never called twice by its old holder;
//! - a RUNNING row has had its call sent; only its result (or compensation, asking the
//!   executor) moves it on;
//! - every final status is a compare-and-set, and the retry a failure earns is written in the
//!   same transaction as the failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Utc};
use tokio::sync::OwnedSemaphorePermit;

use super::client::{CallOutcome, Probe, executor_request};
use super::rows::{no_executor, retry_row};
use super::{Dispatcher, plan};
use crate::discovery::ExecutorInstance;
use crate::jobs::{Execution, ExecutionStatus, JobDefinition, TriggerType};
use crate::store::{Applied, Transition};

use ExecutionStatus::{Cancelled, Failed, Pending, Running, Success, Timeout};

/// A fire's place in the backlog, shared by its executions (and their retries) and given
/// back when the last of them ends.
pub type Hold = Option<Arc<OwnedSemaphorePermit>>;

/// The right to call for a PENDING row: the row names this instance, and its `due_time` is
/// `since`. See the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub since: DateTime<Utc>,
}

/// How an attempt may start its call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Within the first half of the lease: call now, write RUNNING after.
    CallFirst,
    /// Late in (or past) the lease: take the row by compare-and-set, then call.
    TakeFirst,
}

impl Lease {
    pub fn start(&self, now: DateTime<Utc>, lease: chrono::Duration) -> Start {
        if now - self.since <= lease / 2 {
            Start::CallFirst
        } else {
            Start::TakeFirst
        }
    }
}

/// A final verdict on a row, with what the executor said.
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
}

impl Verdict {
    pub fn failed(error: String) -> Self {
        Self {
            status: Failed,
            message: None,
            error: Some(error),
            retry_as: TriggerType::Retry,
            executor: None,
        }
    }

    pub fn from_probe(status: ExecutionStatus, message: Option<String>) -> Self {
        if status == Success {
            Self {
                status,
                message,
                error: None,
                retry_as: TriggerType::Retry,
                executor: None,
            }
        } else {
            Self {
                status,
                message: None,
                error: Some(message.unwrap_or_else(|| format!("{status} (told by the executor)"))),
                retry_as: TriggerType::Retry,
                executor: None,
            }
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

impl Dispatcher {
    /// Runs the attempt in the background, inside a span carrying its trace id.
    pub(super) fn spawn_attempt(
        self: &Arc<Self>,
        job: Arc<JobDefinition>,
        exec: Execution,
        lease: Lease,
        hold: Hold,
    ) {
        use tracing::Instrument;
        let span = tracing::info_span!("execution", trace_id = %exec.trace_id, job_name = %exec.job_name, execution_id = %exec.execution_id);
        let this = self.clone();
        let trace = exec.trace_id.clone();
        self.attempting
            .lock()
            .expect("attempting lock")
            .insert(trace.clone());
        self.tasks.spawn(
            async move {
                this.attempt(job, exec, lease, &hold).await;
                this.attempting
                    .lock()
                    .expect("attempting lock")
                    .remove(&trace);
                drop(hold);
            }
            .instrument(span),
        );
    }

    async fn attempt(
        self: &Arc<Self>,
        job: Arc<JobDefinition>,
        exec: Execution,
        lease: Lease,
        hold: &Hold,
    ) {
        if exec.status == Failed {
            // Recorded failed (no executor at all): only the retry policy is left to apply.
            tracing::warn!(
                error = exec.error_message.as_deref().unwrap_or(""),
                "execution failed before dispatch"
            );
            let verdict = Verdict::failed(exec.error_message.clone().unwrap_or_default());
            return self
                .settle_failed_at_record(&job, &exec, verdict, hold)
                .await;
        }
        // A retry waiting out its backoff stays PENDING in the database; if this instance
        // stops, compensation dispatches it once the lease has run out.
        if !self.until_due(exec.due_time).await {
            return;
        }
        let slot = tokio::select! {
            slot = self.call_slot() => slot,
            _ = self.halted() => return,
        };
        let executors = self
            .discovery
            .executors(job.spec.service_name.as_str())
            .await;
        if executors.is_empty() {
            self.alerts.no_executor(&job, &exec);
            let verdict = Verdict::failed(no_executor(&job));
            self.settle(Some(&job), &exec, &[Pending], verdict, None, hold)
                .await;
            return;
        }
        // The executor the row was planned for (the routing strategy's choice), while it is
        // live; otherwise where its range falls in today's plan.
        let first = exec
            .executor_instance
            .as_deref()
            .and_then(|planned| executors.iter().position(|e| e.addr.as_str() == planned))
            .or_else(|| plan::executor_for(exec.shard_start, exec.shard_count, executors.len()))
            .unwrap_or(0);
        let order: Vec<&ExecutorInstance> = (0..executors.len())
            .map(|i| &executors[(first + i) % executors.len()])
            .collect();
        let started = Utc::now();
        let first_addr = order[0].addr.to_string();
        // Set once this attempt's own verdict is written: a RUNNING refused after that was
        // refused because the row already ended here, not because someone cancelled it.
        let settled_here = Arc::new(AtomicBool::new(false));
        match lease.start(started, self.lease) {
            Start::CallFirst => {
                self.write_started(&exec, first_addr, started, settled_here.clone())
            }
            Start::TakeFirst => {
                let take = Transition {
                    held_by: Some((self.instance_id().to_string(), lease.since)),
                    executor_instance: Some(first_addr),
                    start_time: Some(started),
                    ..Transition::to(&[Pending], Running)
                };
                match self.store.transition(&exec.trace_id, &take).await {
                    Ok(Applied::Yes(_)) => {}
                    Ok(Applied::No) => {
                        return tracing::info!(
                            "execution taken over by compensation; not called here"
                        );
                    }
                    Err(e) => {
                        return tracing::warn!(error = %e, "could not take the execution; compensation dispatches it once its lease runs out");
                    }
                }
            }
        }
        let request = executor_request(&exec, &job, self.report_url(&exec.trace_id));
        let mut refused = Vec::new();
        let mut verdict = None;
        for (i, instance) in order.iter().enumerate() {
            if i > 0 {
                // Failover: the row names the executor being called.
                let moved = Transition {
                    executor_instance: Some(instance.addr.to_string()),
                    ..Transition::to(&[Pending, Running], Running)
                };
                if !matches!(
                    self.settler.write(&exec.trace_id, moved).await,
                    Ok(Applied::Yes(_))
                ) {
                    return;
                }
            }
            if exec.trigger_type == TriggerType::Cron && exec.retry_count == 0 {
                let delay = (Utc::now() - exec.fire_time).num_milliseconds().max(0) as f64 / 1000.0;
                metrics::histogram!("scheduler_fire_delay_seconds").record(delay);
            }
            tracing::info!(executor = %instance.addr, shard_start = exec.shard_start, shard_end = exec.shard_end, "calling executor");
            let outcome = {
                let _busy = self.busy.enter(instance.addr.to_string());
                self.client
                    .call(instance, job.spec.handler.as_str(), &request)
                    .await
            };
            match outcome {
                CallOutcome::Unreachable(err) => {
                    tracing::warn!(executor = %instance.addr, error = %err, "executor unreachable; failing over");
                    refused.push(format!("{}: {err}", instance.addr));
                }
                CallOutcome::Accepted => {
                    return tracing::info!(executor = %instance.addr, "executor accepted; waiting for its report");
                }
                CallOutcome::Finished {
                    status,
                    message,
                    error,
                } => {
                    verdict = Some(Verdict {
                        status,
                        message,
                        error,
                        retry_as: TriggerType::Retry,
                        executor: Some(instance.addr.to_string()),
                    });
                    break;
                }
                CallOutcome::NoAnswer(why) => {
                    drop(slot);
                    return self
                        .no_answer(&job, &exec, instance, why, started, hold)
                        .await;
                }
            }
        }
        drop(slot);
        let verdict = verdict.unwrap_or_else(|| {
            Verdict::failed(super::client::excerpt(&format!(
                "every executor instance refused the connection: {}",
                refused.join("; ")
            )))
        });
        if self
            .settle(
                Some(&job),
                &exec,
                &[Pending, Running],
                verdict,
                Some(started),
                hold,
            )
            .await
        {
            settled_here.store(true, Ordering::Release);
        }
    }

    /// Writes RUNNING for a call that went out under the lease, in the next batch. A row that
    /// was cancelled meanwhile gets a cancel request to the executor. When the RUNNING is
    /// refused because the attempt's own verdict was written first (`settled_here`; the two
    /// can be in concurrent batches), there is nothing to ask.
    fn write_started(
        self: &Arc<Self>,
        exec: &Execution,
        executor: String,
        at: DateTime<Utc>,
        settled_here: Arc<AtomicBool>,
    ) {
        let start = Transition {
            executor_instance: Some(executor),
            start_time: Some(at),
            ..Transition::to(&[Pending], Running)
        };
        let (this, trace) = (self.clone(), exec.trace_id.clone());
        self.tasks.spawn(async move {
            if let Ok(Applied::No) = this.settler.started(&trace, start).await
                && !settled_here.load(Ordering::Acquire)
                && let Ok(Some(now)) = this.store.get_execution(&trace).await
                && now.status == Cancelled
            {
                this.stop_at_executor(&now).await;
            }
        });
    }

    /// The call got no answer within the job's timeout: the handler may still run. The retry
    /// waits until the first attempt is known stopped: the executor confirms a cancel (or says
    /// it is not running it), or it has left discovery. Otherwise the row stays RUNNING with
    /// a note, and compensation settles it once the executor can tell.
    async fn no_answer(
        self: &Arc<Self>,
        job: &Arc<JobDefinition>,
        exec: &Execution,
        instance: &ExecutorInstance,
        why: String,
        started: DateTime<Utc>,
        hold: &Hold,
    ) {
        let stopped = match self.client.cancel(instance, &exec.trace_id, started).await {
            Probe::Finished { status, message } if status != Cancelled => {
                // It finished after all: its own verdict counts.
                let verdict = Verdict::from_probe(status, message);
                self.settle(
                    Some(job),
                    exec,
                    &[Pending, Running],
                    verdict,
                    Some(started),
                    hold,
                )
                .await;
                return;
            }
            Probe::Finished { .. } => Some("the executor stopped it on request"),
            Probe::Unknown { .. } => Some("the executor is not running it"),
            Probe::Running | Probe::Unsupported | Probe::Unreachable(_) => {
                if self.executor_gone(job, instance).await {
                    Some("the executor instance has left")
                } else {
                    None
                }
            }
        };
        match stopped {
            Some(how) => {
                let verdict = Verdict {
                    status: Timeout,
                    message: None,
                    error: Some(format!("{why}; {how}")),
                    retry_as: TriggerType::Retry,
                    executor: Some(instance.addr.to_string()),
                };
                self.settle(
                    Some(job),
                    exec,
                    &[Pending, Running],
                    verdict,
                    Some(started),
                    hold,
                )
                .await;
            }
            None => {
                let note = Transition {
                    error_message: Some(format!(
                        "{why}; the executor did not confirm it stopped, so compensation settles this execution once it can tell"
                    )),
                    ..Transition::to(&[Pending, Running], Running)
                };
                let _ = self.settler.write(&exec.trace_id, note).await;
                tracing::warn!(executor = %instance.addr, "no answer and no confirmed stop; left RUNNING for compensation");
            }
        }
    }

    /// Whether `instance` is no longer a live executor of `job`'s service.
    pub(super) async fn executor_gone(
        &self,
        job: &JobDefinition,
        instance: &ExecutorInstance,
    ) -> bool {
        !self
            .discovery
            .executors(job.spec.service_name.as_str())
            .await
            .iter()
            .any(|e| e.addr == instance.addr)
    }

    /// Asks the executor named on `exec` to stop it (best effort).
    pub(super) async fn stop_at_executor(&self, exec: &Execution) -> Option<Probe> {
        let instance = self.instance_of(exec).await?;
        let since = exec.start_time.unwrap_or(exec.due_time);
        let answer = self.client.cancel(&instance, &exec.trace_id, since).await;
        tracing::info!(trace_id = %exec.trace_id, executor = %instance.addr, answer = ?answer, "asked the executor to stop the execution");
        Some(answer)
    }

    /// A failure recorded at the fire (no executor): its retry is written separately, since
    /// the row never passed through a compare-and-set.
    async fn settle_failed_at_record(
        self: &Arc<Self>,
        job: &Arc<JobDefinition>,
        exec: &Execution,
        verdict: Verdict,
        hold: &Hold,
    ) {
        record_final(exec, Failed, None);
        self.alerts.no_executor(job, exec);
        self.alerts.execution_final(job, exec);
        let Some(retry) = self.retry_for(job, exec, Failed, TriggerType::Retry) else {
            return;
        };
        let note = Transition {
            error_message: verdict.error,
            retry: Some(retry),
            ..Transition::to(&[Failed], Failed)
        };
        if let Ok(Applied::Yes(Some(retry))) = self.settler.write(&exec.trace_id, note).await {
            self.spawn_retry(job.clone(), *retry, hold.clone());
        }
    }

    /// Compare-and-set of `exec` from one of `from` to the verdict, with the retry it earns in
    /// the same transaction; the retry then runs here. `false` when someone else decided the
    /// row first.
    pub(super) async fn settle(
        self: &Arc<Self>,
        job: Option<&Arc<JobDefinition>>,
        exec: &Execution,
        from: &'static [ExecutionStatus],
        verdict: Verdict,
        started: Option<DateTime<Utc>>,
        hold: &Hold,
    ) -> bool {
        let now = Utc::now();
        let started = started.or(exec.start_time);
        let duration_ms = started.map(|s| (now - s).num_milliseconds().max(0));
        let t = Transition {
            executor_instance: verdict.executor.clone(),
            finish_time: Some(now),
            duration_ms,
            result_message: verdict.message,
            error_message: verdict.error.clone(),
            retry: job.and_then(|j| self.retry_for(j, exec, verdict.status, verdict.retry_as)),
            ..Transition::to(from, verdict.status)
        };
        match self.settler.write(&exec.trace_id, t).await {
            Ok(Applied::Yes(retry)) => {
                record_final(exec, verdict.status, duration_ms);
                if let Some(job) = job {
                    let ended = Execution {
                        status: verdict.status,
                        error_message: verdict.error.clone(),
                        finish_time: Some(now),
                        ..exec.clone()
                    };
                    self.alerts.execution_final(job, &ended);
                    if verdict.status == Success && !job.spec.child_jobs.is_empty() {
                        self.spawn_children(job.clone(), ended);
                    }
                }
                tracing::info!(status = %verdict.status, error = verdict.error.as_deref().unwrap_or(""), "execution finished");
                if let (Some(retry), Some(job)) = (retry, job) {
                    tracing::info!(retry_trace_id = %retry.trace_id, retry = retry.retry_count, "retry scheduled");
                    self.spawn_retry(job.clone(), *retry, hold.clone());
                } else if matches!(verdict.status, Failed | Timeout)
                    && job.is_some_and(|j| j.spec.max_retry > 0)
                {
                    tracing::warn!(retries = exec.retry_count, "giving up after the last retry");
                }
                true
            }
            Ok(Applied::No) => false,
            Err(e) => {
                tracing::warn!(error = %e, "result not written: shutting down; compensation settles it");
                false
            }
        }
    }

    fn spawn_retry(self: &Arc<Self>, job: Arc<JobDefinition>, retry: Execution, hold: Hold) {
        let lease = Lease {
            since: retry.due_time,
        };
        self.spawn_attempt(job, retry, lease, hold);
    }

    /// The retry row a `status` earns under the job's retry policy, due after the backoff.
    fn retry_for(
        &self,
        job: &JobDefinition,
        exec: &Execution,
        status: ExecutionStatus,
        trigger: TriggerType,
    ) -> Option<crate::jobs::NewExecution> {
        if !matches!(status, Failed | Timeout) || exec.retry_count >= job.spec.max_retry {
            return None;
        }
        let now = Utc::now();
        let delay = self.backoff.delay(exec.retry_count + 1);
        let due = now + chrono::Duration::from_std(delay).unwrap_or_default();
        Some(retry_row(exec, self.instance_id(), now, due, trigger))
    }
}

pub(super) fn record_final(exec: &Execution, status: ExecutionStatus, duration_ms: Option<i64>) {
    let job = exec.job_name.clone();
    metrics::counter!("job_execution_total", "job_name" => job.clone(), "status" => status.as_str())
        .increment(1);
    if let Some(ms) = duration_ms {
        metrics::histogram!("job_execution_duration_seconds", "job_name" => job.clone())
            .record(ms as f64 / 1000.0);
    }
    if matches!(status, Failed | Timeout) {
        metrics::counter!("job_execution_failures_total", "job_name" => job).increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_calls_first_only_in_the_first_half_of_its_lease() {
        let since: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let lease = chrono::Duration::seconds(10);
        let l = Lease { since };
        assert_eq!(l.start(since, lease), Start::CallFirst);
        assert_eq!(
            l.start(since + chrono::Duration::seconds(5), lease),
            Start::CallFirst
        );
        assert_eq!(
            l.start(since + chrono::Duration::milliseconds(5001), lease),
            Start::TakeFirst
        );
        assert_eq!(
            l.start(since + chrono::Duration::seconds(60), lease),
            Start::TakeFirst
        );
    }
}
