//! What compensation does with one row whose holder is gone or whose call is overdue (SPEC
//! §7). The executor is asked first, and its answer decides; a row is dispatched again only
//! when no run of it can be going on, so a range never runs twice at the same time:
//!
//! | row | executor says | then |
//! |---|---|---|
//! | PENDING, lease over | running / finished | adopt: RUNNING, or settle with its verdict |
//! | PENDING, lease over | never had it, unreachable, no status endpoint | take it over and call |
//! | RUNNING | finished | settle with its verdict (and the retry policy) |
//! | RUNNING, overdue | running | ask it to stop; once stopped: TIMEOUT + retry |
//! | RUNNING | never had it (not restarted) | back to PENDING, taken over, called again: the call never arrived, no retry is spent |
//! | RUNNING | restarted since the call | FAILED + retry: the run died with the process |
//! | RUNNING | unreachable and gone from discovery | FAILED + retry |
//! | RUNNING, past `stuck_after` | no status endpoint | TIMEOUT + retry (at-least-once: such an executor cannot tell) |
//! | RUNNING | anything else | left for the next pass |

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Dispatcher;
use super::attempt::{Hold, Lease, Verdict};
use super::client::Probe;
use crate::jobs::{Execution, ExecutionStatus, JobDefinition};
use crate::store::{Applied, StoreError, Transition};

use ExecutionStatus::{Failed, Pending, Running, Timeout};

/// What recovery did with one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
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

impl Dispatcher {
    /// A PENDING row whose holder's lease ran out (its scheduler died or is stuck). `hold` is
    /// the backlog place the resumed attempt will use.
    pub async fn recover_pending(
        self: &Arc<Self>,
        exec: Execution,
        hold: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<Recovery, StoreError> {
        if exec.scheduler_instance.as_deref() == Some(self.instance_id())
            && self
                .attempting
                .lock()
                .expect("attempting lock")
                .contains(&exec.trace_id)
        {
            // Ours, and its attempt is still going (a slow call, RUNNING not written yet).
            return Ok(Recovery::Raced);
        }
        let Some(job) = self.store.get_job(&exec.job_name).await?.map(Arc::new) else {
            let gone = Transition {
                error_message: Some(
                    "the job was deleted before this execution was dispatched".into(),
                ),
                finish_time: Some(Utc::now()),
                ..Transition::to(&[Pending], Failed)
            };
            return Ok(applied(
                self.store.transition(&exec.trace_id, &gone).await?,
                Recovery::Settled,
            ));
        };
        let holder = exec.scheduler_instance.clone().map(|s| (s, exec.due_time));
        // The old holder may have sent the call just before it died (RUNNING is written after
        // the call): ask the planned executor before calling again.
        if let Some(instance) = self.instance_of(&exec).await {
            match self
                .client
                .status(&instance, &exec.trace_id, exec.due_time)
                .await
            {
                Probe::Running => {
                    let adopt = Transition {
                        held_by: holder,
                        start_time: Some(exec.due_time),
                        ..Transition::to(&[Pending], Running)
                    };
                    return Ok(applied(
                        self.store.transition(&exec.trace_id, &adopt).await?,
                        Recovery::Adopted,
                    ));
                }
                Probe::Finished { status, message } => {
                    let verdict = Verdict::from_probe(status, message).by_compensation();
                    let settled = self
                        .settle(
                            Some(&job),
                            &exec,
                            &[Pending],
                            verdict,
                            Some(exec.due_time),
                            &None,
                        )
                        .await;
                    return Ok(if settled {
                        Recovery::Settled
                    } else {
                        Recovery::Raced
                    });
                }
                Probe::Unknown { .. } | Probe::Unsupported | Probe::Unreachable(_) => {}
            }
        }
        let now = Utc::now();
        let take = Transition {
            held_by: holder,
            hand_to: Some((self.instance_id().to_string(), now)),
            ..Transition::to(&[Pending], Pending)
        };
        self.take_and_run(job, exec, take, now, hold).await
    }

    /// A RUNNING row whose scheduler is gone (`overdue` false) or whose call outlived the job's
    /// timeout (`overdue` true). `stuck_after` bounds how long an executor without a status
    /// endpoint is waited for.
    pub async fn recover_running(
        self: &Arc<Self>,
        exec: Execution,
        overdue: bool,
        stuck_after: chrono::Duration,
        hold: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Result<Recovery, StoreError> {
        let job = self.store.get_job(&exec.job_name).await?.map(Arc::new);
        let since = exec.start_time.unwrap_or(exec.due_time);
        let now = Utc::now();
        let Some(instance) = self.instance_of(&exec).await else {
            return Ok(self
                .settle_running(
                    job.as_ref(),
                    &exec,
                    Timeout,
                    "no executor is recorded for this execution",
                )
                .await);
        };
        let probe = if overdue {
            self.client.cancel(&instance, &exec.trace_id, since).await
        } else {
            self.client.status(&instance, &exec.trace_id, since).await
        };
        match probe {
            Probe::Finished { status, message } => {
                let verdict = if overdue && status == ExecutionStatus::Cancelled {
                    Verdict {
                        status: Timeout,
                        message: None,
                        error: Some(
                            "past the job's timeout; the executor stopped it on request".into(),
                        ),
                        retry_as: crate::jobs::TriggerType::Retry,
                        executor: None,
                    }
                } else {
                    Verdict::from_probe(status, message)
                }
                .by_compensation();
                let settled = self
                    .settle(job.as_ref(), &exec, &[Running], verdict, Some(since), &None)
                    .await;
                Ok(if settled {
                    Recovery::Settled
                } else {
                    Recovery::Raced
                })
            }
            Probe::Running => Ok(Recovery::Left),
            Probe::Unknown { restarted: true } => Ok(self
                .settle_running(
                    job.as_ref(),
                    &exec,
                    Failed,
                    "the executor restarted while running this execution",
                )
                .await),
            Probe::Unknown { restarted: false } => {
                // The call never arrived (its scheduler died between RUNNING and the call).
                let (Some(job), Some(hold)) = (job, hold) else {
                    return Ok(Recovery::Left);
                };
                let take = Transition {
                    hand_to: Some((self.instance_id().to_string(), now)),
                    ..Transition::to(&[Running], Pending)
                };
                self.take_and_run(job, exec, take, now, hold).await
            }
            Probe::Unreachable(_) | Probe::Unsupported => {
                let gone = match &job {
                    Some(j) => self.executor_gone(j, &instance).await,
                    None => true,
                };
                if gone {
                    Ok(self
                        .settle_running(
                            job.as_ref(),
                            &exec,
                            Failed,
                            "the executor instance left while running this execution",
                        )
                        .await)
                } else if overdue && now - since > stuck_after {
                    Ok(self
                        .settle_running(job.as_ref(), &exec, Timeout, "no result long after the timeout, and the executor cannot tell whether it still runs")
                        .await)
                } else {
                    Ok(Recovery::Left)
                }
            }
        }
    }

    async fn settle_running(
        self: &Arc<Self>,
        job: Option<&Arc<JobDefinition>>,
        exec: &Execution,
        status: ExecutionStatus,
        why: &str,
    ) -> Recovery {
        let verdict = Verdict {
            status,
            message: None,
            error: Some(why.to_string()),
            retry_as: crate::jobs::TriggerType::Retry,
            executor: None,
        }
        .by_compensation();
        if self
            .settle(job, exec, &[Running], verdict, None, &None)
            .await
        {
            tracing::warn!(trace_id = %exec.trace_id, job_name = %exec.job_name, %status, why, "execution settled by compensation");
            Recovery::Settled
        } else {
            Recovery::Raced
        }
    }

    /// Takes `exec` with `take` (a compare-and-set handing it to this instance at `now`) and
    /// dispatches it under the new lease.
    async fn take_and_run(
        self: &Arc<Self>,
        job: Arc<JobDefinition>,
        exec: Execution,
        take: Transition,
        now: DateTime<Utc>,
        hold: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<Recovery, StoreError> {
        if !self
            .store
            .transition(&exec.trace_id, &take)
            .await?
            .applied()
        {
            return Ok(Recovery::Raced);
        }
        tracing::info!(trace_id = %exec.trace_id, job_name = %exec.job_name, "dispatching an execution whose call never happened");
        let exec = Execution {
            scheduler_instance: Some(self.instance_id().to_string()),
            due_time: crate::store::ms(now),
            status: Pending,
            ..exec
        };
        let lease = Lease {
            since: exec.due_time,
        };
        let hold: Hold = Some(Arc::new(hold));
        self.spawn_attempt(job, exec, lease, hold);
        Ok(Recovery::Resumed)
    }
}

fn applied(a: Applied, what: Recovery) -> Recovery {
    if a.applied() { what } else { Recovery::Raced }
}
