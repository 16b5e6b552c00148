//! History retention (`[retention]`): executions older than `execution_days`, and
//! those of a job beyond its newest `max_executions_per_job`, are deleted by the compensation
//! leader (the first instance of the sorted list, so one instance purges at a time), in
//! chunks of `chunk_size` rows along an index so no statement holds many locks or much undo,
//! resting `pause_factor` times as long as each chunk took before the next one. Without the
//! rest, a backlog of millions of rows purged back to back took a full core of the database
//! and raised the delay of the executions running meanwhile tenfold; with the default rest
//! of 8 a 10-million-row backlog was purged in 68 minutes (2,467 rows/s) beside 1,000
//! executions/s, their p99 0.97× that without the purge (docs/benchmarks.md, "Retention").
//!
//! Only final executions are deleted: a PENDING or RUNNING row, however old, is left for
//! compensation to settle. Rows of deleted jobs age out by `execution_days`; the per-job cap
//! walks the jobs that exist.
//!
//! Metric: `retention_purged_executions_total{reason}` with `reason` = `age` | `per_job_cap`,
//! counted as each chunk is deleted.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::RetentionSettings;
use crate::discovery::Discovery;
use crate::engine::ClusterState;
use crate::store::{PurgePace, Store, StoreError};

/// What one retention pass deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Purged {
    pub by_age: u64,
    pub by_cap: u64,
    /// Audit entries past `retention.audit_days`.
    pub audit: u64,
}

pub struct Retention {
    clock: Clock,
    settings: RetentionSettings,
    store: Arc<dyn Store>,
    discovery: Arc<dyn Discovery>,
    cluster: Arc<ClusterState>,
}

impl Retention {
    pub fn new(
        clock: Clock,
        settings: RetentionSettings,
        store: Arc<dyn Store>,
        discovery: Arc<dyn Discovery>,
        cluster: Arc<ClusterState>,
    ) -> Self {
        Self {
            clock,
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
                        audit = p.audit,
                        "old executions and audit entries purged"
                    )
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "purging old executions failed"),
            }
        }
    }

    /// One pass: the age window, the audit trail's window, then the per-job cap.
    pub async fn pass(&self) -> Result<Purged, StoreError> {
        let pace = |reason: &'static str| PurgePace {
            chunk: self.settings.chunk_size.get(),
            pause_factor: self.settings.pause_factor,
            purged: metrics::counter!("retention_purged_executions_total", "reason" => reason),
        };
        let mut purged = Purged::default();
        if self.settings.execution_days > 0 {
            let cutoff =
                self.clock.now() - chrono::Duration::days(self.settings.execution_days.into());
            purged.by_age = self
                .store
                .purge_executions_before(cutoff, pace("age"))
                .await?;
        }
        if self.settings.audit_days > 0 {
            let cutoff = self.clock.now() - chrono::Duration::days(self.settings.audit_days.into());
            purged.audit = self
                .store
                .purge_audit_before(cutoff, self.settings.chunk_size.get())
                .await?;
        }
        let keep = self.settings.max_executions_per_job;
        if keep > 0 {
            let pace = pace("per_job_cap");
            for job in self.store.job_names().await? {
                purged.by_cap += self
                    .store
                    .cap_job_executions(&job, keep, pace.clone())
                    .await?;
            }
        }
        Ok(purged)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_purge_rests_by_default_and_the_rest_is_bounded() {
        let s = RetentionSettings::default();
        assert_eq!(s.pause_factor, 8);
        let pace = PurgePace {
            chunk: s.chunk_size.get(),
            pause_factor: s.pause_factor,
            purged: metrics::Counter::noop(),
        };
        assert_eq!(
            pace.pause_after(Duration::from_millis(30)),
            Duration::from_millis(240)
        );
        assert_eq!(
            PurgePace::unpaused(10).pause_after(Duration::from_secs(1)),
            Duration::ZERO
        );
    }
}
