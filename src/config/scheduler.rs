//! `[scheduler]`: ownership, time zones, misfires, claims written ahead and retry delays.

use std::num::NonZeroU64;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid, nonzero};
use crate::backoff::Backoff;
use crate::jobs::TimeZoneName;

/// A longer window holds more fires in memory and in PENDING rows for no gain in precision.
const MAX_CLAIM_AHEAD_MILLIS: u64 = 60_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OwnershipStrategy {
    #[default]
    JavaHash,
    Rendezvous,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerSettings {
    /// Time zone of jobs created without one.
    pub timezone: TimeZoneName,
    pub ownership: OwnershipStrategy,
    pub misfire_threshold_seconds: u64,
    /// A fire at most this late is on time, whatever the misfire policy.
    pub misfire_tolerance_millis: u64,
    pub job_refresh_millis: NonZeroU64,
    /// How far ahead of their instant due fires are claimed and their rows written, so the
    /// calls go out at the instant with no database round trip; 0 claims at the instant. The
    /// default, a second and a half, puts the writes for whole-second instants between
    /// instants, not on the burst of calls of an earlier one.
    pub claim_ahead_millis: u64,
    /// First retry delay; doubled per retry, with jitter, up to the maximum.
    pub retry_backoff_millis: NonZeroU64,
    pub retry_backoff_max_millis: NonZeroU64,
    /// How long the database may go without answering this instance's job refresh before it
    /// leaves the scheduler list, so the others take its jobs (engine/standing.rs); 0 never.
    pub step_aside_after_millis: u64,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        Self {
            timezone: TimeZoneName::UTC,
            ownership: OwnershipStrategy::JavaHash,
            misfire_threshold_seconds: 600,
            misfire_tolerance_millis: 5000,
            job_refresh_millis: nonzero(1000),
            claim_ahead_millis: 1500,
            retry_backoff_millis: nonzero(1000),
            retry_backoff_max_millis: nonzero(60_000),
            step_aside_after_millis: 3000,
        }
    }
}

impl SchedulerSettings {
    /// The delays of automatic retries: doubling from `retry_backoff_millis` up to
    /// `retry_backoff_max_millis`, with jitter.
    pub fn retry_backoff(&self) -> Backoff {
        Backoff::jittered(
            Duration::from_millis(self.retry_backoff_millis.get()),
            Duration::from_millis(self.retry_backoff_max_millis.get()),
        )
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.retry_backoff_max_millis < self.retry_backoff_millis {
            return Err(invalid(
                "scheduler.retry_backoff_max_millis",
                "must be at least scheduler.retry_backoff_millis",
            ));
        }
        if self.misfire_tolerance_millis > self.misfire_threshold_seconds.saturating_mul(1000) {
            return Err(invalid(
                "scheduler.misfire_tolerance_millis",
                "must not exceed scheduler.misfire_threshold_seconds",
            ));
        }
        if self.claim_ahead_millis > MAX_CLAIM_AHEAD_MILLIS {
            return Err(invalid(
                "scheduler.claim_ahead_millis",
                format!("must be at most {MAX_CLAIM_AHEAD_MILLIS} (0 claims at the instant)"),
            ));
        }
        Ok(())
    }
}
