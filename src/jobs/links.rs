//! Save-time checks of what a job refers to outside itself: its child jobs must exist and must
//! not lead back to it (a cycle would trigger forever), its alert channels and its calendar
//! must be configured.
//!
//! These need the stored jobs and the configuration, so they run after `JobSpec::parse`, on
//! every save path (API, jobs from Nacos config); the stored jobs are read through the
//! `children_of` lookup the caller passes, so the domain stays free of storage. Two concurrent saves can still close a cycle
//! between them; child triggering is once per successful fire, so such a loop runs at the
//! jobs' own pace and is visible in the history, and the next save of either job rejects it.

use std::collections::{HashMap, VecDeque};
use std::future::Future;

use super::{FieldError, JobName, JobSpec};

/// What a job may name from configuration: alert channels and calendars.
#[derive(Debug, Clone, Copy, Default)]
pub struct Configured<'a> {
    /// `[[alerts.channels]]` names.
    pub channels: &'a [&'a str],
    /// `[[calendars]]` names.
    pub calendars: &'a [&'a str],
}

/// The field errors of what `spec` names from configuration without it being configured.
pub fn unconfigured(spec: &JobSpec, configured: Configured<'_>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let unknown: Vec<&str> = spec
        .alert_channels
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !configured.channels.contains(c))
        .collect();
    if !unknown.is_empty() {
        errors.push(FieldError::new(
            "alertChannels",
            format!(
                "unknown alert channel(s) {}: configure them under [[alerts.channels]]",
                quoted(&unknown)
            ),
        ));
    }
    if let Some(c) = spec
        .calendar
        .as_ref()
        .filter(|c| !configured.calendars.contains(&c.as_str()))
    {
        errors.push(FieldError::new(
            "calendar",
            format!("unknown calendar `{c}`: configure it under [[calendars]]"),
        ));
    }
    errors
}

/// The field errors of `spec`'s references (empty when all is well): what it names from
/// configuration ([`unconfigured`]), and its children: `children_of(name)` answers the
/// stored job's children, or `None` when there is no such job.
pub async fn check_references<F, Fut, E>(
    spec: &JobSpec,
    configured: Configured<'_>,
    mut children_of: F,
) -> Result<Vec<FieldError>, E>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<Option<Vec<JobName>>, E>>,
{
    let mut errors = unconfigured(spec, configured);

    let mut missing = Vec::new();
    for child in &spec.child_jobs {
        if child != &spec.name && children_of(child.to_string()).await?.is_none() {
            missing.push(child.as_str());
        }
    }
    if !missing.is_empty() {
        errors.push(FieldError::new(
            "childJobs",
            format!("unknown job(s) {}", quoted(&missing)),
        ));
        return Ok(errors);
    }
    // The stored part of the graph reachable from the new children (not through this job:
    // its stored edges are the ones being replaced).
    let mut graph: HashMap<String, Vec<JobName>> = HashMap::new();
    let mut queue: VecDeque<String> = spec.child_jobs.iter().map(ToString::to_string).collect();
    while let Some(name) = queue.pop_front() {
        if name == spec.name.as_str() || graph.contains_key(&name) {
            continue;
        }
        let children = children_of(name.clone()).await?.unwrap_or_default();
        queue.extend(children.iter().map(ToString::to_string));
        graph.insert(name, children);
    }
    let cycle = child_cycle(&spec.name, &spec.child_jobs, &graph);
    if let Some(path) = cycle {
        errors.push(FieldError::new(
            "childJobs",
            format!("would form a cycle: {}", path.join(" -> ")),
        ));
    }
    Ok(errors)
}

/// Whether giving `job` the children `children` closes a cycle over the stored edges in
/// `graph` (job name → its children; a job missing from it has none). The answer is the
/// shortest cycle as a path of names from `job` back to `job`.
pub fn child_cycle(
    job: &JobName,
    children: &[JobName],
    graph: &HashMap<String, Vec<JobName>>,
) -> Option<Vec<String>> {
    // Breadth first from the new children, remembering who reached whom for the message.
    let mut reached_from: HashMap<&str, Option<&str>> = HashMap::new();
    let mut queue = VecDeque::new();
    for c in children {
        if reached_from.insert(c.as_str(), None).is_none() {
            queue.push_back(c.as_str());
        }
    }
    while let Some(name) = queue.pop_front() {
        if name == job.as_str() {
            let mut path = vec![name.to_string()];
            let mut at = reached_from.get(name).copied().flatten();
            while let Some(prev) = at {
                at = reached_from.get(prev).copied().flatten();
                path.push(prev.to_string());
            }
            path.push(job.to_string());
            path.reverse();
            return Some(path);
        }
        for next in graph.get(name).into_iter().flatten() {
            if !reached_from.contains_key(next.as_str()) {
                reached_from.insert(next.as_str(), Some(name));
                queue.push_back(next.as_str());
            }
        }
    }
    None
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> JobName {
        JobName::parse(s).unwrap()
    }

    fn cycle(graph: &[(&str, &[&str])], job: &str, children: &[&str]) -> Option<String> {
        // Like check_references, the job's own stored edges are not part of the walk.
        let g: HashMap<String, Vec<JobName>> = graph
            .iter()
            .filter(|(k, _)| *k != job)
            .map(|(k, v)| (k.to_string(), v.iter().map(|c| n(c)).collect()))
            .collect();
        let kids: Vec<JobName> = children.iter().map(|c| n(c)).collect();
        child_cycle(&n(job), &kids, &g).map(|p| p.join(" -> "))
    }

    #[test]
    fn cycles_are_found_with_their_path() {
        assert_eq!(cycle(&[], "a", &["a"]).as_deref(), Some("a -> a"));
        let g: &[(&str, &[&str])] = &[("b", &["c"]), ("c", &["a"]), ("d", &[])];
        assert_eq!(
            cycle(g, "a", &["d", "b"]).as_deref(),
            Some("a -> b -> c -> a")
        );
        assert_eq!(cycle(g, "a", &["d"]), None);
        // The stored edges of the job itself are replaced by the new ones.
        let g: &[(&str, &[&str])] = &[("a", &["b"]), ("b", &[])];
        assert_eq!(cycle(g, "a", &["b"]), None);
        assert_eq!(cycle(g, "b", &["a"]).as_deref(), Some("b -> a -> b"));
    }

    #[test]
    fn diamonds_and_loops_elsewhere_terminate() {
        let g: &[(&str, &[&str])] = &[("b", &["d"]), ("c", &["d"]), ("d", &["e"]), ("e", &["d"])];
        assert_eq!(cycle(g, "a", &["b", "c"]), None);
    }
}
