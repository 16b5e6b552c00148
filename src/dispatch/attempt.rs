//! One attempt at one execution row: wait until it is due, take a call slot, call the
//! executors in order until one answers, and settle the row with what it said.
//!
//! Who may call for a row is decided by its state in the database, never by memory alone:
//! - a PENDING row is *held* by the instance it names (`scheduler_instance`) from its
//!   `due_time` for `compensation.pending_grace_seconds` (the lease). A cron fire's row
//!   recorded ahead of its instant ([`Start::Claimed`], admitted first when its job is
//!   guarded) is called at once within the first half of its lease, at the executor it was
//!   planned for, RUNNING written right after the call went out, so no database round trip
//!   stands between the instant and the call; every other row ([`Start::Take`]: manual runs,
//!   retries, children, rows taken over from a departed holder, a claimed row late in its
//!   lease or whose planned executor has left) is first taken with a compare-and-set
//!   PENDING → RUNNING naming its executor, guarded by (holder, due time), so a row that was
//!   cancelled or taken over meanwhile is never called, and a cancel reaches the executor
//!   that runs it;
//! - a RUNNING row has had its call sent (or is about to); only its result, or compensation
//!   asking the executor, moves it on;
//! - every final status is a compare-and-set, and what it earns (a retry, children) is
//!   written in the same transaction (see [`verdict`](super::verdict)).
//!
//! A call that gets no answer within `timeoutSeconds` + 5 s may still run: the executor is
//! asked to stop it and given as long to answer as the SDK takes to stop a handler. Only a
//! confirmed stop (or the executor saying it does not run it, or having left) ends the row
//! as TIMEOUT and lets its retry run; otherwise the row stays RUNNING for compensation, which
//! asks again until the executor can tell. A range never runs twice at once because of a
//! retry.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use foldhash::HashSet;
use tokio::sync::mpsc;

use super::admission::{Admission, Hold};
use super::calls::{CallLog, LastCall};
use super::caps::ServiceCaps;
use super::client::{CallOutcome, ExecutorClient, Probe, excerpt, executor_request};
use super::rows::no_executor;
use super::tasks::Tasks;
use super::verdict::{Outcomes, Verdict};
use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::discovery::ExecutorInstance;
use crate::jobs::log::LogBatch;
use crate::jobs::{
    Execution, ExecutionStatus, InstanceAddr, JobDefinition, Namespace, RouteStrategy, TriggerType,
};
use crate::store::{Applied, ExecutionStore, Follow, JobStore, LogStore, Transition};

use ExecutionStatus::{Cancelled, Pending, Running, Timeout};

/// How an attempt may start its call (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// A cron fire's row recorded ahead, launched at its instant (and admitted first when its
    /// job is guarded).
    Claimed,
    /// Take the row (PENDING → RUNNING, guarded by holder and due time) before calling.
    Take,
}

/// One attempt at one row, with the backlog place of its fire.
pub struct Attempt {
    pub job: Arc<JobDefinition>,
    pub row: Execution,
    pub start: Start,
    pub hold: Hold,
}

/// Rows to launch that a verdict earned (children), with the backlog place of their fire.
pub type Earned = (Vec<Execution>, Hold);

/// Between reads of a row whose take got no answer, while the database does not answer.
const ASK_AGAIN: Backoff = Backoff::doubling(
    std::time::Duration::from_millis(100),
    std::time::Duration::from_secs(1),
);

/// Whether `now`, a row read after a take whose answer was lost, shows that take: RUNNING
/// towards `executor`, started at `at` (to the millisecond the database keeps). Any other
/// writer leaves another start, or another status.
fn took_it(now: &Execution, executor: &str, at: DateTime<Utc>) -> bool {
    now.status == Running
        && now.executor_instance.as_deref() == Some(executor)
        && now
            .start_time
            .is_some_and(|s| s.timestamp_millis() == at.timestamp_millis())
}

/// Runs attempts, and answers for the rows it runs.
pub struct Attempts {
    pub clock: Clock,
    pub executions: Arc<dyn ExecutionStore>,
    pub jobs: Arc<dyn JobStore>,
    /// Where the logs answers carry are stored.
    pub logs: Arc<dyn LogStore>,
    pub client: ExecutorClient,
    pub admission: Arc<Admission>,
    /// Per-service concurrency caps (`[executors.limits]`).
    pub caps: Arc<ServiceCaps>,
    pub tasks: Arc<Tasks>,
    pub outcomes: Outcomes,
    /// How long a PENDING row stays its holder's past its due time.
    pub lease: chrono::Duration,
    /// `http://{this instance}`, where executors report background results.
    pub report_base: String,
    /// Trace ids of the rows this instance has an attempt at right now: compensation leaves
    /// them alone even when their lease ran out (a slow call whose RUNNING is not written
    /// yet).
    pub attempting: Mutex<HashSet<String>>,
    /// Children a SUCCESS earned, to be launched (their fires are admitted there).
    pub children: mpsc::UnboundedSender<Earned>,
    /// The last call to each executor and its outcome (the console's Executors page).
    pub calls: CallLog,
}

impl Attempts {
    /// Runs `attempt` in the background, inside a span carrying its trace id.
    pub fn spawn(self: &Arc<Self>, attempt: Attempt) {
        use tracing::Instrument;
        let span = tracing::info_span!("execution", trace_id = %attempt.row.trace_id, job_name = %attempt.row.job_name);
        let trace = attempt.row.trace_id.clone();
        self.attempting
            .lock()
            .expect("attempting lock")
            .insert(trace.clone());
        let this = self.clone();
        self.tasks.spawn(
            async move {
                this.run(attempt).await;
                this.attempting
                    .lock()
                    .expect("attempting lock")
                    .remove(&trace);
            }
            .instrument(span),
        );
    }

    /// Whether this instance has an attempt at `trace_id` going.
    pub fn is_attempting(&self, trace_id: &str) -> bool {
        self.attempting
            .lock()
            .expect("attempting lock")
            .contains(trace_id)
    }

    async fn run(self: &Arc<Self>, attempt: Attempt) {
        let Attempt {
            job,
            row,
            start,
            hold,
        } = attempt;
        // A retry waiting out its backoff stays PENDING in the database; if this instance
        // stops, compensation dispatches it once the lease has run out.
        if !self.tasks.until_due(row.due_time).await {
            return;
        }
        // The service's cap first: a capped service waiting for its calls to end never holds
        // the instance's call slots from the others.
        let service_slot = tokio::select! {
            slot = self.caps.slot(job.spec.service_name.as_str()) => slot,
            _ = self.tasks.halted() => return,
        };
        let slot = tokio::select! {
            slot = self.admission.call_slot() => slot,
            _ = self.tasks.halted() => return,
        };
        let executors = self.outcomes.planner.executors(&job).await;
        let from: &'static [ExecutionStatus] = &[Pending];
        if executors.is_empty() {
            self.outcomes.alerts.no_executor(&job, &row);
            let verdict = Verdict::failed(no_executor(&job)).while_held(&row);
            self.conclude(&job, &row, from, verdict, None, &hold).await;
            return;
        }
        let pinned = job.spec.route_strategy == RouteStrategy::Broadcast;
        let order = failover_order(&row, &executors, pinned);
        if order.is_empty() {
            // A broadcast row whose executor has left: no other executor may run it.
            let why = format!(
                "executor {} of this broadcast row is no longer a live instance of `{}`",
                row.executor_instance.as_deref().unwrap_or("-"),
                job.spec.service_name
            );
            let verdict = Verdict::failed(why).while_held(&row);
            self.conclude(&job, &row, from, verdict, None, &hold).await;
            return;
        }
        let started = self.clock.now();
        let first = order[0].addr.to_string();
        // Set once this attempt's own verdict is written: a RUNNING refused after that was
        // refused because the row already ended here, not because someone cancelled it.
        let settled_here = Arc::new(AtomicBool::new(false));
        let planned = row.executor_instance.as_deref() == Some(first.as_str());
        let from: &'static [ExecutionStatus] = match start {
            Start::Claimed if planned && started - row.due_time <= self.lease / 2 => {
                self.write_started(&row, first, started, settled_here.clone());
                &[Pending, Running]
            }
            Start::Claimed | Start::Take => {
                if !self.take(&row, first, started).await {
                    return;
                }
                &[Running]
            }
        };
        let Some(outcome) = self.call(&job, &row, &order).await else {
            return;
        };
        drop(slot);
        drop(service_slot);
        // Every verdict of this attempt is written only while the row is still held as it
        // was handed out: a row taken over meanwhile (this instance paused past its lease,
        // compensation called it again) is answered for by its new holder.
        let verdict = match outcome {
            Called::Finished(verdict, log) => {
                // Outside the call slots: storing the log waits for its group commit.
                if let Some(log) = log {
                    self.keep_log(&row.trace_id, log).await;
                }
                verdict.while_held(&row)
            }
            Called::Accepted => return,
            Called::NoAnswer { instance, why } => {
                match self.no_answer(&job, &row, instance, why, started).await {
                    Some(verdict) => verdict.while_held(&row),
                    None => return,
                }
            }
        };
        if self
            .conclude(&job, &row, from, verdict, Some(started), &hold)
            .await
        {
            settled_here.store(true, Ordering::Release);
        } else {
            // Cancelled meanwhile: the executor's answer says the handler has ended.
            let trace = std::slice::from_ref(&row.trace_id);
            let _ = self.executions.stops_confirmed(trace).await;
        }
    }

    /// Takes the row for this instance before calling: PENDING → RUNNING, guarded by holder
    /// and due time. `false` when it was cancelled or taken over meanwhile.
    async fn take(&self, row: &Execution, executor: String, at: DateTime<Utc>) -> bool {
        let take = Transition {
            held_by: row.lease(),
            ..Transition::started(executor.clone(), at)
        };
        match self.executions.transition(&row.trace_id, &take).await {
            Ok(Applied::Yes(_)) => true,
            Ok(Applied::No) => {
                tracing::info!("execution cancelled or taken over meanwhile; not called here");
                false
            }
            Err(e) => {
                // The write may have gone in with its answer lost (a connection cut at the
                // commit): the row would then read RUNNING, called, while nobody calls it.
                // Only the row can tell, so it is asked until the database answers.
                tracing::warn!(error = %e, "the take of the execution got no answer; asking the database whether it went in");
                self.took_after_all(row, &executor, at).await
            }
        }
    }

    /// Whether a take at `at` towards `executor`, whose answer was lost, went in.
    async fn took_after_all(&self, row: &Execution, executor: &str, at: DateTime<Utc>) -> bool {
        let mut asked = 0;
        loop {
            match self.executions.get_execution(&row.trace_id).await {
                Ok(now) => {
                    let took = now.as_ref().is_some_and(|n| took_it(n, executor, at));
                    if took {
                        tracing::info!("the take went in; calling");
                    } else {
                        tracing::info!(
                            "the take did not go in; compensation dispatches the execution once its lease runs out"
                        );
                    }
                    return took;
                }
                Err(e) => {
                    asked += 1;
                    let wait = ASK_AGAIN.delay(asked);
                    tracing::warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "cannot read the execution; asking again");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = self.tasks.halted() => return false,
                    }
                }
            }
        }
    }

    /// Calls the executors in `order` until one answers (failover on refused connections).
    /// `None` when the row was decided elsewhere before a failover call.
    async fn call(
        &self,
        job: &JobDefinition,
        row: &Execution,
        order: &[&ExecutorInstance],
    ) -> Option<Called> {
        let request = executor_request(row, job, self.report_url(&row.trace_id));
        let mut refused = Vec::new();
        for (i, instance) in order.iter().enumerate() {
            // Failover: the row names the executor being called, and a row cancelled
            // meanwhile is not called again.
            if i > 0 && !self.name_executor(row, instance.addr.as_str()).await {
                return None;
            }
            if row.trigger_type == TriggerType::Cron && row.retry_count == 0 {
                let late = (self.clock.now() - row.fire_time).num_milliseconds().max(0);
                metrics::histogram!("scheduler_fire_delay_seconds").record(late as f64 / 1000.0);
            }
            tracing::debug!(executor = %instance.addr, shard_start = row.shard_start, shard_end = row.shard_end, "calling executor");
            let outcome = {
                let _busy = self.admission.enter(instance.addr.as_str());
                self.client
                    .call(
                        instance,
                        job.spec.handler.as_str(),
                        Some(job.name().namespace()).filter(|ns| *ns != Namespace::DEFAULT),
                        &request,
                    )
                    .await
            };
            let told = match &outcome {
                CallOutcome::Unreachable(_) => "UNREACHABLE",
                CallOutcome::Accepted => "ACCEPTED",
                CallOutcome::Finished { status, .. } => status.as_str(),
                CallOutcome::NoAnswer(_) => "NO_ANSWER",
            };
            self.calls.record(
                instance.addr.as_str(),
                LastCall {
                    trace_id: row.trace_id.clone(),
                    job_name: row.job_name.clone(),
                    at: self.clock.now(),
                    outcome: told,
                },
            );
            match outcome {
                CallOutcome::Unreachable(err) => {
                    tracing::warn!(executor = %instance.addr, error = %err, "executor unreachable; failing over");
                    refused.push(format!("{}: {err}", instance.addr));
                }
                CallOutcome::Accepted => {
                    tracing::debug!(executor = %instance.addr, "executor accepted; waiting for its report");
                    return Some(Called::Accepted);
                }
                CallOutcome::Finished {
                    status,
                    message,
                    error,
                    log,
                } => {
                    return Some(Called::Finished(
                        Verdict {
                            status,
                            message,
                            error,
                            retry_as: TriggerType::Retry,
                            executor: Some(instance.addr.to_string()),
                            held_by: None,
                        },
                        log,
                    ));
                }
                CallOutcome::NoAnswer(why) => {
                    return Some(Called::NoAnswer {
                        instance: (*instance).clone(),
                        why,
                    });
                }
            }
        }
        let refused = format!(
            "every executor instance refused the connection: {}",
            refused.join("; ")
        );
        Some(Called::Finished(Verdict::failed(excerpt(&refused)), None))
    }

    /// Stores the log an answer carried, before its verdict: a log is whole by the time its
    /// execution reads final. A log that breaks a rule or cannot be stored is lost, and a
    /// warning says so; the verdict settles all the same.
    async fn keep_log(&self, trace_id: &str, batch: LogBatch) {
        let log = match batch.check(self.clock.now()) {
            Ok(log) => log,
            Err((field, why)) => {
                return tracing::warn!(field, why, "the answer's logs break a rule; not kept");
            }
        };
        if let Err(e) = self.logs.append_log(trace_id, log).await {
            tracing::warn!(error = %e, "the answer's logs could not be stored");
        }
    }

    /// Names `executor` on the row before it is called, while the row is still open. `false`
    /// when it was decided (cancelled) meanwhile: it is not called.
    async fn name_executor(&self, row: &Execution, executor: &str) -> bool {
        // Every move into RUNNING names its start too (compensation reads it).
        let moved = Transition {
            from: &[Pending, Running],
            held_by: row.lease(),
            ..Transition::started(executor.to_string(), self.clock.now())
        };
        let settler = &self.outcomes.settler;
        settler
            .write(&row.trace_id, moved)
            .await
            .is_ok_and(|a| a.applied())
    }

    fn report_url(&self, trace_id: &str) -> String {
        format!(
            "{}/api/v1/jobs/executions/{trace_id}/result",
            self.report_base
        )
    }

    /// Writes RUNNING for a call that went out under the lease, in the next batch. A row that
    /// was cancelled meanwhile gets a cancel request to the executor. When the RUNNING is
    /// refused because the attempt's own verdict was written first (`settled_here`; the two
    /// can be in concurrent batches), there is nothing to ask.
    fn write_started(
        self: &Arc<Self>,
        row: &Execution,
        executor: String,
        at: DateTime<Utc>,
        settled_here: Arc<AtomicBool>,
    ) {
        let start = Transition {
            held_by: row.lease(),
            row_id: Some(row.id),
            ..Transition::started(executor.clone(), at)
        };
        let (this, trace) = (self.clone(), row.trace_id.clone());
        // A stopping instance waits for the outcome as for a call (an accepted call's RUNNING
        // is still deferred when its attempt ends).
        let held = self.tasks.hold();
        let settler = &self.outcomes.settler;
        settler.started(&row.trace_id, start, move |applied| {
            // Released once the check below is a tracked task of its own, if it is needed.
            let _held = held;
            if applied.applied() {
                return;
            }
            let tasks = this.tasks.clone();
            tasks.spawn(async move {
                if !settled_here.load(Ordering::Acquire)
                    && let Ok(Some(now)) = this.executions.get_execution(&trace).await
                    && now.status == Cancelled
                {
                    // Asked where the call went, whatever executor the row was planned for.
                    let called = Execution {
                        executor_instance: Some(executor),
                        ..now
                    };
                    this.stop(&called).await;
                }
            });
        });
    }

    /// The call got no answer within the job's timeout: the handler may still run. The
    /// executor is asked to stop it; the verdict (TIMEOUT, or the executor's own when it
    /// finished after all) is returned once it is known stopped. `None` leaves the row
    /// RUNNING, with a note, for compensation to settle once the executor can tell.
    async fn no_answer(
        &self,
        job: &JobDefinition,
        row: &Execution,
        instance: ExecutorInstance,
        why: String,
        started: DateTime<Utc>,
    ) -> Option<Verdict> {
        let addr = instance.addr.to_string();
        if !self.still_held(row).await {
            // Its new holder called it again (the same execution, which the executor runs
            // once): a stop asked from here would stop that call.
            tracing::warn!(executor = %addr, "no answer, and the execution was taken over meanwhile; its new holder answers for it");
            return None;
        }
        let stopped = match self.client.cancel(&instance, &row.trace_id, started).await {
            Probe::Finished { status, message } if status != Cancelled => {
                // It finished after all: its own verdict counts.
                return Some(Verdict::from_probe(status, message).by(&addr));
            }
            Probe::Finished { .. } => Some("the executor stopped it on request"),
            Probe::Unknown { .. } => Some("the executor is not running it"),
            Probe::Running | Probe::Unsupported | Probe::Unreachable(_) => None,
        };
        if let Some(how) = stopped {
            return Some(Verdict::new(Timeout, format!("{why}; {how}")).by(&addr));
        }
        let note = Transition {
            error_message: Some(format!(
                "{why}; the executor did not confirm it stopped, so compensation settles this execution once it can tell"
            )),
            held_by: row.lease(),
            ..Transition::to(&[Running], Running)
        };
        let _ = self.outcomes.settler.write(&row.trace_id, note).await;
        tracing::warn!(executor = %addr, job_name = %job.name(), "no answer and no confirmed stop; left RUNNING for compensation");
        None
    }

    /// Whether `row` is still RUNNING and held as it was handed to this attempt. `false`
    /// too when the database cannot tell: compensation asks the executor once it can.
    async fn still_held(&self, row: &Execution) -> bool {
        match self.executions.get_execution(&row.trace_id).await {
            Ok(Some(now)) => now.status == Running && now.lease() == row.lease(),
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the execution; compensation asks its executor");
                false
            }
        }
    }

    /// Settles `row` with `verdict` and starts what it earned: its retry here, its children
    /// through their admission. `true` when this verdict was written.
    pub async fn conclude(
        self: &Arc<Self>,
        job: &Arc<JobDefinition>,
        row: &Execution,
        from: &'static [ExecutionStatus],
        verdict: Verdict,
        started: Option<DateTime<Utc>>,
        hold: &Hold,
    ) -> bool {
        match self
            .outcomes
            .settle(Some(job), row, from, verdict, started)
            .await
        {
            Some(follow) => {
                self.follow(job, follow, hold);
                true
            }
            None => false,
        }
    }

    /// Starts the rows a verdict earned.
    pub fn follow(self: &Arc<Self>, job: &Arc<JobDefinition>, follow: Follow, hold: &Hold) {
        if let Some(retry) = follow.retry {
            tracing::info!(retry_trace_id = %retry.trace_id, retry = retry.retry_count, "retry scheduled");
            self.spawn(Attempt {
                job: job.clone(),
                row: *retry,
                start: Start::Take,
                hold: hold.clone(),
            });
        }
        if !follow.children.is_empty() {
            tracing::info!(children = follow.children.len(), "child jobs triggered");
            let _ = self.children.send((follow.children, hold.clone()));
        }
    }

    /// Asks the executor named on `exec` to stop it, waiting as long as an executor may take
    /// to stop a handler. `None` when no executor is named.
    pub async fn stop(&self, exec: &Execution) -> Option<Probe> {
        let instance = self.instance_of(exec).await?;
        let since = exec.start_time.unwrap_or(exec.due_time);
        let answer = self.client.cancel(&instance, &exec.trace_id, since).await;
        tracing::info!(trace_id = %exec.trace_id, executor = %instance.addr, answer = ?answer, "asked the executor to stop the execution");
        Some(answer)
    }

    /// What the executor named on `exec` knows of it. `None` when no executor is named.
    pub async fn status(&self, exec: &Execution) -> Option<(ExecutorInstance, Probe)> {
        let instance = self.instance_of(exec).await?;
        let since = exec.start_time.unwrap_or(exec.due_time);
        let probe = self.client.status(&instance, &exec.trace_id, since).await;
        Some((instance, probe))
    }

    /// Whether `instance` is no longer a live executor of `job`'s service.
    pub async fn executor_gone(&self, job: &JobDefinition, instance: &ExecutorInstance) -> bool {
        !self
            .outcomes
            .planner
            .executors(job)
            .await
            .iter()
            .any(|e| e.addr == instance.addr)
    }

    /// The executor instance named on `exec`, with its path prefix when discovery knows it.
    async fn instance_of(&self, exec: &Execution) -> Option<ExecutorInstance> {
        let addr = InstanceAddr::parse(exec.executor_instance.as_deref()?).ok()?;
        let known = match self.jobs.get_job(&exec.job_name).await.ok().flatten() {
            Some(job) => self
                .outcomes
                .planner
                .executors(&job)
                .await
                .iter()
                .find(|e| e.addr == addr)
                .cloned(),
            None => None,
        };
        Some(known.unwrap_or(ExecutorInstance {
            addr,
            path_prefix: None,
        }))
    }
}

/// What a call came to.
enum Called {
    /// The verdict, and the rest of the handler's log when the answer carried it.
    Finished(Verdict, Option<LogBatch>),
    /// 202: the executor reports later.
    Accepted,
    NoAnswer {
        instance: ExecutorInstance,
        why: String,
    },
}

/// The executors in the order a row tries them: the one it was planned for while it is live
/// (the routing strategy's choice), otherwise where its range falls in today's plan; then the
/// others, in list order from there. A `pinned` row (a broadcast fire's) tries its own
/// executor only, or none once it has left.
fn failover_order<'a>(
    row: &Execution,
    executors: &'a [ExecutorInstance],
    pinned: bool,
) -> Vec<&'a ExecutorInstance> {
    let planned = row
        .executor_instance
        .as_deref()
        .and_then(|planned| executors.iter().position(|e| e.addr.as_str() == planned));
    if pinned {
        return planned.map(|i| vec![&executors[i]]).unwrap_or_default();
    }
    let first = planned
        .or_else(|| super::plan::executor_for(row.shard_start, row.shard_count, executors.len()))
        .unwrap_or(0);
    (0..executors.len())
        .map(|i| &executors[(first + i) % executors.len()])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::InstanceAddr;
    use crate::dispatch::rows::fire_rows;

    /// A cron row planned for `10.0.0.1:9999`, recorded PENDING.
    fn pending() -> Execution {
        let now: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let job = JobDefinition::stored(
            serde_json::json!({"name": "j", "serviceName": "s", "handler": "h",
                "cron": "0 0 3 * * ?"}),
            now,
        );
        let executor = ExecutorInstance {
            addr: InstanceAddr::parse("10.0.0.1:9999").unwrap(),
            path_prefix: None,
        };
        fire_rows(
            &job,
            now,
            TriggerType::Cron,
            None,
            &[executor],
            0,
            "me",
            now,
        )
        .pop()
        .unwrap()
        .recorded(1)
    }

    #[test]
    fn a_take_whose_answer_was_lost_is_known_by_its_start() {
        let at: DateTime<Utc> = "2026-01-01T00:00:05.123456Z".parse().unwrap();
        let row = pending();
        assert!(
            !took_it(&row, "10.0.0.1:9999", at),
            "still PENDING: not taken"
        );
        // As the database keeps it: RUNNING, towards the executor, the start to the ms.
        let taken = Execution {
            status: Running,
            executor_instance: Some("10.0.0.1:9999".into()),
            start_time: Some("2026-01-01T00:00:05.123Z".parse().unwrap()),
            ..row.clone()
        };
        assert!(took_it(&taken, "10.0.0.1:9999", at));
        // Taken by another attempt (another start), or already ended: not this take.
        let other = Execution {
            start_time: Some("2026-01-01T00:00:06.500Z".parse().unwrap()),
            ..taken.clone()
        };
        assert!(!took_it(&other, "10.0.0.1:9999", at));
        let ended = Execution {
            status: ExecutionStatus::Cancelled,
            ..taken.clone()
        };
        assert!(!took_it(&ended, "10.0.0.1:9999", at));
        assert!(!took_it(&taken, "10.0.0.2:9999", at), "another executor");
    }
}
