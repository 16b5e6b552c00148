//! History retention (SPEC §13 `[retention]`): executions older than `execution_days`, and
//! those of a job beyond its newest `max_executions_per_job`, are deleted by the compensation
//! leader (the first instance of the sorted list, so one instance purges at a time), in
//! chunks of `chunk_size` rows along an index so no statement holds many locks or much undo.
//!
//! Only final executions are deleted: a PENDING or RUNNING row, however old, is left for
//! compensation to settle. Rows of deleted jobs age out by `execution_days`; the per-job cap
//! walks the jobs that exist.
//!
//! Metric: `retention_purged_executions_total{reason}` with `reason` = `age` | `per_job_cap`.

use std::num::{NonZeroU32, NonZeroU64};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::config::ConfigError;
use crate::discovery::Discovery;
use crate::engine::ClusterState;
use crate::store::{Store, StoreError};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionSettings {
    /// Executions triggered more than this many days ago are deleted; 0 keeps them forever.
    pub execution_days: u32,
    /// At most this many executions are kept per job (the newest); 0 means no cap.
    pub max_executions_per_job: u32,
    /// How often the leader purges.
    pub interval_seconds: NonZeroU64,
    /// Rows per DELETE statement.
    pub chunk_size: NonZeroU32,
}

impl Default for RetentionSettings {
    fn default() -> Self {
        Self {
            execution_days: 30,
            max_executions_per_job: 0,
            interval_seconds: NonZeroU64::new(600).expect("non-zero"),
            chunk_size: NonZeroU32::new(1000).expect("non-zero"),
        }
    }
}

/// A week of a thousand executions per second is 600 million rows: a longer window is a
/// typo, and its cutoff could leave the range of a timestamp.
const MAX_DAYS: u32 = 36_500;
const MAX_CHUNK: u32 = 100_000;

impl RetentionSettings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.execution_days > MAX_DAYS {
            return Err(ConfigError::Invalid {
                key: "retention.execution_days".into(),
                message: format!("must be at most {MAX_DAYS} (0 keeps executions forever)"),
            });
        }
        if self.chunk_size.get() > MAX_CHUNK {
            return Err(ConfigError::Invalid {
                key: "retention.chunk_size".into(),
                message: format!("must be between 1 and {MAX_CHUNK}"),
            });
        }
        Ok(())
    }
}

/// What one retention pass deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Purged {
    pub by_age: u64,
    pub by_cap: u64,
}

pub struct Retention {
    settings: RetentionSettings,
    store: Arc<dyn Store>,
    discovery: Arc<dyn Discovery>,
    cluster: Arc<ClusterState>,
}

impl Retention {
    pub fn new(
        settings: RetentionSettings,
        store: Arc<dyn Store>,
        discovery: Arc<dyn Discovery>,
        cluster: Arc<ClusterState>,
    ) -> Self {
        Self {
            settings,
            store,
            discovery,
            cluster,
        }
    }

    /// Purges every `interval_seconds` while this instance is the compensation leader.
    pub async fn run(self, cancel: CancellationToken) {
        if self.settings.execution_days == 0 && self.settings.max_executions_per_job == 0 {
            return;
        }
        let interval = Duration::from_secs(self.settings.interval_seconds.get());
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(interval) => {}
            }
            if self.cluster.ring().leader() != Some(self.discovery.self_id()) {
                continue;
            }
            // A long purge stops at shutdown between statements: each chunk commits alone.
            let result = tokio::select! {
                _ = cancel.cancelled() => break,
                r = self.pass() => r,
            };
            match result {
                Ok(p) if p != Purged::default() => {
                    tracing::info!(
                        by_age = p.by_age,
                        by_cap = p.by_cap,
                        "old executions purged"
                    )
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "purging old executions failed"),
            }
        }
    }

    /// One pass: the age window, then the per-job cap.
    pub async fn pass(&self) -> Result<Purged, StoreError> {
        let chunk = self.settings.chunk_size.get();
        let mut purged = Purged::default();
        if self.settings.execution_days > 0 {
            let cutoff = Utc::now() - chrono::Duration::days(self.settings.execution_days.into());
            purged.by_age = self.store.purge_executions_before(cutoff, chunk).await?;
            metrics::counter!("retention_purged_executions_total", "reason" => "age")
                .increment(purged.by_age);
        }
        let keep = self.settings.max_executions_per_job;
        if keep > 0 {
            for job in self.store.job_names().await? {
                let n = self.store.cap_job_executions(&job, keep, chunk).await?;
                metrics::counter!("retention_purged_executions_total", "reason" => "per_job_cap")
                    .increment(n);
                purged.by_cap += n;
            }
        }
        Ok(purged)
    }
}
