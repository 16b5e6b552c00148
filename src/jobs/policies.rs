//! How a job runs in production (docs/production.md): which executor a fire goes to, what happens
//! when a fire meets a still-running one, which jobs follow a successful fire, and where alerts go.

use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{JobName, Namespace};

/// Which executor instance an unsharded job's fire is sent to first. A sharded job's range
/// `i` always goes to executor `i mod n` of the sorted list (stable range placement).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
    Default,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumString,
    strum::VariantNames,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum RouteStrategy {
    /// Each fire starts one executor further along the sorted list.
    #[default]
    RoundRobin,
    /// Always the executor that sorts first (the behaviour before routing existed).
    First,
    /// A uniformly random executor.
    Random,
    /// A hash of the key (the job name) over a hash ring of the executors: the same job keeps
    /// the same executor while the list is unchanged, and only ~1/n of jobs move when an
    /// executor joins or leaves.
    ConsistentHash,
    /// The executor with the fewest executions in flight from this scheduler instance.
    LeastBusy,
    /// Every live executor runs the whole job: one row per executor, each over every shard,
    /// pinned to its executor (no fail-over to another, which has a row of its own).
    Broadcast,
}

impl RouteStrategy {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What a fire does while the job still has a PENDING or RUNNING execution (on any instance).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
    Default,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumString,
    strum::VariantNames,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum OverlapPolicy {
    /// Run anyway: executions of one job may overlap.
    #[default]
    Allow,
    /// Record the fire as a `SKIPPED` execution and do not call the executor.
    Skip,
    /// Cancel the running executions (`CANCELLED`), then run the new fire.
    Cover,
}

impl OverlapPolicy {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The name of an alert channel (`[[alerts.channels]] name`): 1-64 of `[A-Za-z0-9._-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ChannelName(String);

impl ChannelName {
    pub const MAX_LEN: usize = 64;
    /// [`ChannelName::parse`] as an ECMA-262 pattern.
    pub const PATTERN: &str = "^[A-Za-z0-9._-]{1,64}$";

    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.is_empty() || raw.len() > Self::MAX_LEN {
            return Err(format!("must be 1 to {} characters long", Self::MAX_LEN));
        }
        if let Some(c) = raw
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(format!(
                "may only contain letters, digits and . _ - (found {c:?})"
            ));
        }
        Ok(Self(raw.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The name of a calendar (`[[calendars]] name`): the rule of channel names.
pub type CalendarName = ChannelName;

impl fmt::Display for ChannelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// At most this many child jobs per job.
pub const MAX_CHILD_JOBS: usize = 50;
/// At most this many alert channels per job.
pub const MAX_ALERT_CHANNELS: usize = 20;

/// A list of names, each parsed, none twice, at most `max`; the message names the entry.
pub(super) fn parse_names<T: Eq + std::hash::Hash + Clone>(
    raw: &[String],
    max: usize,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    if raw.len() > max {
        return Err(format!("must list at most {max} names"));
    }
    let mut seen = HashSet::new();
    raw.iter()
        .map(|n| {
            let v = parse(n).map_err(|m| format!("`{}`: {m}", truncate(n)))?;
            if !seen.insert(v.clone()) {
                return Err(format!("lists `{}` twice", truncate(n)));
            }
            Ok(v)
        })
        .collect()
}

/// Child job names: names of jobs in `namespace` (a job's children are in its namespace),
/// distinct.
pub fn parse_child_jobs(namespace: &Namespace, raw: &[String]) -> Result<Vec<JobName>, String> {
    parse_names(raw, MAX_CHILD_JOBS, |n| JobName::parse_in(namespace, n))
}

/// Alert channel names, distinct (whether they are configured is checked at save time).
pub fn parse_alert_channels(raw: &[String]) -> Result<Vec<ChannelName>, String> {
    parse_names(raw, MAX_ALERT_CHANNELS, ChannelName::parse)
}

fn truncate(s: &str) -> String {
    s.chars().take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in [
            RouteStrategy::RoundRobin,
            RouteStrategy::First,
            RouteStrategy::Random,
            RouteStrategy::ConsistentHash,
            RouteStrategy::LeastBusy,
        ] {
            assert_eq!(super::super::choose::<RouteStrategy>(s.as_str()), Ok(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for p in [
            OverlapPolicy::Allow,
            OverlapPolicy::Skip,
            OverlapPolicy::Cover,
        ] {
            assert_eq!(super::super::choose::<OverlapPolicy>(p.as_str()), Ok(p));
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
        }
        assert!("round_robin".parse::<RouteStrategy>().is_err());
        assert!("BLOCK".parse::<OverlapPolicy>().is_err());
    }

    #[test]
    fn name_lists_are_checked_entry_by_entry() {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_child_jobs(&Namespace::default(), &v(&["a", "b:c"]))
                .unwrap()
                .len(),
            2
        );
        assert!(
            parse_child_jobs(&Namespace::default(), &v(&["a", "a"]))
                .unwrap_err()
                .contains("twice")
        );
        assert!(
            parse_child_jobs(&Namespace::default(), &v(&["bad name"]))
                .unwrap_err()
                .contains("`bad name`")
        );
        assert!(parse_child_jobs(&Namespace::default(), &v(&["executions"])).is_err());
        assert!(parse_alert_channels(&v(&["ops", "dev-team.1"])).is_ok());
        assert!(parse_alert_channels(&v(&["a:b"])).is_err());
        let many: Vec<String> = (0..=MAX_CHILD_JOBS).map(|i| format!("j{i}")).collect();
        assert!(
            parse_child_jobs(&Namespace::default(), &many)
                .unwrap_err()
                .contains("at most")
        );
    }
}
