//! `[alerts]` configuration (docs/production.md, "Alerts"): the channels alerts can go to, the
//! channels of jobs that name none, and the throttle interval.

use serde::{Deserialize, Serialize};

use super::{ConfigError, Secret};
use crate::jobs::ChannelName;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlertsSettings {
    /// Channels for jobs whose `alertChannels` is empty.
    pub default_channels: Vec<String>,
    /// Per job and event: a repeated alert within this many seconds is counted, not sent.
    pub min_interval_seconds: u64,
    /// Alerts waiting for delivery; beyond this they are dropped (and counted), so a slow
    /// endpoint never holds up scheduling.
    pub queue_capacity: usize,
    /// How long one delivery may take before it counts as failed.
    pub timeout_seconds: u64,
    pub channels: Vec<ChannelSettings>,
}

impl Default for AlertsSettings {
    fn default() -> Self {
        Self {
            default_channels: Vec::new(),
            min_interval_seconds: 300,
            queue_capacity: 1024,
            timeout_seconds: 10,
            channels: Vec::new(),
        }
    }
}

/// Which vendor format a channel speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelKind {
    /// JSON body of docs/production.md, "Alerts", HMAC-signed with `secret`.
    Webhook,
    /// DingTalk custom robot; `secret` is its "加签" signing secret.
    Dingtalk,
    /// WeCom (企业微信) group robot.
    Wecom,
    /// Feishu/Lark custom bot; `secret` is its signature-verification secret.
    Feishu,
    /// Slack incoming webhook.
    Slack,
}

impl ChannelKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Webhook => "webhook",
            Self::Dingtalk => "dingtalk",
            Self::Wecom => "wecom",
            Self::Feishu => "feishu",
            Self::Slack => "slack",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelSettings {
    pub name: String,
    pub kind: ChannelKind,
    /// The endpoint (`http://` or `https://`); vendor robots carry their token in it.
    pub url: Secret,
    /// Webhook HMAC key, DingTalk or Feishu signing secret.
    pub secret: Option<Secret>,
}

impl AlertsSettings {
    /// The names of the configured channels.
    pub fn channel_names(&self) -> Vec<&str> {
        self.channels.iter().map(|c| c.name.as_str()).collect()
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, message: String| ConfigError::Invalid {
            key: key.into(),
            message,
        };
        let mut names = std::collections::HashSet::new();
        for (i, c) in self.channels.iter().enumerate() {
            ChannelName::parse(&c.name)
                .map_err(|m| invalid("alerts.channels", format!("channel #{i}: name {m}")))?;
            if !names.insert(c.name.as_str()) {
                return Err(invalid(
                    "alerts.channels",
                    format!("channel `{}` is configured twice", c.name),
                ));
            }
            let url = reqwest::Url::parse(c.url.expose()).map_err(|e| {
                invalid(
                    "alerts.channels",
                    format!("channel `{}`: url is not a URL ({e})", c.name),
                )
            })?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(invalid(
                    "alerts.channels",
                    format!("channel `{}`: url must be http:// or https://", c.name),
                ));
            }
            if c.secret.as_ref().is_some_and(|s| s.expose().is_empty()) {
                return Err(invalid(
                    "alerts.channels",
                    format!("channel `{}`: secret must not be empty", c.name),
                ));
            }
        }
        for d in &self.default_channels {
            if !names.contains(d.as_str()) {
                return Err(invalid(
                    "alerts.default_channels",
                    format!("`{d}` is not a configured channel"),
                ));
            }
        }
        if self.queue_capacity == 0 {
            return Err(invalid(
                "alerts.queue_capacity",
                "must be at least 1".into(),
            ));
        }
        if self.timeout_seconds == 0 {
            return Err(invalid(
                "alerts.timeout_seconds",
                "must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(name: &str, url: &str) -> ChannelSettings {
        ChannelSettings {
            name: name.into(),
            kind: ChannelKind::Webhook,
            url: Secret::new(url),
            secret: None,
        }
    }

    fn key_of(s: &AlertsSettings) -> String {
        match s.validate() {
            Err(ConfigError::Invalid { key, .. }) => key,
            other => panic!("expected an invalid key, got {other:?}"),
        }
    }

    #[test]
    fn the_spec_example_parses_with_its_defaults() {
        let toml = r#"
            default_channels = ["ops"]
            [[channels]]
            name = "ops"
            kind = "dingtalk"
            url = "https://oapi.dingtalk.com/robot/send?access_token=x"
            secret = "SEC123"
        "#;
        let s: AlertsSettings = toml::from_str(toml).unwrap();
        s.validate().unwrap();
        assert_eq!(s.min_interval_seconds, 300);
        assert_eq!(s.channels[0].kind, ChannelKind::Dingtalk);
        assert_eq!(s.channel_names(), ["ops"]);
        assert!(
            toml::from_str::<AlertsSettings>(
                "[[channels]]\nname = \"a\"\nkind = \"sms\"\nurl = \"http://x\""
            )
            .is_err()
        );
    }

    #[test]
    fn bad_settings_name_the_key() {
        let mut s = AlertsSettings {
            channels: vec![channel("ops", "ftp://x/")],
            ..Default::default()
        };
        assert_eq!(key_of(&s), "alerts.channels");
        s.channels = vec![channel("ops", "http://x/"), channel("ops", "http://y/")];
        assert_eq!(key_of(&s), "alerts.channels");
        s.channels = vec![channel("bad name", "http://x/")];
        assert_eq!(key_of(&s), "alerts.channels");
        s.channels = vec![channel("ops", "http://x/")];
        s.default_channels = vec!["pager".into()];
        assert_eq!(key_of(&s), "alerts.default_channels");
        s.default_channels = vec!["ops".into()];
        s.validate().unwrap();
        s.queue_capacity = 0;
        assert_eq!(key_of(&s), "alerts.queue_capacity");
    }
}
