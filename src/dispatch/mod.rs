//! Dispatch (SPEC §6): turning fires into execution rows and executor calls, and settling
//! them. The fire path reads engine → [`Dispatcher`] → store / [`client`].
//!
//! - [`ahead`]: fires claimed ahead of their instant, waiting for it;
//! - [`rows`]: the rows a fire, a retry or a re-run writes (and every execution id format);
//! - [`attempt`]: one attempt at a row: the lease that says who may call, the call with
//!   failover, the verdict and the retry it earns;
//! - [`recovery`]: what compensation does with a row whose holder is gone or overdue;
//! - [`policies`]: routing, overlap and child jobs on the fire path;
//! - [`settle`]: group commit of state changes, never dropped;
//! - [`client`]: the executor wire protocol (call, status, cancel);
//! - [`plan`]: shard ranges over executors; [`backoff`]: retry delays.
//!
//! Bounds: at most `executor.max_in_flight` calls are in flight, and at most
//! `executor.max_backlog` fires are between hand-off (their claim, ahead of the instant) and
//! their last result (the backlog). The engine hands over only fires it holds a backlog place for and never waits for
//! room inside a hand-over, so any number of owed fires flows through the bound.

mod ahead;
mod attempt;
mod backoff;
mod busy;
pub mod client;
pub mod plan;
mod policies;
mod recovery;
mod rows;
mod settle;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use attempt::{Hold, Lease};
pub use backoff::Backoff;
use client::ExecutorClient;
pub use recovery::Recovery;
use settle::Settler;

use crate::alerts::Alerts;
use crate::config::Settings;
use crate::discovery::{Discovery, ExecutorInstance, InstanceAddr};
use crate::jobs::{Execution, ExecutionStatus, JobDefinition, OverlapPolicy, TriggerType};
use crate::store::{Applied, FireClaim, FireOutcome, Store, StoreError, Transition};

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

/// The longest the execution writer waits between attempts at a batch the database refused.
pub const WRITE_RETRY_MAX: Duration = settle::MAX_RETRY;

/// At most this many due fires share one database transaction; larger bursts are split
/// into concurrent transactions.
const FIRE_BATCH: usize = 50;

pub struct Dispatcher {
    store: Arc<dyn Store>,
    alerts: Arc<Alerts>,
    round_robin: plan::RoundRobin,
    busy: busy::Busy,
    discovery: Arc<dyn Discovery>,
    client: ExecutorClient,
    report_base: String,
    backoff: Backoff,
    settler: Settler,
    /// How long a PENDING row stays its holder's past its due time (see [`attempt`]).
    lease: chrono::Duration,
    calls: Semaphore,
    max_calls: usize,
    /// Bounds the fires between hand-off and their last result, so a scheduler that cannot
    /// keep up leaves its backlog in the schedule (where the misfire policy applies) rather
    /// than in memory.
    backlog: Arc<Semaphore>,
    backlog_size: usize,
    tasks: TaskTracker,
    /// Cancels waits (due times, call slots) on shutdown; calls already made finish.
    stopping: CancellationToken,
    /// When the drain on shutdown gives up: fires due before it are still called.
    drain_deadline: std::sync::OnceLock<DateTime<Utc>>,
    /// Trace ids of the rows this instance has an attempt at right now: compensation leaves
    /// them alone even when their lease ran out (a slow call whose RUNNING is not written yet).
    attempting: Mutex<std::collections::HashSet<String>>,
    /// Fires claimed ahead of their instant, and whether their launcher runs.
    waiting: ahead::Waiting,
    launcher: std::sync::Once,
    /// Per job, the earliest fire that could not be recorded because the database failed; the
    /// engine owes the job's instants from it again, under the misfire policy, once the
    /// database answers.
    missed: Mutex<HashMap<String, DateTime<Utc>>>,
}

impl Dispatcher {
    pub fn new(
        settings: &Settings,
        store: Arc<dyn Store>,
        discovery: Arc<dyn Discovery>,
        alerts: Arc<Alerts>,
    ) -> anyhow::Result<Self> {
        let client = ExecutorClient::new(
            settings.executor.path_prefix.clone(),
            settings
                .executor
                .signing_secret
                .as_ref()
                .map(|s| s.expose().as_bytes().to_vec()),
        )?;
        let report_base = format!("http://{}", discovery.self_id());
        let max_calls = settings.executor.max_in_flight.get();
        let backlog_size = settings.executor.max_backlog.get();
        Ok(Self {
            settler: Settler::spawn(store.clone()),
            store,
            alerts,
            round_robin: plan::RoundRobin::default(),
            busy: busy::Busy::default(),
            discovery,
            client,
            report_base,
            backoff: Backoff {
                base: Duration::from_millis(settings.scheduler.retry_backoff_millis.get()),
                max: Duration::from_millis(settings.scheduler.retry_backoff_max_millis.get()),
            },
            lease: chrono::Duration::seconds(settings.compensation.pending_grace_seconds as i64),
            calls: Semaphore::new(max_calls),
            max_calls,
            backlog: Arc::new(Semaphore::new(backlog_size)),
            backlog_size,
            tasks: TaskTracker::new(),
            stopping: CancellationToken::new(),
            drain_deadline: std::sync::OnceLock::new(),
            attempting: Mutex::default(),
            waiting: ahead::Waiting::default(),
            launcher: std::sync::Once::new(),
            missed: Mutex::default(),
        })
    }

    pub fn instance_id(&self) -> &str {
        self.discovery.self_id()
    }

    fn report_url(&self, trace_id: &str) -> String {
        format!(
            "{}/api/v1/jobs/executions/{trace_id}/result",
            self.report_base
        )
    }

    /// The fires lost to database failures since the last call (the earliest one per job:
    /// its instants from there on are owed again under the misfire rules).
    pub fn take_missed(&self) -> Vec<(String, DateTime<Utc>)> {
        self.missed.lock().expect("missed lock").drain().collect()
    }

    pub fn has_missed(&self) -> bool {
        !self.missed.lock().expect("missed lock").is_empty()
    }

    /// Stops accepting work and waits up to `grace` for in-flight dispatches. Fires claimed
    /// ahead and due within `grace` are still called; waits for later due times and for call
    /// slots end at once (their rows stay PENDING for compensation).
    pub async fn drain(&self, grace: Duration) -> bool {
        let deadline = Utc::now() + chrono::Duration::from_std(grace).unwrap_or_default();
        let _ = self.drain_deadline.set(deadline);
        self.stopping.cancel();
        self.tasks.close();
        tokio::time::timeout(grace, self.tasks.wait()).await.is_ok()
    }

    /// Takes up to `max` places in the backlog, without waiting.
    pub fn try_reserve(&self, max: usize) -> Vec<OwnedSemaphorePermit> {
        let mut room = Vec::new();
        while room.len() < max {
            match self.backlog.clone().try_acquire_owned() {
                Ok(p) => room.push(p),
                Err(_) => break,
            }
        }
        metrics::gauge!("scheduler_backlog")
            .set((self.backlog_size - self.backlog.available_permits()) as f64);
        room
    }

    /// Resolves once the backlog has room (taking nothing).
    pub async fn room(&self) {
        let _ = self.backlog.acquire().await;
    }

    /// Resolves when waiting must end: at the drain deadline once shutting down.
    async fn halted(&self) {
        self.stopping.cancelled().await;
        if let Some(wait) = self
            .drain_deadline
            .get()
            .and_then(|d| (*d - Utc::now()).to_std().ok())
        {
            tokio::time::sleep(wait).await;
        }
    }

    /// Waits until `due`; `false` when the instance stops first and `due` is past the drain
    /// deadline (the row stays PENDING for compensation).
    async fn until_due(&self, due: DateTime<Utc>) -> bool {
        let Ok(wait) = (due - Utc::now()).to_std() else {
            return true;
        };
        let sleep = tokio::time::sleep(wait);
        tokio::pin!(sleep);
        tokio::select! {
            _ = &mut sleep => return true,
            _ = self.stopping.cancelled() => {}
        }
        if self.drain_deadline.get().is_some_and(|d| due <= *d) {
            sleep.await;
            return true;
        }
        false
    }

    async fn call_slot(&self) -> CallSlot<'_> {
        let permit = self
            .calls
            .acquire()
            .await
            .expect("call slots are never closed");
        let slot = CallSlot {
            _permit: permit,
            dispatcher: self,
        };
        slot.publish();
        slot
    }

    /// Records due cron fires and calls their executors in the background: one transaction
    /// for the claims and PENDING rows of up to `FIRE_BATCH` fires, then the calls, with no
    /// database round trip between the record and the call. Fires handed over ahead of their
    /// instant wait for it (see [`ahead`]); a job whose overlap policy is not ALLOW is judged
    /// and recorded at its instant. Exactly one scheduler wins each fire's claim; the others
    /// skip it. Each fire comes with its place in the backlog.
    pub fn spawn_fires(
        self: &Arc<Self>,
        fires: Vec<(Arc<JobDefinition>, DateTime<Utc>)>,
        room: Vec<OwnedSemaphorePermit>,
    ) {
        debug_assert!(room.len() >= fires.len(), "every fire has a backlog place");
        let mut plain = Vec::with_capacity(fires.len());
        for ((job, at), place) in fires.into_iter().zip(room) {
            let (at, hold) = (at.trunc_subsecs(0), Some(Arc::new(place)));
            if job.spec.overlap_policy == OverlapPolicy::Allow {
                plain.push((job, at, hold));
            } else {
                let this = self.clone();
                self.tasks.spawn(async move {
                    if this.until_due(at).await {
                        this.guarded_fire(job, at, hold).await
                    }
                });
            }
        }
        // Chunks run concurrently, each in its own transaction on its own connection.
        for chunk in plain.chunks(FIRE_BATCH) {
            let (this, chunk) = (self.clone(), chunk.to_vec());
            self.tasks
                .spawn(async move { this.record_fires(chunk).await });
        }
    }

    /// Holds a fire recorded ahead of its instant until the instant, then starts its rows.
    fn start_at_instant(self: &Arc<Self>, fire: ahead::WaitingFire) {
        self.launcher.call_once(|| {
            let this = self.clone();
            self.tasks.spawn(async move { this.launch_waiting().await });
        });
        self.waiting.add(fire);
    }

    /// Starts the waiting fires' attempts at their instants. On shutdown, fires due within
    /// the grace period are still started; later ones are left PENDING for compensation.
    async fn launch_waiting(self: Arc<Self>) {
        loop {
            if self.stopping.is_cancelled() {
                let deadline = self.drain_deadline.get().copied().unwrap_or_else(Utc::now);
                let left = self.waiting.take_after(deadline);
                if !left.is_empty() {
                    tracing::info!(
                        fires = left.len(),
                        "shutting down: fires claimed ahead beyond the grace period stay PENDING; compensation dispatches them after their lease"
                    );
                }
                if self.waiting.is_empty() {
                    return;
                }
            }
            let wait = self
                .waiting
                .next()
                .map(|t| (t - Utc::now()).to_std().unwrap_or_default());
            tokio::select! {
                _ = async { tokio::time::sleep(wait.unwrap_or_default()).await }, if wait.is_some() => {}
                _ = self.waiting.earlier.notified() => {}
                _ = self.stopping.cancelled(), if !self.stopping.is_cancelled() => {}
            }
            for fire in self.waiting.take_due(Utc::now()) {
                self.start_rows(&fire.job, fire.rows, fire.hold);
            }
        }
    }

    /// The definitions `job`s were claimed ahead under, one per job with waiting fires.
    pub fn claimed_ahead(&self) -> Vec<Arc<JobDefinition>> {
        self.waiting.claimed_under()
    }

    /// The definition `job`'s earliest waiting fire was claimed ahead under, if it has one.
    pub fn claimed_ahead_of(&self, job: &str) -> Option<Arc<JobDefinition>> {
        self.waiting.claimed_under_job(job)
    }

    /// Withdraws `job`'s fires claimed ahead and not started yet (the job was edited,
    /// disabled or deleted): their claims and rows are deleted, so the instants are owed again
    /// under the job's current definition. Returns the earliest withdrawn instant. If the
    /// database cannot delete them, their rows stay PENDING and compensation settles them.
    pub async fn withdraw(&self, job: &str) -> Option<DateTime<Utc>> {
        let fires = self.waiting.withdraw(job);
        let earliest = fires.iter().map(|f| f.fire_time).min()?;
        let claims: Vec<_> = fires
            .iter()
            .map(|f| {
                let claim = FireClaim {
                    job_name: job.to_string(),
                    fire_time: f.fire_time,
                    scheduler_instance: self.instance_id().to_string(),
                };
                (claim, f.rows.iter().map(|r| r.trace_id.clone()).collect())
            })
            .collect();
        metrics::counter!("scheduler_fires_withdrawn_total", "job_name" => job.to_string())
            .increment(fires.len() as u64);
        match self.store.withdraw_fires(&claims).await {
            Ok(rows) => {
                tracing::info!(job_name = job, fires = fires.len(), rows, %earliest, "fires claimed ahead withdrawn: the job changed before their instant")
            }
            Err(e) => {
                tracing::warn!(job_name = job, error = %e, "withdrawn fires' rows not deleted; compensation settles them after their lease")
            }
        }
        Some(earliest)
    }

    /// A fire the misfire policy skipped (alerted as FIRE_SKIPPED).
    pub fn fire_skipped(&self, job: &JobDefinition, fire_time: DateTime<Utc>) {
        self.alerts.fire_skipped(job, fire_time);
    }

    async fn job(&self, name: &str) -> Result<Arc<JobDefinition>, DispatchError> {
        Ok(Arc::new(
            self.store
                .get_job(name)
                .await?
                .ok_or_else(|| DispatchError::JobNotFound(name.into()))?,
        ))
    }

    /// Fires `job` now on this instance, whoever owns it (manual trigger), with this run's
    /// `jobParams` and executor when given. The job's overlap policy applies as to a cron
    /// fire: under SKIP, while the job still runs, the rows are recorded SKIPPED and nothing
    /// is called; under COVER the open executions are cancelled first.
    pub async fn trigger(
        self: &Arc<Self>,
        job_name: &str,
        options: TriggerOptions,
    ) -> Result<Vec<Execution>, DispatchError> {
        let job = self.job(job_name).await?;
        // The executor chosen for this run is kept even when it was planned under another
        // list: ranges follow `executor` alone.
        let mut executors = self
            .discovery
            .executors(job.spec.service_name.as_str())
            .await;
        if let Some(wanted) = options.executor {
            executors.retain(|e| e.addr == wanted);
            if executors.is_empty() {
                return Err(DispatchError::ExecutorNotLive(
                    wanted.to_string(),
                    job.spec.service_name.to_string(),
                ));
            }
        }
        let now = Utc::now();
        let first = self.first_executor(&job, &executors);
        let mut rows = rows::fire_rows(
            &job,
            now.trunc_subsecs(0),
            TriggerType::Manual,
            &executors,
            first,
            self.instance_id(),
            now,
        );
        for r in &mut rows {
            // On the row, so that whoever sends it (or its retries) sends the run's params.
            r.job_params = options.job_params.clone();
        }
        let FireOutcome::Recorded(recorded) =
            self.record_judged(&job, None, &rows, |_| false).await?
        else {
            unreachable!("unclaimed fires are always recorded")
        };
        if self.count_fire(&job, TriggerType::Manual, now, &recorded) {
            self.start_rows(&job, recorded.clone(), None);
        }
        Ok(recorded)
    }

    /// Runs a finished execution's range again as a new RETRY execution (operator's retry).
    pub async fn retry(self: &Arc<Self>, trace_id: &str) -> Result<Execution, DispatchError> {
        let parent = self.execution(trace_id).await?;
        if !parent.status.is_final() {
            return Err(DispatchError::NotFinished(parent.status));
        }
        let job = self.job(&parent.job_name).await?;
        let row = rows::rerun_row(&parent, self.instance_id(), Utc::now());
        let FireOutcome::Recorded(mut recorded) = self.store.record_fire(None, &[row]).await?
        else {
            unreachable!("unclaimed fires are always recorded")
        };
        let exec = recorded.pop().expect("one row recorded");
        let lease = Lease {
            since: exec.due_time,
        };
        self.spawn_attempt(job, exec.clone(), lease, None);
        Ok(exec)
    }

    async fn execution(&self, trace_id: &str) -> Result<Execution, DispatchError> {
        self.store
            .get_execution(trace_id)
            .await?
            .ok_or_else(|| DispatchError::ExecutionNotFound(trace_id.into()))
    }

    /// The result an executor reports for an execution (a 202 one, or one whose caller went
    /// away). `status` is the SDK's precise verdict when it gave one.
    pub async fn report(
        self: &Arc<Self>,
        trace_id: &str,
        success: bool,
        status: Option<ExecutionStatus>,
        message: Option<String>,
    ) -> Result<Execution, DispatchError> {
        let exec = self.execution(trace_id).await?;
        let status = status.unwrap_or(if success { Success } else { Failed });
        // A deleted job's row is still settled, with no retry policy left to apply.
        let job = self.store.get_job(&exec.job_name).await?.map(Arc::new);
        let verdict = attempt::Verdict::from_probe(status, message);
        if !self
            .settle(
                job.as_ref(),
                &exec,
                &[Pending, Running],
                verdict,
                None,
                &None,
            )
            .await
        {
            let now = self.execution(trace_id).await?.status;
            return Err(DispatchError::NotRunning(now));
        }
        self.execution(trace_id).await
    }

    /// Stops a PENDING or RUNNING execution: CANCELLED by compare-and-set, then the executor
    /// is asked to stop it (the answer goes into the row's message). No retry follows.
    pub async fn cancel(
        self: &Arc<Self>,
        trace_id: &str,
        actor: Option<&str>,
    ) -> Result<Execution, DispatchError> {
        let exec = self.execution(trace_id).await?;
        if exec.status.is_final() {
            return Err(DispatchError::AlreadyFinal(exec.status));
        }
        let now = Utc::now();
        let by = actor.map_or(String::new(), |a| format!(" by {a}"));
        let t = Transition {
            finish_time: Some(now),
            duration_ms: exec.start_time.map(|s| (now - s).num_milliseconds().max(0)),
            error_message: Some(format!("cancelled{by}")),
            ..Transition::to(&[Pending, Running], Cancelled)
        };
        match self.settler.write(trace_id, t).await {
            Ok(Applied::Yes(_)) => {}
            Ok(Applied::No) => {
                let status = self.execution(trace_id).await?.status;
                return Err(DispatchError::AlreadyFinal(status));
            }
            Err(_) => return Err(DispatchError::Stopping),
        }
        attempt::record_final(&exec, Cancelled, None);
        if self.waiting.forget_row(&exec) {
            // Claimed ahead and not called yet: nothing to stop.
            return self.execution(trace_id).await;
        }
        if exec.executor_instance.is_some() {
            let answer = match self.stop_at_executor(&exec).await {
                Some(client::Probe::Finished {
                    status: Cancelled, ..
                }) => "the executor stopped it".to_string(),
                Some(client::Probe::Finished { status, .. }) => {
                    format!("the executor had already finished it ({status})")
                }
                Some(client::Probe::Unknown { .. }) => "the executor was not running it".into(),
                Some(client::Probe::Running) => "the executor says it still runs".into(),
                Some(client::Probe::Unsupported) => {
                    "the executor has no cancel endpoint; it may run to its end".into()
                }
                Some(client::Probe::Unreachable(e)) => {
                    format!("the executor could not be asked: {e}")
                }
                None => "the executor is unknown".into(),
            };
            let note = Transition {
                error_message: Some(format!("cancelled{by}; {answer}")),
                ..Transition::to(&[Cancelled], Cancelled)
            };
            let _ = self.settler.write(trace_id, note).await;
        }
        self.execution(trace_id).await
    }

    /// The executor instance named on `exec`, with its path prefix when discovery knows it.
    async fn instance_of(&self, exec: &Execution) -> Option<ExecutorInstance> {
        let addr = InstanceAddr::parse(exec.executor_instance.as_deref()?).ok()?;
        let service = self.store.get_job(&exec.job_name).await.ok().flatten();
        let known = match service {
            Some(job) => self
                .discovery
                .executors(job.spec.service_name.as_str())
                .await
                .into_iter()
                .find(|e| e.addr == addr),
            None => None,
        };
        Some(known.unwrap_or(ExecutorInstance {
            addr,
            path_prefix: None,
        }))
    }
}

/// A call slot; the in-flight gauge follows it.
struct CallSlot<'a> {
    _permit: SemaphorePermit<'a>,
    dispatcher: &'a Dispatcher,
}

impl CallSlot<'_> {
    fn publish(&self) {
        let d = self.dispatcher;
        metrics::gauge!("scheduler_calls_in_flight")
            .set((d.max_calls - d.calls.available_permits()) as f64);
    }
}

impl Drop for CallSlot<'_> {
    fn drop(&mut self) {
        let d = self.dispatcher;
        // The permit is released after this body: count it as gone already.
        metrics::gauge!("scheduler_calls_in_flight")
            .set((d.max_calls - d.calls.available_permits()).saturating_sub(1) as f64);
    }
}
