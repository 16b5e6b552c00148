//! Recording cron fires, ahead of their instant: each fire's claim (`job_fire`, the guard that
//! makes the fire exactly-once across schedulers) and one PENDING row per shard range, planned
//! over the live executors. Fires are recorded in batches of up to [`FIRE_BATCH`], one
//! transaction each, batches in parallel on their own connections; every overlap policy goes
//! this way (a guarded fire is judged at its instant, by the launcher).
//!
//! A fire enters the waiting room when it is handed out, before its rows are written, so an
//! edit that lands while it is being recorded withdraws it all the same. A fire another
//! scheduler claimed first is dropped (counted in `scheduler_duplicate_dispatch_skipped_total`);
//! a fire the database could not take is owed back to the engine, which applies the misfire
//! rules to it once the database answers. A `FIXED_DELAY` fire is claimed only once the job's
//! latest fire has ended its interval before (the store checks it under the job's row lock);
//! refused, it goes back to the engine, which waits for that latest fire.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::admission::Hold;
use super::planner::Planner;
use super::series;
use super::waiting::WaitingRoom;
use super::withdraw::Owed;
use super::withdraw::Withdraw;
use crate::clock::Clock;
use crate::jobs::{JobDefinition, Timing, TriggerType};
use crate::store::{FireClaim, FireOutcome, FireRecord, FireStore};

/// At most this many fires share one database transaction; larger bursts are split into
/// concurrent transactions.
pub const FIRE_BATCH: usize = 50;

/// A due cron fire handed out by the engine, with its place in the backlog.
pub struct Fire {
    pub job: Arc<JobDefinition>,
    pub at: DateTime<Utc>,
    pub hold: Hold,
}

pub struct Recorder {
    pub clock: Clock,
    pub fires: Arc<dyn FireStore>,
    pub planner: Arc<Planner>,
    pub waiting: Arc<WaitingRoom>,
    pub withdraw: Arc<Withdraw>,
}

impl Recorder {
    /// Records fires already in the waiting room (one transaction): recorded ones wait there
    /// for their instant.
    pub async fn record(&self, fires: Vec<(Arc<JobDefinition>, DateTime<Utc>)>) {
        let now = self.clock.now();
        let me = self.planner.me().to_string();
        let mut records = Vec::with_capacity(fires.len());
        for (job, at) in &fires {
            records.push(FireRecord {
                claim: Some(FireClaim {
                    job_name: job.name().to_string(),
                    fire_time: *at,
                    scheduler_instance: me.clone(),
                    claimed_at: now,
                    fixed_delay: match job.spec.timing {
                        Timing::FixedDelay { interval, .. } => Some(interval),
                        _ => None,
                    },
                }),
                rows: self
                    .planner
                    .plan(job, *at, TriggerType::Cron, now, None)
                    .await,
            });
        }
        let outcomes = match self.fires.record_fires(&records).await {
            Ok(outcomes) => outcomes,
            Err(e) => {
                tracing::error!(fires = fires.len(), error = %e, "could not record due fires; they follow the misfire policy once the database answers");
                for (job, at) in fires {
                    let job = job.name().to_string();
                    self.waiting.forget(&job, at);
                    let _ = self.withdraw.owed.send(Owed::again(job, at));
                }
                return;
            }
        };
        for ((job, at), outcome) in fires.into_iter().zip(outcomes) {
            let name = job.name().as_str();
            match outcome {
                FireOutcome::Recorded(rows) => {
                    series::cron_fire_recorded(name);
                    if let Err(back) = self.waiting.recorded(name, at, rows) {
                        // Withdrawn while it was being recorded.
                        let rows = back.rows.unwrap_or_default();
                        self.withdraw.take_back(name, vec![(at, rows)]);
                    }
                }
                FireOutcome::AlreadyFired => {
                    self.waiting.forget(name, at);
                    metrics::counter!("scheduler_duplicate_dispatch_skipped_total", "job_name" => name.to_string()).increment(1);
                    tracing::info!(job_name = %name, fire_time = %at, "fire already dispatched by another scheduler; skipped");
                }
                FireOutcome::Behind(latest) => {
                    self.waiting.forget(name, at);
                    tracing::info!(job_name = %name, fire_time = %at, latest = %latest, "fixed-delay fire not recorded: the job's latest fire has not ended long enough ago; waiting for it");
                    let _ = self.withdraw.owed.send(Owed {
                        behind: Some(latest),
                        ..Owed::again(name, at)
                    });
                }
            }
        }
    }
}
