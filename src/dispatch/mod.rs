//! Dispatch: turning fires into execution rows and executor calls, and settling them. A cron
//! fire runs one way through stages that hand forward, each in its own file:
//!
//! ```text
//! engine ─hand─▶ record ─▶ waiting room ─instant─▶ launch ─▶ attempt ─▶ client (executor)
//!   ▲              │                                  │          │
//!   └──── Owed ────┴──────────────────────────────────┘          └─▶ verdict ─▶ settle (database)
//! ```
//!
//! - [`record`]: claims and PENDING rows, written in batches ahead of the instant;
//! - [`waiting`]: fires between their hand-out and their instant, withdrawable until then;
//! - [`launch`]: at the instant, the definition check, the admission of guarded (SKIP,
//!   COVER) fires, and the attempts' start; also manual runs and children;
//! - [`attempt`]: one attempt at one row: the lease that says who may call, the call with
//!   failover, a stop when no answer comes;
//! - [`verdict`]: what the attempt came to, settled with the retry and the children it earns;
//! - [`settle`]: group commit of state changes, never dropped;
//! - [`client`]: the executor wire protocol (call, status, cancel);
//! - [`operator`]: what the API asks (trigger, re-run, cancel, result report);
//! - [`admission`]: the backlog and the call slots; [`planner`], [`plan`], [`rows`]: which
//!   rows a fire has and where they go; [`tasks`]: background work and shutdown.
//!
//! Instants that could not be recorded, or were withdrawn at the instant, go back to the
//! engine as [`Owed`] messages its loop receives.
//!
//! Bounds: at most `executor.max_in_flight` calls are in flight, and at most
//! `executor.max_backlog` fires are between hand-off and their last result. The engine hands
//! over only fires it holds a backlog place for and never waits for room inside a hand-over,
//! so any number of owed fires flows through the bound.

mod admission;
mod attempt;
pub mod calls;
mod caps;
pub mod client;
mod instant;
mod launch;
mod operator;
pub mod plan;
mod planner;
mod record;
mod rows;
mod series;
mod settle;
mod tasks;
mod verdict;
mod waiting;
mod withdraw;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{Notify, OwnedSemaphorePermit, mpsc};

pub use admission::Hold;
pub use attempt::{Attempt, Attempts, Start};
pub use launch::{Launcher, Ready};
pub use operator::{DispatchError, Operator, TriggerOptions};
pub use planner::Planner;
pub use record::Fire;
pub use verdict::Verdict;
pub use withdraw::Owed;

use admission::Admission;
use client::ExecutorClient;
use instant::InstantCheck;
use record::{FIRE_BATCH, Recorder};
use tasks::Tasks;
use verdict::Outcomes;
use waiting::WaitingRoom;
use withdraw::Withdraw;

use crate::alerts::Alerts;
use crate::clock::Clock;
use crate::config::Settings;
use crate::discovery::Discovery;
use crate::jobs::{JobBook, JobDefinition};
use crate::store::Store;

/// The longest the execution writer waits between attempts at a batch the database refused.
pub const WRITE_RETRY_MAX: Duration = settle::MAX_RETRY;

/// The stages, wired.
pub struct Dispatcher {
    recorder: Arc<Recorder>,
    withdraw: Arc<Withdraw>,
    waiting: Arc<WaitingRoom>,
    launcher: Arc<Launcher>,
    attempts: Arc<Attempts>,
    operator: Operator,
    admission: Arc<Admission>,
    tasks: Arc<Tasks>,
    alerts: Arc<Alerts>,
}

/// What the dispatcher needs from the rest of the instance.
pub struct Parts {
    pub clock: Clock,
    pub store: Arc<dyn Store>,
    /// The same database on a connection of its own, for the check at each instant: it must
    /// not wait behind the batches that record the next instants' fires.
    pub instant_store: Arc<dyn Store>,
    pub discovery: Arc<dyn Discovery>,
    pub alerts: Arc<Alerts>,
    /// The engine's job definitions, which the launcher checks fires against.
    pub book: Arc<JobBook>,
    /// Wakes the engine to reload jobs.
    pub reload: Arc<Notify>,
}

impl Dispatcher {
    /// Builds the stages and starts the launcher. The receiver gets the instants owed back to
    /// the engine.
    pub fn start(
        settings: &Settings,
        parts: Parts,
    ) -> anyhow::Result<(Self, mpsc::UnboundedReceiver<Owed>)> {
        let (clock, store) = (parts.clock, parts.store);
        let retries = settings.scheduler.retry_backoff();
        let lease = Duration::from_secs(settings.compensation.pending_grace_seconds);
        let admission = Arc::new(Admission::new(
            settings.executor.max_backlog.get(),
            settings.executor.max_in_flight.get(),
        ));
        let tasks = Arc::new(Tasks::new(clock));
        let caps = caps::ServiceCaps::new(
            settings.executors.limits.clone(),
            parts.discovery.schedulers(),
        );
        let planner = Arc::new(Planner::new(parts.discovery, admission.clone(), retries));
        let waiting = Arc::new(WaitingRoom::default());
        let (owed, owed_rx) = mpsc::unbounded_channel();
        let (children, children_rx) = mpsc::unbounded_channel();
        let withdraw = Arc::new(Withdraw {
            fires: store.clone(),
            owed,
            tasks: tasks.clone(),
            me: planner.me().to_string(),
        });
        let attempts = Arc::new(Attempts {
            clock,
            executions: store.clone(),
            jobs: store.clone(),
            logs: store.clone(),
            client: ExecutorClient::configured(&settings.executor)?,
            admission: admission.clone(),
            caps,
            tasks: tasks.clone(),
            outcomes: Outcomes::new(
                clock,
                store.clone(),
                parts.alerts.clone(),
                retries,
                planner.clone(),
                parts.book.clone(),
                settle::start_deferral(lease),
            ),
            lease: chrono::Duration::from_std(lease)?,
            report_base: format!("http://{}", planner.me()),
            attempting: Default::default(),
            children,
            calls: Default::default(),
        });
        let launcher = Arc::new(Launcher {
            clock,
            store: store.clone(),
            instant_store: parts.instant_store,
            book: parts.book,
            waiting: waiting.clone(),
            attempts: attempts.clone(),
            tasks: tasks.clone(),
            withdraw: withdraw.clone(),
            reload: parts.reload,
            instant: InstantCheck::new(clock),
        });
        tasks.spawn(launcher.clone().run(children_rx));
        let recorder = Arc::new(Recorder {
            clock,
            fires: store.clone(),
            planner: planner.clone(),
            waiting: waiting.clone(),
            withdraw: withdraw.clone(),
        });
        let dispatcher = Self {
            operator: Operator {
                clock,
                store,
                planner,
                waiting: waiting.clone(),
                launcher: launcher.clone(),
                attempts: attempts.clone(),
            },
            recorder,
            withdraw,
            waiting,
            launcher,
            attempts,
            admission,
            tasks,
            alerts: parts.alerts,
        };
        Ok((dispatcher, owed_rx))
    }

    pub fn instance_id(&self) -> &str {
        self.attempts.outcomes.planner.me()
    }

    /// Takes up to `max` places in the backlog, without waiting.
    pub fn reserve(&self, max: usize) -> Vec<OwnedSemaphorePermit> {
        self.admission.reserve(max)
    }

    /// Resolves once the backlog has room (taking nothing).
    pub async fn room(&self) {
        self.admission.room().await
    }

    /// Hands due cron fires over, each with its backlog place: they wait in the waiting room
    /// while their claims and rows are recorded (batches of up to `FIRE_BATCH` fires, each in
    /// its own transaction on its own connection), and are called at their instant.
    pub fn hand(&self, fires: Vec<Fire>) {
        let mut entered = Vec::with_capacity(fires.len());
        for fire in fires {
            let at = chrono::SubsecRound::trunc_subsecs(fire.at, 0);
            self.waiting.enter(fire.job.clone(), at, fire.hold);
            entered.push((fire.job, at));
        }
        for chunk in entered.chunks(FIRE_BATCH) {
            let (recorder, chunk) = (self.recorder.clone(), chunk.to_vec());
            self.tasks
                .spawn(async move { recorder.record(chunk).await });
        }
    }

    /// Withdraws `job`'s fires that `keep` does not keep, given the definition each was handed
    /// out under and its instant (the job was edited, disabled or deleted before it): their
    /// claims and rows are deleted, then their instants are owed to the engine again (see
    /// [`withdraw`]).
    pub fn withdraw(&self, job: &str, keep: impl Fn(&JobDefinition, DateTime<Utc>) -> bool) {
        let fires = self.waiting.withdraw(job, keep);
        if !fires.is_empty() {
            tracing::info!(
                job_name = job,
                fires = fires.len(),
                "fires claimed ahead withdrawn: the job changed before their instant"
            );
        }
        let fires = fires
            .into_iter()
            .map(|f| (f.fire_time, f.rows.unwrap_or_default()))
            .collect();
        self.withdraw.take_back(job, fires);
    }

    /// The jobs with fires handed out and not launched yet.
    pub fn handed_out_jobs(&self) -> Vec<String> {
        self.waiting.jobs()
    }

    /// A fire the misfire policy skipped (alerted as FIRE_SKIPPED).
    pub fn fire_skipped(&self, job: &JobDefinition, fire_time: DateTime<Utc>) {
        self.alerts.fire_skipped(job, fire_time);
    }

    /// Triggers, re-runs, cancels and result reports.
    pub fn operator(&self) -> &Operator {
        &self.operator
    }

    /// The attempts, for compensation.
    pub fn attempts(&self) -> &Arc<Attempts> {
        &self.attempts
    }

    /// The launcher, for compensation.
    pub fn launcher(&self) -> &Arc<Launcher> {
        &self.launcher
    }

    /// The last call this instance made to each executor.
    pub fn calls(&self) -> &calls::CallLog {
        &self.attempts.calls
    }

    /// The planner, for backfills.
    pub fn planner(&self) -> &Arc<Planner> {
        &self.attempts.outcomes.planner
    }

    /// Stops accepting work and waits up to `grace` for in-flight dispatches. Fires claimed
    /// ahead and due within `grace` are still called; waits for later due times and for call
    /// slots end at once (their rows stay PENDING for compensation).
    pub async fn drain(&self, grace: Duration) -> bool {
        self.tasks.drain(grace).await
    }
}
