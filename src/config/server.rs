//! `[server]`: where the API listens and how long a stopping instance lets calls finish.

use std::num::NonZeroU64;

use serde::{Deserialize, Serialize};

use super::nonzero;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    pub host: String,
    /// 0 picks a free port (tests).
    pub port: u16,
    pub request_timeout_seconds: NonZeroU64,
    /// On shutdown, how long in-flight executor calls may still finish.
    pub shutdown_grace_seconds: u64,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            host: "0.0.0.0".into(),
            port: 8080,
            request_timeout_seconds: nonzero(30),
            shutdown_grace_seconds: 30,
        }
    }
}
