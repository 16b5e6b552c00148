//! `[compensation]`: the leases of PENDING rows and how often the leader looks for work
//! that lost its scheduler or outlived its timeout.

use std::num::NonZeroU64;

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid, nonzero};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompensationSettings {
    /// Overdue RUNNING rows (past their job's timeout) are looked at this often.
    pub interval_seconds: NonZeroU64,
    /// An executor that cannot tell whether it still runs an execution is waited for this
    /// long before the execution is marked TIMEOUT and retried.
    pub stuck_after_seconds: NonZeroU64,
    /// The lease: a PENDING row stays its dispatcher's this long past its due time; after it,
    /// compensation dispatches the row.
    pub pending_grace_seconds: u64,
    /// Lease-expired PENDING rows and RUNNING rows of departed schedulers are looked at this
    /// often.
    pub recovery_interval_millis: u64,
}

impl Default for CompensationSettings {
    fn default() -> Self {
        Self {
            interval_seconds: nonzero(60),
            stuck_after_seconds: nonzero(600),
            pending_grace_seconds: 10,
            recovery_interval_millis: 1000,
        }
    }
}

impl CompensationSettings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.pending_grace_seconds < 2 {
            return Err(invalid(
                "compensation.pending_grace_seconds",
                "must be at least 2",
            ));
        }
        if self.recovery_interval_millis < 100 {
            return Err(invalid(
                "compensation.recovery_interval_millis",
                "must be at least 100",
            ));
        }
        Ok(())
    }
}
