//! Dispatch (SPEC §6): turning a fire into execution rows and executor calls.
//!
//! For every fire the rows are written first (one per shard range, PENDING), atomically with
//! the fire claim for cron fires, and only then are the executors called. Each row moves
//! PENDING → RUNNING → SUCCESS | FAILED | TIMEOUT by compare-and-set, so whoever takes a row
//! first (this dispatcher, a retry timer, the compensator) is the only one to call for it.

mod backoff;
pub mod call;
pub mod plan;
mod results;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

pub use backoff::Backoff;
use call::{Call, CallOutcome, executor_request};
use results::ResultWriter;

use crate::config::Settings;
use crate::discovery::{Discovery, ExecutorInstance};
use crate::jobs::{
    Execution, ExecutionStatus, JobDefinition, NewExecution, TriggerType, execution_id,
    new_trace_id,
};
use crate::store::{FireClaim, FireOutcome, Store, StoreError, Transition};

use ExecutionStatus::{Failed, Pending, Running, Success, Timeout};

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
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A cron fire that could not be recorded because the database failed.
#[derive(Debug, Clone)]
pub struct MissedFire {
    pub job: Arc<JobDefinition>,
    pub fire_time: DateTime<Utc>,
}

/// At most this many due fires share one database transaction; larger bursts are split
/// into concurrent transactions.
const FIRE_BATCH: usize = 50;

/// Fires handed to the dispatcher and not yet finished, per call allowed in flight.
const BACKLOG_PER_CALL: usize = 8;

/// A fire's place in the backlog, shared by its executions and given back when the last
/// of them ends.
type Hold = Option<Arc<OwnedSemaphorePermit>>;

pub struct Dispatcher {
    store: Arc<dyn Store>,
    discovery: Arc<dyn Discovery>,
    http: reqwest::Client,
    path_prefix: String,
    secret: Option<Vec<u8>>,
    report_base: String,
    backoff: Backoff,
    results: ResultWriter,
    permits: Semaphore,
    /// Bounds the fires between hand-off and their last result, so a scheduler that cannot
    /// keep up leaves its backlog in the schedule (where the misfire policy applies) rather
    /// than in memory.
    backlog: Arc<Semaphore>,
    tasks: TaskTracker,
    /// Cancels waits (retry backoff) on shutdown; calls already made are left to finish.
    stopping: CancellationToken,
    /// Per job, the latest fire that could not be recorded because the database failed; the
    /// engine applies the misfire policy to it once the database answers again.
    missed: Mutex<HashMap<String, MissedFire>>,
}

impl Dispatcher {
    pub fn new(
        settings: &Settings,
        store: Arc<dyn Store>,
        discovery: Arc<dyn Discovery>,
    ) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .pool_idle_timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("jobflow/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let report_base = format!("http://{}", discovery.self_id());
        let results = ResultWriter::spawn(store.clone());
        Ok(Self {
            store,
            discovery,
            http,
            path_prefix: settings.executor.path_prefix.clone(),
            secret: settings
                .executor
                .signing_secret
                .as_ref()
                .map(|s| s.expose().as_bytes().to_vec()),
            report_base,
            backoff: Backoff {
                base: Duration::from_millis(settings.scheduler.retry_backoff_millis.get()),
                max: Duration::from_millis(settings.scheduler.retry_backoff_max_millis.get()),
            },
            results,
            permits: Semaphore::new(settings.executor.max_in_flight.get()),
            backlog: Arc::new(Semaphore::new(
                settings.executor.max_in_flight.get() * BACKLOG_PER_CALL,
            )),
            tasks: TaskTracker::new(),
            stopping: CancellationToken::new(),
            missed: Mutex::default(),
        })
    }

    pub fn instance_id(&self) -> &str {
        self.discovery.self_id()
    }

    /// The fires lost to database failures since the last call (the latest one per job).
    pub fn take_missed(&self) -> Vec<MissedFire> {
        self.missed
            .lock()
            .expect("missed lock")
            .drain()
            .map(|(_, v)| v)
            .collect()
    }

    pub fn has_missed(&self) -> bool {
        !self.missed.lock().expect("missed lock").is_empty()
    }

    /// Stops accepting work and waits up to `grace` for in-flight dispatches.
    pub async fn drain(&self, grace: Duration) -> bool {
        self.stopping.cancel();
        self.tasks.close();
        tokio::time::timeout(grace, self.tasks.wait()).await.is_ok()
    }

    /// Records and dispatches due cron fires in the background: one transaction for the
    /// claims and rows of all of them, one statement moving their rows to RUNNING, then the
    /// calls. Exactly one scheduler wins each fire's claim; the others skip it.
    ///
    /// `room` holds places in the backlog (see `reserve`); fires beyond them go without one.
    pub fn spawn_fires(
        self: &Arc<Self>,
        fires: Vec<(Arc<JobDefinition>, DateTime<Utc>)>,
        room: Vec<OwnedSemaphorePermit>,
    ) {
        if fires.is_empty() {
            return;
        }
        let mut room = room.into_iter();
        let fires: Vec<_> = fires
            .into_iter()
            .map(|(job, at)| (job, at, room.next().map(Arc::new)))
            .collect();
        // Chunks run concurrently, each in its own transaction on its own connection.
        for chunk in fires.chunks(FIRE_BATCH) {
            let (this, chunk) = (self.clone(), chunk.to_vec());
            self.tasks
                .spawn(async move { this.fire_batch(&chunk).await });
        }
    }

    /// Waits for room in the backlog, then takes up to `max` places.
    pub async fn reserve(&self, max: usize) -> Vec<OwnedSemaphorePermit> {
        let Ok(first) = self.backlog.clone().acquire_owned().await else {
            return Vec::new();
        };
        let mut room = vec![first];
        while room.len() < max {
            match self.backlog.clone().try_acquire_owned() {
                Ok(p) => room.push(p),
                Err(_) => break,
            }
        }
        room
    }

    async fn fire_batch(self: &Arc<Self>, fires: &[(Arc<JobDefinition>, DateTime<Utc>, Hold)]) {
        let mut planned = Vec::with_capacity(fires.len());
        let mut records = Vec::with_capacity(fires.len());
        for (job, fire_time, hold) in fires {
            let fire_time = fire_time.trunc_subsecs(0);
            let executors = self
                .discovery
                .executors(job.spec.service_name.as_str())
                .await;
            let claim = FireClaim {
                job_name: job.name().to_string(),
                fire_time,
                scheduler_instance: self.instance_id().to_string(),
            };
            records.push((
                claim,
                self.plan_rows(job, fire_time, TriggerType::Cron, &executors),
            ));
            planned.push((job.clone(), fire_time, executors, hold.clone()));
        }
        let outcomes = match self.store.record_cron_fires(&records).await {
            Ok(o) => o,
            Err(e) => {
                tracing::error!(fires = fires.len(), error = %e, "could not record due fires; they follow the misfire policy once the database answers");
                let mut missed = self.missed.lock().expect("missed lock");
                for (job, fire_time, _, _) in planned {
                    let entry =
                        missed
                            .entry(job.name().to_string())
                            .or_insert_with(|| MissedFire {
                                job: job.clone(),
                                fire_time,
                            });
                    if entry.fire_time < fire_time {
                        *entry = MissedFire { job, fire_time };
                    }
                }
                return;
            }
        };
        let mut recorded = Vec::with_capacity(outcomes.len());
        for ((job, fire_time, executors, hold), outcome) in planned.into_iter().zip(outcomes) {
            match outcome {
                FireOutcome::Recorded(rows) => {
                    metrics::counter!("scheduler_fires_total", "job" => job.name().to_string(), "trigger" => "CRON").increment(1);
                    recorded.push((job, rows, executors, hold));
                }
                FireOutcome::AlreadyFired => {
                    metrics::counter!("scheduler_duplicate_dispatch_skipped_total", "job" => job.name().to_string()).increment(1);
                    tracing::info!(job = %job.name(), %fire_time, "fire already dispatched by another scheduler; skipped");
                }
            }
        }
        let fresh: Vec<String> = recorded
            .iter()
            .flat_map(|(_, rows, _, _)| {
                rows.iter()
                    .filter(|e| e.status == Pending)
                    .map(|e| e.trace_id.clone())
            })
            .collect();
        let now = Utc::now();
        // Fresh rows are nobody else's (compensation takes only PENDING rows past a grace
        // period), so all of them move; if not, each row takes its own compare-and-set.
        let started = match self.store.start_executions(&fresh, now).await {
            Ok(n) if n == fresh.len() as u64 => Some(now),
            Ok(n) => {
                tracing::warn!(
                    moved = n,
                    rows = fresh.len(),
                    "batch start moved fewer rows than recorded; starting them one by one"
                );
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "batch start failed; starting rows one by one");
                None
            }
        };
        for (job, rows, executors, hold) in recorded {
            self.start(job, rows, &executors, started, hold);
        }
    }

    /// Fires `job` now on this instance (manual trigger; not subject to ownership).
    pub async fn trigger(
        self: &Arc<Self>,
        job_name: &str,
    ) -> Result<Vec<Execution>, DispatchError> {
        let job = Arc::new(
            self.store
                .get_job(job_name)
                .await?
                .ok_or_else(|| DispatchError::JobNotFound(job_name.into()))?,
        );
        let executors = self
            .discovery
            .executors(job.spec.service_name.as_str())
            .await;
        let rows = self.plan_rows(
            &job,
            Utc::now().trunc_subsecs(0),
            TriggerType::Manual,
            &executors,
        );
        let FireOutcome::Recorded(recorded) = self.store.record_fire(None, &rows).await? else {
            unreachable!("unclaimed fires are always recorded")
        };
        metrics::counter!("scheduler_fires_total", "job" => job.name().to_string(), "trigger" => "MANUAL").increment(1);
        self.start(job, recorded.clone(), &executors, None, None);
        Ok(recorded)
    }

    /// Runs a finished execution's range again as a new RETRY execution (operator's retry).
    pub async fn retry(self: &Arc<Self>, trace_id: &str) -> Result<Execution, DispatchError> {
        let parent = self
            .store
            .get_execution(trace_id)
            .await?
            .ok_or_else(|| DispatchError::ExecutionNotFound(trace_id.into()))?;
        if !parent.status.is_final() {
            return Err(DispatchError::NotFinished(parent.status));
        }
        let job = Arc::new(
            self.store
                .get_job(&parent.job_name)
                .await?
                .ok_or_else(|| DispatchError::JobNotFound(parent.job_name.clone()))?,
        );
        let trace = new_trace_id();
        let row = self.child_row(
            &parent,
            TriggerType::Retry,
            format!(
                "{}:RETRY:{trace}:{}-{}",
                parent.job_name, parent.shard_start, parent.shard_end
            ),
            trace,
            Utc::now(),
        );
        let FireOutcome::Recorded(mut recorded) = self.store.record_fire(None, &[row]).await?
        else {
            unreachable!("unclaimed fires are always recorded")
        };
        let exec = recorded.pop().expect("one row recorded");
        self.spawn_run(job, exec.clone(), None, None, None);
        Ok(exec)
    }

    /// The result of an asynchronous (202) execution, reported by the executor.
    pub async fn report(
        self: &Arc<Self>,
        trace_id: &str,
        success: bool,
        message: Option<String>,
    ) -> Result<Execution, DispatchError> {
        let exec = self
            .store
            .get_execution(trace_id)
            .await?
            .ok_or_else(|| DispatchError::ExecutionNotFound(trace_id.into()))?;
        let status = if success { Success } else { Failed };
        let (result, error) = if success {
            (message, None)
        } else {
            (
                None,
                Some(message.unwrap_or_else(|| "the executor reported failure".into())),
            )
        };
        if !self.finish(&exec, status, result, error).await? {
            let now = self
                .store
                .get_execution(trace_id)
                .await?
                .map(|e| e.status)
                .unwrap_or(exec.status);
            return Err(DispatchError::NotRunning(now));
        }
        if !success {
            self.after_failure(&exec).await;
        }
        Ok(self.store.get_execution(trace_id).await?.unwrap_or(exec))
    }

    /// Dispatches a stored PENDING row (compensation: its scheduler died before calling).
    pub async fn resume(self: &Arc<Self>, exec: Execution) -> Result<(), StoreError> {
        match self.store.get_job(&exec.job_name).await? {
            Some(job) => self.spawn_run(Arc::new(job), exec, None, None, None),
            None => {
                let t = Transition {
                    error_message: Some(
                        "the job was deleted before this execution was dispatched".into(),
                    ),
                    finish_time: Some(Utc::now()),
                    ..Transition::to(&[Pending], Failed)
                };
                self.store.transition(&exec.trace_id, &t).await?;
            }
        }
        Ok(())
    }

    /// Settles a RUNNING row nobody is waiting for (compensation) with `status`, then applies
    /// the retry policy. `false` when the row had already moved on.
    pub async fn settle_stuck(
        self: &Arc<Self>,
        exec: &Execution,
        status: ExecutionStatus,
        message: String,
    ) -> Result<bool, StoreError> {
        let (result, error) = if status == Success {
            (Some(message), None)
        } else {
            (None, Some(message))
        };
        let changed = self.finish(exec, status, result, error).await?;
        if changed && status != Success {
            self.retry_later(exec, TriggerType::Compensation).await;
        }
        Ok(changed)
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The URL of the executor endpoint for `handler` on `instance`.
    pub fn endpoint(&self, instance: &ExecutorInstance, handler: &str) -> (String, String) {
        let prefix = instance.path_prefix.as_deref().unwrap_or(&self.path_prefix);
        (
            format!("http://{}", instance.addr),
            format!("{prefix}/{handler}"),
        )
    }

    /// One row per shard range over the live executors, or a single FAILED row when there is
    /// no executor at all (the retry policy then applies to it).
    fn plan_rows(
        &self,
        job: &JobDefinition,
        fire_time: DateTime<Utc>,
        trigger: TriggerType,
        executors: &[ExecutorInstance],
    ) -> Vec<NewExecution> {
        let now = Utc::now();
        let name = job.name().as_str();
        let shard_count = job.spec.shard_count;
        let ranges = plan::split(shard_count, executors.len());
        let make = |start: u32,
                    end: u32,
                    status: ExecutionStatus,
                    executor: Option<String>,
                    error: Option<String>| {
            let trace_id = new_trace_id();
            let execution_id = match trigger {
                TriggerType::Cron => execution_id(name, fire_time, start, end),
                _ => format!("{name}:{}:{trace_id}:{start}-{end}", trigger.as_str()),
            };
            NewExecution {
                execution_id,
                trace_id,
                job_name: name.to_string(),
                trigger_type: trigger,
                fire_time,
                scheduler_instance: self.instance_id().to_string(),
                executor_instance: executor,
                shard_start: start,
                shard_end: end,
                shard_count,
                trigger_time: now,
                due_time: now,
                status,
                retry_count: 0,
                parent_trace_id: None,
                error_message: error,
            }
        };
        if ranges.is_empty() {
            let msg = format!(
                "no executor instance available for service `{}`",
                job.spec.service_name
            );
            return vec![make(0, shard_count - 1, Failed, None, Some(msg))];
        }
        ranges
            .iter()
            .zip(executors)
            .map(|(r, e)| make(r.start, r.end, Pending, Some(e.addr.to_string()), None))
            .collect()
    }

    fn child_row(
        &self,
        parent: &Execution,
        trigger: TriggerType,
        execution_id: String,
        trace_id: String,
        due: DateTime<Utc>,
    ) -> NewExecution {
        NewExecution {
            execution_id,
            trace_id,
            job_name: parent.job_name.clone(),
            trigger_type: trigger,
            fire_time: parent.fire_time,
            scheduler_instance: self.instance_id().to_string(),
            executor_instance: None,
            shard_start: parent.shard_start,
            shard_end: parent.shard_end,
            shard_count: parent.shard_count,
            trigger_time: Utc::now(),
            due_time: due,
            status: Pending,
            retry_count: parent.retry_count + 1,
            parent_trace_id: Some(parent.trace_id.clone()),
            error_message: None,
        }
    }

    /// Starts the calls for freshly recorded rows; row `i` goes to executor `i`. `started`
    /// is set when the rows were already moved to RUNNING (a batch).
    fn start(
        self: &Arc<Self>,
        job: Arc<JobDefinition>,
        rows: Vec<Execution>,
        executors: &[ExecutorInstance],
        started: Option<DateTime<Utc>>,
        hold: Hold,
    ) {
        for (i, exec) in rows.into_iter().enumerate() {
            if exec.status == Failed {
                record_final(&exec, Failed, None);
                tracing::warn!(trace_id = %exec.trace_id, job = %exec.job_name, error = exec.error_message.as_deref().unwrap_or(""), "execution failed before dispatch");
                let this = self.clone();
                self.tasks
                    .spawn(async move { this.after_failure(&exec).await });
                continue;
            }
            self.spawn_run(
                job.clone(),
                exec,
                Some(i).filter(|i| *i < executors.len()),
                started,
                hold.clone(),
            );
        }
    }

    fn spawn_run(
        self: &Arc<Self>,
        job: Arc<JobDefinition>,
        exec: Execution,
        preferred: Option<usize>,
        started: Option<DateTime<Utc>>,
        hold: Hold,
    ) {
        let span = tracing::info_span!("execution", trace_id = %exec.trace_id, job = %exec.job_name, execution_id = %exec.execution_id);
        let this = self.clone();
        self.tasks.spawn(
            async move {
                this.run(job, exec, preferred, started).await;
                drop(hold);
            }
            .instrument(span),
        );
    }

    /// Takes a PENDING row (or one this dispatcher already moved to RUNNING at `started`) and
    /// calls executors for it until one answers.
    async fn run(
        self: Arc<Self>,
        job: Arc<JobDefinition>,
        exec: Execution,
        preferred: Option<usize>,
        started: Option<DateTime<Utc>>,
    ) {
        let state: &'static [ExecutionStatus] = if started.is_some() {
            &[Running]
        } else {
            &[Pending]
        };
        if let (None, Ok(wait)) = (started, (exec.due_time - Utc::now()).to_std()) {
            // A retry waiting out its backoff stays PENDING in the database if this instance
            // stops; the compensator dispatches it then.
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.stopping.cancelled() => return,
            }
        }
        // Bounds the calls in flight; given back once the executor has answered, before
        // the result is written.
        let Ok(permit) = self.permits.acquire().await else {
            return;
        };
        let executors = self
            .discovery
            .executors(job.spec.service_name.as_str())
            .await;
        if executors.is_empty() {
            let msg = format!(
                "no executor instance available for service `{}`",
                job.spec.service_name
            );
            if let Ok(true) = self
                .finish_from(&exec, state, Failed, None, Some(msg), started)
                .await
            {
                self.after_failure(&exec).await;
            }
            return;
        }
        let first = preferred
            .or_else(|| plan::executor_for(exec.shard_start, exec.shard_count, executors.len()))
            .unwrap_or(0);
        let order: Vec<&ExecutorInstance> = (0..executors.len())
            .map(|i| &executors[(first + i) % executors.len()])
            .collect();
        let first_addr = order[0].addr.to_string();
        let started = match started {
            // Moved to RUNNING by the batch; only a changed executor list needs writing.
            Some(t) if exec.executor_instance.as_deref() == Some(first_addr.as_str()) => t,
            Some(t) => {
                let moved = Transition {
                    executor_instance: Some(first_addr),
                    ..Transition::to(&[Running], Running)
                };
                if !matches!(
                    self.store.transition(&exec.trace_id, &moved).await,
                    Ok(true)
                ) {
                    return;
                }
                t
            }
            None => {
                let now = Utc::now();
                let start = Transition {
                    executor_instance: Some(first_addr),
                    start_time: Some(now),
                    ..Transition::to(&[Pending], Running)
                };
                match self.store.transition(&exec.trace_id, &start).await {
                    Ok(true) => now,
                    Ok(false) => {
                        return tracing::debug!("execution already taken by another dispatcher");
                    }
                    Err(e) => {
                        return tracing::warn!(error = %e, "could not start execution; compensation will pick it up");
                    }
                }
            }
        };
        let request = executor_request(
            &exec,
            &job,
            format!(
                "{}/api/v1/jobs/executions/{}/result",
                self.report_base, exec.trace_id
            ),
        );
        let mut refused = Vec::new();
        for (i, instance) in order.iter().enumerate() {
            if i > 0 {
                let moved = Transition {
                    executor_instance: Some(instance.addr.to_string()),
                    ..Transition::to(&[Running], Running)
                };
                if !matches!(
                    self.store.transition(&exec.trace_id, &moved).await,
                    Ok(true)
                ) {
                    return;
                }
            }
            if exec.trigger_type == TriggerType::Cron && exec.retry_count == 0 {
                let delay = (Utc::now() - exec.fire_time).num_milliseconds().max(0) as f64 / 1000.0;
                metrics::histogram!("scheduler_fire_delay_seconds").record(delay);
            }
            let (base_url, path) = self.endpoint(instance, job.spec.handler.as_str());
            tracing::info!(executor = %instance.addr, shard_start = exec.shard_start, shard_end = exec.shard_end, "calling executor");
            let outcome = Call {
                http: &self.http,
                base_url,
                path,
                request: &request,
                secret: self.secret.as_deref(),
                timeout: Duration::from_secs(job.spec.timeout_seconds as u64),
            }
            .send()
            .await;
            match outcome {
                CallOutcome::Unreachable(err) => {
                    tracing::warn!(executor = %instance.addr, error = %err, "executor unreachable; failing over");
                    refused.push(format!("{}: {err}", instance.addr));
                }
                CallOutcome::Accepted => {
                    drop(permit);
                    return tracing::info!(executor = %instance.addr, "executor accepted; waiting for its report");
                }
                CallOutcome::Finished {
                    status,
                    message,
                    error,
                } => {
                    drop(permit);
                    if let Ok(true) = self
                        .finish_from(
                            &exec,
                            &[Running],
                            status,
                            message,
                            error.clone(),
                            Some(started),
                        )
                        .await
                    {
                        tracing::info!(status = %status, error = error.as_deref().unwrap_or(""), "execution finished");
                        if status != Success {
                            self.after_failure(&exec).await;
                        }
                    }
                    return;
                }
            }
        }
        let msg = format!(
            "every executor instance refused the connection: {}",
            refused.join("; ")
        );
        if let Ok(true) = self
            .finish_from(
                &exec,
                &[Running],
                Failed,
                None,
                Some(call::excerpt(&msg)),
                Some(started),
            )
            .await
        {
            tracing::warn!(error = %msg, "execution failed");
            self.after_failure(&exec).await;
        }
    }

    /// Settles a stored RUNNING row (its start time is in `exec`).
    async fn finish(
        &self,
        exec: &Execution,
        status: ExecutionStatus,
        result: Option<String>,
        error: Option<String>,
    ) -> Result<bool, StoreError> {
        self.finish_from(exec, &[Running], status, result, error, exec.start_time)
            .await
    }

    /// Compare-and-set to a final status, with metrics for the winner.
    async fn finish_from(
        &self,
        exec: &Execution,
        from: &'static [ExecutionStatus],
        status: ExecutionStatus,
        result: Option<String>,
        error: Option<String>,
        started: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError> {
        let now = Utc::now();
        let duration_ms = started.map(|s| (now - s).num_milliseconds().max(0));
        let t = Transition {
            finish_time: Some(now),
            duration_ms,
            result_message: result,
            error_message: error,
            ..Transition::to(from, status)
        };
        let changed = self.results.write(&exec.trace_id, t).await?;
        if changed {
            record_final(exec, status, duration_ms);
        }
        Ok(changed)
    }

    async fn after_failure(self: &Arc<Self>, exec: &Execution) {
        self.retry_later(exec, TriggerType::Retry).await;
    }

    /// Applies the retry policy to a failed row: a new PENDING row, due after the backoff.
    async fn retry_later(self: &Arc<Self>, exec: &Execution, trigger: TriggerType) {
        let job = match self.store.get_job(&exec.job_name).await {
            Ok(Some(job)) => job,
            Ok(None) => return,
            Err(e) => {
                return tracing::warn!(error = %e, "retry policy not applied: database unavailable");
            }
        };
        if exec.retry_count >= job.spec.max_retry {
            if job.spec.max_retry > 0 {
                tracing::warn!(retries = exec.retry_count, "giving up after the last retry");
            }
            return;
        }
        let delay = self.backoff.delay(exec.retry_count + 1);
        let due = Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default();
        let base = exec
            .execution_id
            .split('#')
            .next()
            .unwrap_or(&exec.execution_id);
        let row = self.child_row(
            exec,
            trigger,
            format!("{base}#r{}", exec.retry_count + 1),
            new_trace_id(),
            due,
        );
        match self
            .store
            .record_fire(None, std::slice::from_ref(&row))
            .await
        {
            Ok(FireOutcome::Recorded(mut rows)) => {
                let retry = rows.pop().expect("one row recorded");
                tracing::info!(retry_trace_id = %retry.trace_id, retry = retry.retry_count, delay_ms = delay.as_millis() as u64, "retry scheduled");
                self.spawn_run(Arc::new(job), retry, None, None, None);
            }
            Ok(FireOutcome::AlreadyFired) => {}
            // Another dispatcher (or the compensator) created this retry already.
            Err(StoreError::Duplicate(_)) => {}
            Err(e) => tracing::warn!(error = %e, "could not record the retry"),
        }
    }
}

fn record_final(exec: &Execution, status: ExecutionStatus, duration_ms: Option<i64>) {
    let job = exec.job_name.clone();
    metrics::counter!("job_execution_total", "job" => job.clone(), "status" => status.as_str())
        .increment(1);
    if let Some(ms) = duration_ms {
        metrics::histogram!("job_execution_duration_seconds", "job" => job.clone())
            .record(ms as f64 / 1000.0);
    }
    if matches!(status, Failed | Timeout) {
        metrics::counter!("job_execution_failures_total", "job" => job).increment(1);
    }
}
