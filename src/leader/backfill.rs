//! Runs backfills (see [`backfill`](crate::jobs::backfill)), on the leader only: every second,
//! for each `RUNNING` backfill, the next instants of its job's schedule (at most its
//! `maxPerSecond`) are planned and recorded together with the backfill's cursor in one
//! transaction, then launched like any other fire (guarded jobs through their admission).
//!
//! An instant is recorded once: the cursor moves only with the rows, and only from where it
//! was read. A leader that dies after the commit leaves PENDING rows held by itself, which
//! compensation dispatches once their lease runs out; one that dies before leaves the cursor
//! where it was, and the next leader records the same instants under the same ids. A backfill
//! whose job was deleted is cancelled.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::discovery::Discovery;
use crate::dispatch::{Dispatcher, Ready};
use crate::engine::ClusterState;
use crate::jobs::backfill::{self, Backfill};
use crate::jobs::{Calendars, backfill_fire_id};
use crate::store::{Store, StoreError};

/// How often backfills record their next instants: `maxPerSecond` is per this tick.
const TICK: Duration = Duration::from_secs(1);

pub struct Backfiller {
    pub clock: Clock,
    pub store: Arc<dyn Store>,
    pub discovery: Arc<dyn Discovery>,
    pub dispatcher: Arc<Dispatcher>,
    pub cluster: Arc<ClusterState>,
    pub calendars: Arc<Calendars>,
}

impl Backfiller {
    pub async fn run(self, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tick.tick() => {}
            }
            if self.cluster.ring().leader() != Some(self.discovery.self_id()) {
                continue;
            }
            if let Err(e) = self.step().await {
                tracing::warn!(error = %e, "backfills not advanced; trying again");
            }
        }
    }

    /// Advances every running backfill by one tick's instants.
    pub async fn step(&self) -> Result<(), StoreError> {
        for b in self.store.running_backfills().await? {
            self.advance(&b).await?;
        }
        Ok(())
    }

    async fn advance(&self, b: &Backfill) -> Result<(), StoreError> {
        let now = self.clock.now();
        let Some(job) = self.store.get_job(&b.job_name).await?.map(Arc::new) else {
            tracing::info!(job_name = %b.job_name, backfill_id = %b.backfill_id, "job deleted; backfill cancelled");
            self.store
                .cancel_backfill(&b.job_name, &b.backfill_id, now)
                .await?;
            return Ok(());
        };
        let Some(next) = b.next else {
            return Ok(());
        };
        let schedule = job.spec.schedule(&self.calendars);
        let (instants, after) = backfill::batch(&schedule, next, b.to, b.max_per_second);
        let executors = self.dispatcher.planner().executors(&job).await;
        let mut rows = Vec::new();
        for instant in &instants {
            let fire_id = backfill_fire_id(&b.backfill_id, *instant);
            rows.extend(
                self.dispatcher
                    .planner()
                    .plan_backfill(&job, *instant, &fire_id, &executors, now),
            );
        }
        let Some(recorded) = self
            .store
            .record_backfill(b, after, instants.len() as u32, &rows, now)
            .await?
        else {
            // Cancelled, or advanced by a leader before this one: nothing was written.
            return Ok(());
        };
        metrics::counter!("scheduler_fires_total", "job_name" => b.job_name.clone(), "trigger" => "BACKFILL")
            .increment(instants.len() as u64);
        tracing::info!(job_name = %b.job_name, backfill_id = %b.backfill_id, instants = instants.len(), done = b.done + instants.len() as u32, fires = b.fires, "backfill instants recorded");
        let mut by_fire: Vec<Ready> = Vec::with_capacity(instants.len());
        for instant in instants {
            let rows: Vec<_> = recorded
                .iter()
                .filter(|r| r.fire_time == instant)
                .cloned()
                .collect();
            by_fire.push(Ready {
                job: job.clone(),
                rows,
                hold: None,
                claimed: None,
            });
        }
        self.dispatcher.launcher().launch(by_fire).await;
        Ok(())
    }
}
