//! Alerts (SPEC §13): an execution's final failure, a fire skipped by the misfire policy, a
//! fire with no executor, and the recovery after an alert, sent to webhook, DingTalk, WeCom,
//! Feishu or Slack channels.

mod config;

pub use config::{AlertsSettings, ChannelKind, ChannelSettings};
