//! `[executor]` and `[executors]`: how executors are called (path prefix, signing, the
//! bounds on calls in flight and fires in the backlog) and, in standalone mode, where they
//! are.

use std::collections::BTreeMap;
use std::num::{NonZeroU32, NonZeroUsize};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Secret, invalid};
use crate::jobs::InstanceAddr;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecutorSettings {
    pub path_prefix: String,
    pub signing_secret: Option<Secret>,
    pub signing_secret_file: Option<PathBuf>,
    pub max_in_flight: NonZeroUsize,
    /// Fires between their hand-off (their claim, up to `scheduler.claim_ahead_millis` ahead)
    /// and their last result. Fires beyond it wait in the schedule, under the misfire policy.
    pub max_backlog: NonZeroUsize,
}

impl Default for ExecutorSettings {
    fn default() -> Self {
        Self {
            path_prefix: "/internal/job".into(),
            signing_secret: None,
            signing_secret_file: None,
            max_in_flight: NonZeroUsize::new(256).expect("positive"),
            max_backlog: NonZeroUsize::new(16_384).expect("positive"),
        }
    }
}

impl ExecutorSettings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self
            .signing_secret
            .as_ref()
            .is_some_and(|s| s.expose().is_empty())
        {
            return Err(invalid(
                "executor.signing_secret",
                "is empty; leave it unset to send unsigned calls",
            ));
        }
        if self.max_backlog < self.max_in_flight {
            return Err(invalid(
                "executor.max_backlog",
                "must be at least executor.max_in_flight",
            ));
        }
        if !self.path_prefix.is_empty()
            && (!self.path_prefix.starts_with('/') || self.path_prefix.ends_with('/'))
        {
            return Err(invalid(
                "executor.path_prefix",
                "must start with '/' and not end with '/'",
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecutorsSettings {
    /// Executor addresses per service name, used in standalone mode; parsed once, here.
    #[serde(rename = "static")]
    pub static_: BTreeMap<String, Vec<InstanceAddr>>,
    /// The most calls in flight to a service from the whole cluster, per service name; each
    /// scheduler instance takes an equal share, rounded up. Calls beyond it wait.
    pub limits: BTreeMap<String, NonZeroU32>,
}
