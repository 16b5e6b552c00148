//! The job's run policies on the fire path (SPEC §13): which executor a fire goes to first
//! (`routeStrategy`), what a fire does while the job still runs (`overlapPolicy`), and the
//! jobs a fully successful fire triggers (`childJobs`).
//!
//! - Routing: the strategy picks where the range → executor mapping starts; `LEAST_BUSY`
//!   counts the calls this instance has in flight per executor.
//! - Overlap, for every fire (cron, manual trigger, child trigger; a job that must not run
//!   twice at once is protected from an operator's trigger too, as XXL-JOB's block strategy
//!   and Quartz's `@DisallowConcurrentExecution` are): `SKIP` records the fire's rows as
//!   SKIPPED, uncalled, when the job has a PENDING or RUNNING execution; `COVER` cancels
//!   those (each executor is asked to stop) before the fire's calls start. The open
//!   executions are read in the transaction that records the fire, under a lock on the job's
//!   row, so guarded fires of one job are judged one after another whichever instances
//!   record them: of simultaneous SKIP fires exactly one runs, of simultaneous COVER fires the
//!   last recorded runs. The fire claim still makes a cron fire itself exactly-once. Retries
//!   (automatic, compensation's, an operator's retry) continue a run and are not judged
//!   again.
//! - Child jobs: when every range of a fire has ended SUCCESS, each child is triggered once
//!   (trigger type CHILD, `parentTraceId` the parent execution that completed the fire). A
//!   fire is named by its execution ids ([`fire_key`]: one cron instant, or one trigger),
//!   which its retries and an operator's re-runs keep, so two runs in one second are two
//!   fires and a re-run can complete its fire. The child's execution ids derive from the
//!   parent fire, so two ranges finishing together, on one instance or two, collide on the
//!   unique key and only one trigger is written.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::rows::fire_rows;
use super::{Dispatcher, Hold, Lease, plan};
use crate::discovery::ExecutorInstance;
use crate::jobs::{
    Execution, ExecutionStatus, JobDefinition, NewExecution, OverlapPolicy, RouteStrategy,
    TriggerType, child_execution_id, fire_key,
};
use crate::store::{FireClaim, FireOutcome, StoreError};

/// A due cron fire with its backlog place.
pub(super) type DueFire = (Arc<JobDefinition>, DateTime<Utc>, Hold);

impl Dispatcher {
    /// Where the job's routing strategy starts the range → executor mapping.
    pub(super) fn first_executor(
        &self,
        job: &JobDefinition,
        executors: &[ExecutorInstance],
    ) -> usize {
        let addrs: Vec<&str> = executors.iter().map(|e| e.addr.as_str()).collect();
        // Only LEAST_BUSY reads the in-flight counts: the others skip the lock.
        let in_flight = match job.spec.route_strategy {
            RouteStrategy::LeastBusy => self.busy.of(executors),
            _ => Vec::new(),
        };
        let input = plan::RouteInput {
            strategy: job.spec.route_strategy,
            key: job.name().as_str(),
            in_flight: &in_flight,
            round_robin: self.round_robin.next(job.name().as_str()),
            random: rand::random(),
        };
        plan::route(&addrs, &input).unwrap_or(0)
    }

    /// A cron fire of a job whose overlap policy is not ALLOW, recorded alone at its instant
    /// and judged against the job's open executions.
    pub(super) async fn guarded_fire(
        self: &Arc<Self>,
        job: Arc<JobDefinition>,
        fire_time: DateTime<Utc>,
        hold: Hold,
    ) {
        let (claim, rows) = self.cron_record(&job, fire_time, Utc::now()).await;
        match self
            .record_judged(&job, Some(&claim), &rows, |_| false)
            .await
        {
            Ok(outcome) => self.after_cron_record(job, fire_time, hold, outcome),
            Err(e) => {
                tracing::error!(job_name = %job.name(), %fire_time, error = %e, "could not record a due fire; it follows the misfire policy once the database answers");
                self.missed_fires(&[(job, fire_time, hold)]);
            }
        }
    }

    /// Records a fire's `rows` (with its claim when it is a cron fire) under the job's overlap
    /// policy: under SKIP the rows are recorded SKIPPED when the job has open executions;
    /// under COVER those are cancelled once the fire is recorded, before its calls start.
    /// Open executions for which `same_fire` holds are this very fire, recorded by a racing
    /// instance: they neither count nor are cancelled (recording this one collides with them
    /// on the unique key).
    pub(super) async fn record_judged(
        self: &Arc<Self>,
        job: &JobDefinition,
        claim: Option<&FireClaim>,
        rows: &[NewExecution],
        same_fire: impl Fn(&Execution) -> bool + Send + Sync,
    ) -> Result<FireOutcome, StoreError> {
        let policy = job.spec.overlap_policy;
        if policy == OverlapPolicy::Allow {
            return self.store.record_fire(claim, rows).await;
        }
        let judge = |open: &[Execution]| -> Option<String> {
            let running: Vec<&str> = open
                .iter()
                .filter(|e| !same_fire(e))
                .map(|e| e.trace_id.as_str())
                .collect();
            (policy == OverlapPolicy::Skip && !running.is_empty()).then(|| {
                format!(
                    "not called: the job still runs {} (overlapPolicy SKIP)",
                    running.join(", ")
                )
            })
        };
        let (outcome, open) = self
            .store
            .record_guarded_fire(job.name().as_str(), claim, rows, &judge)
            .await?;
        if policy == OverlapPolicy::Cover && matches!(outcome, FireOutcome::Recorded(_)) {
            for exec in open.iter().filter(|e| !same_fire(e)) {
                if let Err(e) = self
                    .cancel(&exec.trace_id, Some("overlapPolicy COVER"))
                    .await
                {
                    tracing::info!(trace_id = %exec.trace_id, error = %e, "covered execution not cancelled");
                }
            }
        }
        Ok(outcome)
    }

    /// Counts a recorded fire; `false` when the overlap policy skipped it (nothing to start).
    pub(super) fn count_fire(
        &self,
        job: &JobDefinition,
        trigger: TriggerType,
        fire_time: DateTime<Utc>,
        recorded: &[Execution],
    ) -> bool {
        let skipped = recorded
            .iter()
            .any(|e| e.status == ExecutionStatus::Skipped);
        if skipped {
            metrics::counter!("scheduler_overlap_skipped_total", "job_name" => job.name().to_string()).increment(1);
            tracing::info!(job_name = %job.name(), trigger = trigger.as_str(), %fire_time, "fire recorded SKIPPED (overlap policy)");
        } else {
            metrics::counter!("scheduler_fires_total", "job_name" => job.name().to_string(), "trigger" => trigger.as_str()).increment(1);
        }
        !skipped
    }

    /// After a SUCCESS of `ended`: when every range of its fire has succeeded, its job's
    /// children are triggered, once.
    pub(super) fn spawn_children(self: &Arc<Self>, job: Arc<JobDefinition>, ended: Execution) {
        let this = self.clone();
        self.tasks.spawn(async move {
            if let Err(e) = this.trigger_children(&job, &ended).await {
                tracing::warn!(job_name = %job.name(), error = %e, "child jobs not triggered");
            }
        });
    }

    async fn trigger_children(
        self: &Arc<Self>,
        job: &Arc<JobDefinition>,
        ended: &Execution,
    ) -> Result<(), StoreError> {
        let parent_fire = fire_key(&ended.execution_id);
        let fire = self
            .store
            .fire_executions(job.name().as_str(), parent_fire)
            .await?;
        // The fire's ranges are those of its first attempts; each must have a SUCCESS.
        let ranges: BTreeSet<(u32, u32)> = fire
            .iter()
            .filter(|e| e.retry_count == 0)
            .map(|e| (e.shard_start, e.shard_end))
            .collect();
        let succeeded: BTreeSet<(u32, u32)> = fire
            .iter()
            .filter(|e| e.status == ExecutionStatus::Success)
            .map(|e| (e.shard_start, e.shard_end))
            .collect();
        if ranges.is_empty() || !ranges.is_subset(&succeeded) {
            return Ok(());
        }
        for child in &job.spec.child_jobs {
            let Some(child) = self.store.get_job(child.as_str()).await? else {
                tracing::warn!(child = %child, "child job does not exist any more");
                continue;
            };
            let child = Arc::new(child);
            // The child's rows of this parent fire, should a racing instance have written
            // them first: they are this trigger, not an overlapping run.
            let this_fire = |e: &Execution| {
                e.trigger_type == TriggerType::Child
                    && e.parent_trace_id
                        .as_deref()
                        .is_some_and(|p| fire.iter().any(|r| r.trace_id == p))
            };
            let executors = self
                .discovery
                .executors(child.spec.service_name.as_str())
                .await;
            let first = self.first_executor(&child, &executors);
            let now = Utc::now();
            let rows: Vec<_> = fire_rows(
                &child,
                now,
                TriggerType::Child,
                &executors,
                first,
                self.instance_id(),
                now,
            )
            .into_iter()
            .map(|mut r| {
                r.execution_id = child_execution_id(
                    child.name().as_str(),
                    parent_fire,
                    r.shard_start,
                    r.shard_end,
                );
                r.parent_trace_id = Some(ended.trace_id.clone());
                r
            })
            .collect();
            match self.record_judged(&child, None, &rows, this_fire).await {
                Ok(FireOutcome::Recorded(recorded)) => {
                    tracing::info!(child = %child.name(), parent_trace_id = %ended.trace_id, "child job triggered");
                    if self.count_fire(&child, TriggerType::Child, now, &recorded) {
                        self.start_rows(&child, recorded, None);
                    }
                }
                Ok(FireOutcome::AlreadyFired) | Err(StoreError::Duplicate(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Records cron fires (claims and rows, one transaction) and starts their calls. Each
    /// fire comes with its backlog place.
    pub(super) async fn record_fires(self: &Arc<Self>, fires: Vec<DueFire>) {
        let now = Utc::now();
        let mut records = Vec::with_capacity(fires.len());
        for (job, fire_time, _) in &fires {
            records.push(self.cron_record(job, *fire_time, now).await);
        }
        match self.store.record_cron_fires(&records).await {
            Ok(outcomes) => {
                for ((job, fire_time, hold), outcome) in fires.into_iter().zip(outcomes) {
                    self.after_cron_record(job, fire_time, hold, outcome);
                }
            }
            Err(e) => {
                tracing::error!(fires = fires.len(), error = %e, "could not record due fires; they follow the misfire policy once the database answers");
                self.missed_fires(&fires);
            }
        }
    }

    /// The claim and rows of `job`'s cron fire at `fire_time`, planned over its live executors.
    async fn cron_record(
        &self,
        job: &JobDefinition,
        fire_time: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> (FireClaim, Vec<NewExecution>) {
        let executors = self
            .discovery
            .executors(job.spec.service_name.as_str())
            .await;
        let first = self.first_executor(job, &executors);
        let claim = FireClaim {
            job_name: job.name().to_string(),
            fire_time,
            scheduler_instance: self.instance_id().to_string(),
        };
        let rows = fire_rows(
            job,
            fire_time,
            TriggerType::Cron,
            &executors,
            first,
            self.instance_id(),
            now,
        );
        (claim, rows)
    }

    /// Starts the calls of a recorded cron fire (at its instant when recorded ahead of it),
    /// unless the overlap policy skipped it or another scheduler had fired it.
    fn after_cron_record(
        self: &Arc<Self>,
        job: Arc<JobDefinition>,
        fire_time: DateTime<Utc>,
        hold: Hold,
        outcome: FireOutcome,
    ) {
        match outcome {
            FireOutcome::Recorded(rows) => {
                if !self.count_fire(&job, TriggerType::Cron, fire_time, &rows) {
                    return;
                }
                if fire_time > Utc::now() {
                    self.start_at_instant(super::ahead::WaitingFire {
                        job,
                        fire_time,
                        rows,
                        hold,
                    });
                } else {
                    self.start_rows(&job, rows, hold);
                }
            }
            FireOutcome::AlreadyFired => {
                metrics::counter!("scheduler_duplicate_dispatch_skipped_total", "job_name" => job.name().to_string()).increment(1);
                tracing::info!(job_name = %job.name(), %fire_time, "fire already dispatched by another scheduler; skipped");
            }
        }
    }

    /// Remembers fires that could not be recorded: the engine applies the misfire policy to
    /// them once the database answers.
    fn missed_fires(&self, fires: &[DueFire]) {
        let mut missed = self.missed.lock().expect("missed lock");
        for (job, fire_time, _) in fires {
            let earliest = missed.entry(job.name().to_string()).or_insert(*fire_time);
            *earliest = (*earliest).min(*fire_time);
        }
    }

    /// Starts an attempt for each freshly recorded row of one fire.
    pub(super) fn start_rows(
        self: &Arc<Self>,
        job: &Arc<JobDefinition>,
        rows: Vec<Execution>,
        hold: Hold,
    ) {
        for exec in rows {
            let lease = Lease {
                since: exec.due_time,
            };
            self.spawn_attempt(job.clone(), exec, lease, hold.clone());
        }
    }
}
