//! `[log]`: the format and the default filter of the process's log, and where operators find
//! an execution's logs beyond what its handler shipped.

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
    /// A URL template of the log system the services ship to (Loki, Kibana, …), where
    /// `{traceId}` becomes an execution's trace id: each execution's log links there.
    pub execution_link: Option<String>,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            level: "info".into(),
            execution_link: None,
        }
    }
}

impl LogSettings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        tracing_subscriber::EnvFilter::try_new(&self.level)
            .map_err(|e| invalid("log.level", e.to_string()))?;
        if let Some(link) = &self.execution_link
            && !(link.is_ascii()
                && (link.starts_with("https://") || link.starts_with("http://"))
                && link.contains("{traceId}")
                && !link.contains(['<', '>', '"', ' ']))
        {
            return Err(invalid(
                "log.execution_link",
                "must be an http(s) URL containing {traceId}",
            ));
        }
        Ok(())
    }

    /// Where the log of the execution `trace_id` is found beyond what its handler shipped.
    pub fn execution_link(&self, trace_id: &str) -> Option<String> {
        let encoded: String = trace_id
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        self.execution_link
            .as_ref()
            .map(|t| t.replace("{traceId}", &encoded))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_execution_link_names_the_trace_and_must_be_a_url_with_it() {
        let mut log = LogSettings {
            execution_link: Some("https://logs.example/explore?q=trace_id%3D{traceId}".into()),
            ..LogSettings::default()
        };
        log.validate().unwrap();
        assert_eq!(
            log.execution_link("4bf9 2f").as_deref(),
            Some("https://logs.example/explore?q=trace_id%3D4bf9%202f")
        );
        for bad in [
            "https://logs.example/",
            "ftp://x/{traceId}",
            "https://x/<{traceId}>",
        ] {
            log.execution_link = Some(bad.into());
            assert!(log.validate().is_err(), "{bad}");
        }
        assert_eq!(LogSettings::default().execution_link("t"), None);
    }
}
