//! `[retention]`: how long executions and the audit trail are kept; the purge is
//! `leader::retention`.

use std::num::{NonZeroU32, NonZeroU64};

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionSettings {
    /// Executions triggered more than this many days ago are deleted; 0 keeps them forever.
    pub execution_days: u32,
    /// At most this many executions are kept per job (the newest); 0 means no cap.
    pub max_executions_per_job: u32,
    /// Audit entries older than this many days are deleted; 0 keeps them forever.
    pub audit_days: u32,
    /// How often the leader purges.
    pub interval_seconds: NonZeroU64,
    /// Rows per DELETE statement.
    pub chunk_size: NonZeroU32,
    /// After each chunk the purge rests this many times as long as the chunk took, so it
    /// holds the database at most 1 / (1 + factor) of the time and slows down by itself when
    /// the database is busy; 0 purges back to back.
    pub pause_factor: u32,
}

impl Default for RetentionSettings {
    fn default() -> Self {
        Self {
            execution_days: 30,
            max_executions_per_job: 0,
            audit_days: 365,
            interval_seconds: NonZeroU64::new(600).expect("non-zero"),
            chunk_size: NonZeroU32::new(1000).expect("non-zero"),
            pause_factor: 8,
        }
    }
}

/// A week of a thousand executions per second is 600 million rows: a longer window is a
/// typo, and its cutoff could leave the range of a timestamp.
const MAX_DAYS: u32 = 36_500;
const MAX_CHUNK: u32 = 100_000;
/// A rest a hundred times the work purges too slowly to keep up with any real load.
const MAX_PAUSE_FACTOR: u32 = 100;

impl RetentionSettings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.execution_days > MAX_DAYS {
            return Err(invalid(
                "retention.execution_days",
                format!("must be at most {MAX_DAYS} (0 keeps executions forever)"),
            ));
        }
        if self.audit_days > MAX_DAYS {
            return Err(invalid(
                "retention.audit_days",
                format!("must be at most {MAX_DAYS} (0 keeps the audit trail forever)"),
            ));
        }
        if self.chunk_size.get() > MAX_CHUNK {
            return Err(invalid(
                "retention.chunk_size",
                format!("must be between 1 and {MAX_CHUNK}"),
            ));
        }
        if self.pause_factor > MAX_PAUSE_FACTOR {
            return Err(invalid(
                "retention.pause_factor",
                format!("must be at most {MAX_PAUSE_FACTOR} (0 purges back to back)"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_limits_name_their_key() {
        assert!(RetentionSettings::default().validate().is_ok());
        let too_slow = RetentionSettings {
            pause_factor: MAX_PAUSE_FACTOR + 1,
            ..RetentionSettings::default()
        };
        assert_eq!(
            too_slow.validate().unwrap_err().key(),
            "retention.pause_factor"
        );
    }
}
