//! `[log]`: the format and the default filter of the process's log.

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSettings {
    pub format: LogFormat,
    /// Default filter; RUST_LOG wins when set.
    pub level: String,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            level: "info".into(),
        }
    }
}

impl LogSettings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        tracing_subscriber::EnvFilter::try_new(&self.level)
            .map_err(|e| invalid("log.level", e.to_string()))?;
        Ok(())
    }
}
