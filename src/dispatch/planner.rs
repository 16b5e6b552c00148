//! Planning a fire's rows: the live executors of the job's service, which executor each range
//! goes to (stable placement for a sharded job, the routing strategy for an unsharded one),
//! and one PENDING row per range ([`rows::fire_rows`]).
//! Everything that records a fire plans it here: cron fires, manual triggers, child jobs.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::admission::Admission;
use super::plan::{self, RoundRobin};
use super::rows;
use crate::backoff::Backoff;
use crate::discovery::{Discovery, ExecutorInstance, Executors, Service};
use crate::jobs::{ExecutionStatus, JobDefinition, NewExecution, RouteStrategy, TriggerType};

pub struct Planner {
    pub discovery: Arc<dyn Discovery>,
    admission: Arc<Admission>,
    round_robin: RoundRobin,
    /// Delays of retries (the one a fire with no executor earns is planned with it).
    pub backoff: Backoff,
}

impl Planner {
    pub fn new(discovery: Arc<dyn Discovery>, admission: Arc<Admission>, backoff: Backoff) -> Self {
        Self {
            discovery,
            admission,
            round_robin: RoundRobin::default(),
            backoff,
        }
    }

    /// This instance's id: the holder its rows name.
    pub fn me(&self) -> &str {
        self.discovery.self_id()
    }

    /// The live executors of `job`'s service, sorted.
    pub async fn executors(&self, job: &JobDefinition) -> Executors {
        let service = Service {
            name: job.spec.service_name.as_str(),
            group: job.spec.service_group.as_deref(),
        };
        self.discovery.executors(service).await
    }

    /// The rows of `job`'s fire at `fire_time` by `trigger`, planned at `now` over the live
    /// executors (or over `only`, when the caller chose them). With no executor at all, the
    /// fire is one FAILED row, and the retry it earns under the job's policy follows it: both
    /// are recorded together, so the retry is never only in memory.
    pub async fn plan(
        &self,
        job: &JobDefinition,
        fire_time: DateTime<Utc>,
        trigger: TriggerType,
        now: DateTime<Utc>,
        only: Option<Vec<ExecutorInstance>>,
    ) -> Vec<NewExecution> {
        let executors = match only {
            Some(chosen) => chosen.into(),
            None => self.executors(job).await,
        };
        self.plan_on(job, fire_time, trigger, None, &executors, now)
    }

    /// The rows of `job`'s fire at `fire_time` named by `fire_id` (a child's, derived from
    /// its parent fire), over the live executors.
    pub async fn plan_named(
        &self,
        job: &JobDefinition,
        fire_time: DateTime<Utc>,
        trigger: TriggerType,
        fire_id: &str,
        now: DateTime<Utc>,
    ) -> Vec<NewExecution> {
        let executors = self.executors(job).await;
        self.plan_on(job, fire_time, trigger, Some(fire_id), &executors, now)
    }

    /// The rows of backfill instant `instant` of `job`, named by `fire_id` (see
    /// [`backfill_fire_id`](crate::jobs::backfill_fire_id)), over `executors`.
    pub fn plan_backfill(
        &self,
        job: &JobDefinition,
        instant: DateTime<Utc>,
        fire_id: &str,
        executors: &[ExecutorInstance],
        now: DateTime<Utc>,
    ) -> Vec<NewExecution> {
        self.plan_on(
            job,
            instant,
            TriggerType::Backfill,
            Some(fire_id),
            executors,
            now,
        )
    }

    fn plan_on(
        &self,
        job: &JobDefinition,
        fire_time: DateTime<Utc>,
        trigger: TriggerType,
        fire_id: Option<&str>,
        executors: &[ExecutorInstance],
        now: DateTime<Utc>,
    ) -> Vec<NewExecution> {
        let first = self.first_executor(job, executors);
        let mut planned = rows::fire_rows(
            job,
            fire_time,
            trigger,
            fire_id,
            executors,
            first,
            self.me(),
            now,
        );
        if job.spec.max_retry > 0
            && let Some(failed) = planned.iter().find(|r| r.status == ExecutionStatus::Failed)
        {
            let due = now + chrono::Duration::from_std(self.backoff.delay(1)).unwrap_or_default();
            let failed = failed.clone().recorded(0);
            planned.push(rows::retry_row(
                &failed,
                self.me(),
                now,
                due,
                TriggerType::Retry,
            ));
        }
        planned
    }

    /// Where the range → executor mapping starts: the sorted list's first executor for a
    /// sharded job (range `i` on executor `i`, on every fire while the list is unchanged);
    /// where the job's routing strategy says for an unsharded one.
    fn first_executor(&self, job: &JobDefinition, executors: &[ExecutorInstance]) -> usize {
        if job.spec.shard_count > 1 {
            return 0;
        }
        let addrs: Vec<&str> = executors.iter().map(|e| e.addr.as_str()).collect();
        // Only LEAST_BUSY reads the in-flight counts: the others skip the lock.
        let in_flight = match job.spec.route_strategy {
            RouteStrategy::LeastBusy => self.admission.busy(executors),
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
}
