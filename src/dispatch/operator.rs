//! What operators and executors ask of dispatch through the API: a manual trigger, a re-run of
//! a finished execution, a cancel, and the result report of a background execution. Each
//! records what it decides before anything is called, and goes through the same stages as a
//! cron fire: recorded rows, launched (a guarded job's trigger is admitted under its overlap
//! policy), attempts that take their row before calling, verdicts settled with their retries.

use std::sync::Arc;

use chrono::SubsecRound;

use super::attempt::{Attempt, Attempts, Start};
use super::launch::{Launcher, Ready};
use super::planner::Planner;
use super::rows;
use super::series;
use super::verdict::Verdict;
use super::waiting::WaitingRoom;
use crate::clock::Clock;
use crate::jobs::{
    Execution, ExecutionStatus, InstanceAddr, JobDefinition, OverlapPolicy, TriggerType,
};
use crate::store::{Admitted, Applied, FireOutcome, Store, StoreError, Transition};

use ExecutionStatus::{Cancelled, Failed, Pending, Running, Success};

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("job `{0}` does not exist")]
    JobNotFound(String),
    #[error("execution `{0}` does not exist")]
    ExecutionNotFound(String),
    #[error("execution is {0}; only finished executions can be retried")]
    NotFinished(ExecutionStatus),
    #[error("execution is {0}, not RUNNING; its result was already decided")]
    NotRunning(ExecutionStatus),
    #[error("execution is {0}, already final; only PENDING or RUNNING executions can be cancelled")]
    AlreadyFinal(ExecutionStatus),
    #[error(
        "execution belongs to job `{0}` as it was before it was deleted and created again; trigger the job instead"
    )]
    EarlierJob(String),
    #[error("executor {0} is not a live instance of service `{1}`")]
    ExecutorNotLive(String, String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the scheduler is shutting down")]
    Stopping,
}

/// What a manual trigger may choose for this run.
#[derive(Debug, Clone, Default)]
pub struct TriggerOptions {
    /// Replaces the job's `jobParams` for this run (and its retries).
    pub job_params: Option<serde_json::Value>,
    /// Runs every range on this executor, which must be a live instance of the service.
    pub executor: Option<InstanceAddr>,
}

pub struct Operator {
    pub clock: Clock,
    pub store: Arc<dyn Store>,
    pub planner: Arc<Planner>,
    pub waiting: Arc<WaitingRoom>,
    pub launcher: Arc<Launcher>,
    pub attempts: Arc<Attempts>,
}

impl Operator {
    async fn job(&self, name: &str) -> Result<Arc<JobDefinition>, DispatchError> {
        Ok(Arc::new(
            self.store
                .get_job(name)
                .await?
                .ok_or_else(|| DispatchError::JobNotFound(name.into()))?,
        ))
    }

    async fn execution(&self, trace_id: &str) -> Result<Execution, DispatchError> {
        self.store
            .get_execution(trace_id)
            .await?
            .ok_or_else(|| DispatchError::ExecutionNotFound(trace_id.into()))
    }

    /// Fires `job` now on this instance, whoever owns it, with this run's `jobParams` and
    /// executor when given. The job's overlap policy applies as to a cron fire: under SKIP,
    /// while the job still runs, the rows are recorded SKIPPED and nothing is called; under
    /// COVER the open executions are stopped first. Answers the rows as recorded (and, for a
    /// guarded job, as admitted).
    pub async fn trigger(
        &self,
        job_name: &str,
        options: TriggerOptions,
    ) -> Result<Vec<Execution>, DispatchError> {
        let job = self.job(job_name).await?;
        // The executor chosen for this run is kept even when it was planned under another
        // list: ranges follow `executor` alone.
        let only = match options.executor {
            Some(wanted) => {
                let mut live = self.planner.executors(&job).await.to_vec();
                live.retain(|e| e.addr == wanted);
                if live.is_empty() {
                    return Err(DispatchError::ExecutorNotLive(
                        wanted.to_string(),
                        job.spec.service_name.to_string(),
                    ));
                }
                Some(live)
            }
            None => None,
        };
        let now = self.clock.now();
        let mut planned = self
            .planner
            .plan(&job, now.trunc_subsecs(0), TriggerType::Manual, now, only)
            .await;
        for r in &mut planned {
            // On the row, so that whoever sends it (or its retries) sends the run's params.
            r.job_params = options.job_params.clone();
        }
        metrics::counter!("scheduler_fires_total", "job_name" => job_name.to_string(), "trigger" => TriggerType::Manual.as_str()).increment(1);
        let no_executor = planned.iter().any(|r| r.status == Failed);
        if job.spec.overlap_policy == OverlapPolicy::Allow || no_executor {
            let recorded = self.record(planned).await?;
            self.launch(job, recorded.clone()).await;
            // A fire with no executor is recorded FAILED with its retry: the answer is the
            // fire.
            return Ok(recorded
                .into_iter()
                .filter(|r| r.retry_count == 0)
                .collect());
        }
        // A guarded job's run is recorded and judged in one transaction.
        let policy = job.spec.overlap_policy;
        let outcome = self
            .store
            .record_guarded(policy, &planned, self.clock.now())
            .await?;
        let answer = match &outcome {
            Admitted::Run { rows, .. } | Admitted::Skipped { rows, .. } => rows.clone(),
            Admitted::Withdrawn | Admitted::Gone => {
                return Err(DispatchError::JobNotFound(job_name.into()));
            }
        };
        let fire = Ready {
            job,
            rows: Vec::new(),
            hold: None,
            claimed: None,
        };
        self.launcher.admitted(fire, outcome).await;
        Ok(answer)
    }

    async fn launch(&self, job: Arc<JobDefinition>, rows: Vec<Execution>) {
        let fire = Ready {
            job,
            rows,
            hold: None,
            claimed: None,
        };
        self.launcher.launch(vec![fire]).await;
    }

    async fn record(
        &self,
        rows: Vec<crate::jobs::NewExecution>,
    ) -> Result<Vec<Execution>, DispatchError> {
        match self.store.record_fire(None, &rows).await? {
            FireOutcome::Recorded(rows) => Ok(rows),
            FireOutcome::AlreadyFired | FireOutcome::Behind(_) => {
                unreachable!("unclaimed fires are always recorded")
            }
        }
    }

    /// Runs a finished execution's range again as a new RETRY execution (operator's retry).
    /// It continues a run the overlap policy let through, so it is not judged again.
    pub async fn retry(&self, trace_id: &str) -> Result<Execution, DispatchError> {
        let parent = self.execution(trace_id).await?;
        if !parent.status.is_final() {
            return Err(DispatchError::NotFinished(parent.status));
        }
        let job = self.job(&parent.job_name).await?;
        // A job deleted and created again under its name is another job: a row recorded
        // before it was created is the earlier job's, which its definition never ran.
        if parent.trigger_time < job.created_at {
            return Err(DispatchError::EarlierJob(parent.job_name));
        }
        let row = rows::rerun_row(&parent, self.planner.me(), self.clock.now());
        let exec = self
            .record(vec![row])
            .await?
            .pop()
            .expect("one row recorded");
        self.attempts.spawn(Attempt {
            job,
            row: exec.clone(),
            start: Start::Take,
            hold: None,
        });
        Ok(exec)
    }

    /// The result an executor reports for an execution (a 202 one, or one whose caller went
    /// away). `status` is the SDK's precise verdict when it gave one.
    pub async fn report(
        &self,
        trace_id: &str,
        success: bool,
        status: Option<ExecutionStatus>,
        message: Option<String>,
    ) -> Result<Execution, DispatchError> {
        let exec = self.execution(trace_id).await?;
        let status = status.unwrap_or(if success { Success } else { Failed });
        // A deleted job's row is still settled, with no retry policy left to apply.
        let job = self.store.get_job(&exec.job_name).await?.map(Arc::new);
        let verdict = Verdict::from_probe(status, message);
        let outcomes = &self.attempts.outcomes;
        match outcomes
            .settle(job.as_ref(), &exec, &[Pending, Running], verdict, None)
            .await
        {
            Some(follow) => {
                if let Some(job) = &job {
                    self.attempts.follow(job, follow, &None);
                }
                self.execution(trace_id).await
            }
            None => {
                // Decided already (cancelled, say): the report says the handler has ended.
                let _ = self.store.stops_confirmed(&[trace_id.to_string()]).await;
                let now = self.execution(trace_id).await?.status;
                Err(DispatchError::NotRunning(now))
            }
        }
    }

    /// Stops a PENDING or RUNNING execution: CANCELLED by compare-and-set, then the executor
    /// it names is asked to stop it (and remembers the cancel, so a call that arrives after
    /// the answer is not run). The executor's answer goes into the row's message. No retry
    /// follows.
    pub async fn cancel(
        &self,
        trace_id: &str,
        actor: Option<&str>,
    ) -> Result<Execution, DispatchError> {
        let exec = self.execution(trace_id).await?;
        if exec.status.is_final() {
            return Err(DispatchError::AlreadyFinal(exec.status));
        }
        let now = self.clock.now();
        let by = actor.map_or(String::new(), |a| format!(" by {a}"));
        let t = Transition {
            finish_time: Some(now),
            duration_ms: exec.start_time.map(|s| (now - s).num_milliseconds().max(0)),
            error_message: Some(format!("cancelled{by}")),
            stopping: Some(now),
            ..Transition::to(&[Pending, Running], Cancelled)
        };
        let settler = &self.attempts.outcomes.settler;
        match settler.write(trace_id, t).await {
            Ok(Applied::Yes(_)) => {}
            Ok(Applied::No) => {
                let status = self.execution(trace_id).await?.status;
                return Err(DispatchError::AlreadyFinal(status));
            }
            Err(_) => return Err(DispatchError::Stopping),
        }
        series::ended(&exec.job_name, Cancelled, None);
        let confirmed = || {
            self.store
                .stops_confirmed(std::slice::from_ref(&exec.trace_id))
        };
        if self.waiting.forget_row(&exec) {
            // Claimed ahead here and not called yet: nothing to stop.
            let _ = confirmed().await;
            return self.execution(trace_id).await;
        }
        // The row as the cancel found it: a RUNNING written meanwhile names the executor.
        let cancelled = self.execution(trace_id).await?;
        let answer = match self.attempts.stop(&cancelled).await {
            Some(probe) => {
                // Until the executor says it stopped, the run still counts for the job's
                // overlap policy; compensation asks again.
                if probe.stopped() {
                    let _ = confirmed().await;
                }
                stop_answer(&probe)
            }
            None => {
                let _ = confirmed().await;
                return Ok(cancelled);
            }
        };
        let note = Transition {
            error_message: Some(format!("cancelled{by}; {answer}")),
            ..Transition::to(&[Cancelled], Cancelled)
        };
        let _ = settler.write(trace_id, note).await;
        self.execution(trace_id).await
    }
}

/// What an executor's answer to a cancel request means, for the row's message.
fn stop_answer(probe: &super::client::Probe) -> String {
    use super::client::Probe;
    match probe {
        Probe::Finished {
            status: Cancelled, ..
        } => "the executor stopped it".to_string(),
        Probe::Finished { status, .. } => {
            format!("the executor had already finished it ({status})")
        }
        Probe::Unknown { .. } => "the executor was not running it".into(),
        Probe::Running => "the executor says it still runs".into(),
        Probe::Unsupported => "the executor has no cancel endpoint; it may run to its end".into(),
        Probe::Unreachable(e) => format!("the executor could not be asked: {e}"),
    }
}
