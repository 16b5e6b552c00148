//! What compensation does with one row whose holder is gone or whose call is overdue. The
//! executor is asked first, and its answer decides; a row is dispatched again only when no run
//! of it can be going on, and never retried while its executor says it still runs, so a range
//! never runs twice at the same time:
//!
//! | row | executor says | then |
//! |---|---|---|
//! | PENDING, lease over | running / finished | adopt: RUNNING, or settle with its verdict |
//! | PENDING, lease over, first attempt of a disabled job's cron fire | anything else | CANCELLED: a disabled job does not fire |
//! | PENDING, lease over | never had it, unreachable, no status endpoint | take it over and launch it (a guarded job's first attempt is admitted under its overlap policy) |
//! | RUNNING | finished | settle with its verdict (and what it earns) |
//! | RUNNING, overdue | running | ask it to stop (waiting for the answer); once stopped: TIMEOUT + retry |
//! | RUNNING | running | left: it still runs |
//! | RUNNING | never had it (not restarted) | back to PENDING, taken over, called again: the call never arrived, no retry is spent |
//! | RUNNING | restarted since the call | FAILED + retry: the run died with the process |
//! | RUNNING | unreachable, gone from discovery, past its timeout + [`STOP_ALLOWANCE`] | FAILED + retry (an executor stops a handler at its timeout) |
//! | RUNNING, overdue, past `stuck_after` | no status endpoint | TIMEOUT + retry (at-least-once: such an executor cannot tell) |
//! | RUNNING | anything else | left for the next pass |

use std::sync::Arc;

use crate::clock::Clock;
use crate::dispatch::client::Probe;
use crate::dispatch::{Attempt, Attempts, Hold, Launcher, Ready, Start, Verdict};
use crate::jobs::{Execution, ExecutionStatus, JobDefinition, OverlapPolicy, TriggerType};
use crate::store::{Applied, Store, StoreError, Transition};

use ExecutionStatus::{Cancelled, Failed, Pending, Running, Timeout};

/// How long past an execution's timeout an executor that left discovery, and cannot be
/// asked, is taken to have stopped its handler: the SDKs stop a handler at its timeout, and
/// a handler slow to stop gets this much more.
pub const STOP_ALLOWANCE: chrono::Duration = chrono::Duration::seconds(30);

/// What recovery did with one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovered {
    /// Taken over and dispatched again.
    Resumed,
    /// Adopted as RUNNING: the executor has it.
    Adopted,
    /// Settled with a final status.
    Settled,
    /// Still running at the executor (or nothing could be learnt): left for the next pass.
    Left,
    /// Someone else moved the row first.
    Raced,
}

pub struct Recovery {
    pub clock: Clock,
    pub store: Arc<dyn Store>,
    pub attempts: Arc<Attempts>,
    pub launcher: Arc<Launcher>,
    /// An executor that cannot tell whether it still runs an execution is waited for this
    /// long before the execution is settled TIMEOUT and retried.
    pub stuck_after: chrono::Duration,
}

impl Recovery {
    fn me(&self) -> &str {
        self.attempts.outcomes.planner.me()
    }

    /// A PENDING row whose holder's lease ran out (its scheduler died or is stuck). `hold` is
    /// the backlog place the resumed attempt will use.
    pub async fn pending(&self, exec: Execution, hold: Hold) -> Result<Recovered, StoreError> {
        if exec.scheduler_instance.as_deref() == Some(self.me())
            && self.attempts.is_attempting(&exec.trace_id)
        {
            // Ours, and its attempt is still going (a slow call, RUNNING not written yet).
            return Ok(Recovered::Raced);
        }
        let Some(job) = self.store.get_job(&exec.job_name).await?.map(Arc::new) else {
            let why = "the job was deleted before this execution was dispatched";
            return self.close(&exec, Failed, why).await;
        };
        let holder = exec.lease();
        // The old holder may have sent the call just before it died (RUNNING is written after
        // the call): ask the planned executor before calling again.
        match self.attempts.status(&exec).await.map(|(_, p)| p) {
            Some(Probe::Running) => {
                let adopt = Transition {
                    held_by: holder,
                    start_time: Some(exec.due_time),
                    ..Transition::to(&[Pending], Running)
                };
                let applied = self.store.transition(&exec.trace_id, &adopt).await?;
                return Ok(if applied.applied() {
                    Recovered::Adopted
                } else {
                    Recovered::Raced
                });
            }
            Some(Probe::Finished { status, message }) => {
                let verdict = Verdict::from_probe(status, message).by_compensation();
                return Ok(self.settle(&job, &exec, &[Pending], verdict, hold).await);
            }
            _ => {}
        }
        let first_cron = exec.trigger_type == TriggerType::Cron && exec.retry_count == 0;
        if first_cron && !job.spec.enabled {
            let why = "withdrawn: the job was disabled before this fire was called";
            return self.close(&exec, Cancelled, why).await;
        }
        // The job was switched off (disabled, or deleted and created again under its name)
        // since this instant: its holder died before it could withdraw the fire, and the
        // instant is not owed to the job as it is now.
        if first_cron && exec.fire_time < job.enabled_since {
            let why = "withdrawn: the job was disabled or deleted after this fire was claimed";
            return self.close(&exec, Cancelled, why).await;
        }
        let now = self.clock.now();
        let take = Transition {
            held_by: holder,
            hand_to: Some((self.me().to_string(), now)),
            ..Transition::to(&[Pending], Pending)
        };
        if !self
            .store
            .transition(&exec.trace_id, &take)
            .await?
            .applied()
        {
            return Ok(Recovered::Raced);
        }
        tracing::info!(trace_id = %exec.trace_id, job_name = %exec.job_name, "dispatching an execution whose call never happened");
        let exec = Execution {
            scheduler_instance: Some(self.me().to_string()),
            due_time: crate::store::ms(now),
            ..exec
        };
        let guarded = job.spec.overlap_policy != OverlapPolicy::Allow && exec.retry_count == 0;
        if guarded {
            self.launcher
                .launch(vec![Ready {
                    job,
                    rows: vec![exec],
                    hold,
                    claimed: None,
                }])
                .await;
        } else {
            self.attempts.spawn(Attempt {
                job,
                row: exec,
                start: Start::Take,
                hold,
            });
        }
        Ok(Recovered::Resumed)
    }

    /// A RUNNING row whose scheduler is gone (`overdue` false) or whose call outlived the job's
    /// timeout (`overdue` true).
    pub async fn running(
        &self,
        exec: Execution,
        overdue: bool,
        hold: Hold,
    ) -> Result<Recovered, StoreError> {
        let job = self.store.get_job(&exec.job_name).await?.map(Arc::new);
        let Some((instance, probe)) = self.attempts.status(&exec).await else {
            let why = "no executor is recorded for this execution";
            return Ok(self.settle_running(job.as_ref(), &exec, Timeout, why).await);
        };
        match probe {
            Probe::Finished { status, message } => {
                let verdict = Verdict::from_probe(status, message).by_compensation();
                Ok(self.settle_with(job.as_ref(), &exec, verdict).await)
            }
            Probe::Running if overdue => Ok(self.stop_overdue(job.as_ref(), &exec).await),
            Probe::Running => Ok(Recovered::Left),
            Probe::Unknown { restarted: true } => {
                let why = "the executor restarted while running this execution";
                Ok(self.settle_running(job.as_ref(), &exec, Failed, why).await)
            }
            Probe::Unknown { restarted: false } => match job {
                Some(job) => self.call_again(job, exec, hold).await,
                None => Ok(Recovered::Left),
            },
            Probe::Unreachable(_) | Probe::Unsupported => {
                let gone = match &job {
                    Some(j) => self.attempts.executor_gone(j, &instance).await,
                    None => true,
                };
                let answers = !matches!(probe, Probe::Unsupported);
                Ok(self
                    .cannot_tell(job.as_ref(), &exec, gone, answers, overdue)
                    .await)
            }
        }
    }

    /// An overdue run that still runs is asked to stop; it ends TIMEOUT (with its retry) once
    /// its executor says it stopped, and is left running otherwise.
    async fn stop_overdue(&self, job: Option<&Arc<JobDefinition>>, exec: &Execution) -> Recovered {
        let verdict = match self.attempts.stop(exec).await {
            Some(Probe::Finished {
                status: Cancelled, ..
            })
            | Some(Probe::Unknown { .. }) => Verdict::new(
                Timeout,
                "past the job's timeout; the executor stopped it on request",
            ),
            Some(Probe::Finished { status, message }) => Verdict::from_probe(status, message),
            _ => return Recovered::Left,
        };
        self.settle_with(job, exec, verdict.by_compensation()).await
    }

    /// A RUNNING row whose call never arrived (its scheduler died between RUNNING and the
    /// call): back to PENDING, taken over, called again; no retry is spent.
    async fn call_again(
        &self,
        job: Arc<JobDefinition>,
        exec: Execution,
        hold: Hold,
    ) -> Result<Recovered, StoreError> {
        let now = self.clock.now();
        let take = Transition {
            hand_to: Some((self.me().to_string(), now)),
            ..Transition::to(&[Running], Pending)
        };
        if !self
            .store
            .transition(&exec.trace_id, &take)
            .await?
            .applied()
        {
            return Ok(Recovered::Raced);
        }
        let row = Execution {
            scheduler_instance: Some(self.me().to_string()),
            due_time: crate::store::ms(now),
            status: Pending,
            ..exec
        };
        self.attempts.spawn(Attempt {
            job,
            row,
            start: Start::Take,
            hold,
        });
        Ok(Recovered::Resumed)
    }

    /// A RUNNING row whose executor cannot tell: unreachable, or without a status endpoint
    /// (`answers` false). Settled only when no run of it can be going on: its executor left
    /// and would have stopped it by its timeout; or, for an executor that can never tell,
    /// past `stuck_after` (the documented at-least-once case).
    async fn cannot_tell(
        &self,
        job: Option<&Arc<JobDefinition>>,
        exec: &Execution,
        gone: bool,
        answers: bool,
        overdue: bool,
    ) -> Recovered {
        let since = self.clock.now() - exec.start_time.unwrap_or(exec.due_time);
        let timeout = chrono::Duration::seconds(job.map_or(0, |j| j.spec.timeout_seconds.into()));
        if gone && since > timeout + STOP_ALLOWANCE {
            let why = "the executor instance left while running this execution";
            return self.settle_running(job, exec, Failed, why).await;
        }
        if !answers && overdue && since > self.stuck_after {
            let why = "no result long after the timeout, and the executor cannot tell whether it still runs";
            return self.settle_running(job, exec, Timeout, why).await;
        }
        Recovered::Left
    }

    async fn settle_running(
        &self,
        job: Option<&Arc<JobDefinition>>,
        exec: &Execution,
        status: ExecutionStatus,
        why: &str,
    ) -> Recovered {
        let verdict = Verdict::new(status, why).by_compensation();
        let recovered = self.settle_with(job, exec, verdict).await;
        if recovered == Recovered::Settled {
            tracing::warn!(trace_id = %exec.trace_id, job_name = %exec.job_name, %status, why, "execution settled by compensation");
        }
        recovered
    }

    /// Settles a RUNNING row with `verdict`, and starts what it earns.
    async fn settle_with(
        &self,
        job: Option<&Arc<JobDefinition>>,
        exec: &Execution,
        verdict: Verdict,
    ) -> Recovered {
        match job {
            Some(job) => self.settle(job, exec, &[Running], verdict, None).await,
            None => {
                let settled = self
                    .attempts
                    .outcomes
                    .settle(None, exec, &[Running], verdict, None)
                    .await;
                if settled.is_some() {
                    Recovered::Settled
                } else {
                    Recovered::Raced
                }
            }
        }
    }

    async fn settle(
        &self,
        job: &Arc<JobDefinition>,
        exec: &Execution,
        from: &'static [ExecutionStatus],
        verdict: Verdict,
        hold: Hold,
    ) -> Recovered {
        let since = Some(exec.start_time.unwrap_or(exec.due_time));
        if self
            .attempts
            .conclude(job, exec, from, verdict, since, &hold)
            .await
        {
            Recovered::Settled
        } else {
            Recovered::Raced
        }
    }

    /// Ends a PENDING row that must not be called, with `status` and `why`.
    async fn close(
        &self,
        exec: &Execution,
        status: ExecutionStatus,
        why: &str,
    ) -> Result<Recovered, StoreError> {
        let t = Transition {
            error_message: Some(why.to_string()),
            finish_time: Some(self.clock.now()),
            ..Transition::to(&[Pending], status)
        };
        Ok(match self.store.transition(&exec.trace_id, &t).await? {
            Applied::Yes(_) => Recovered::Settled,
            Applied::No => Recovered::Raced,
        })
    }
}
