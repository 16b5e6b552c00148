//! `/api/v1/overview`: the cluster at a glance for the console's first page. Computed from the
//! store (executions of the last hour, recent cron starts), the ownership ring and discovery,
//! never from the Prometheus text.

use std::collections::BTreeMap;

use axum::extract::State;
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::{Auth, Viewer};
use super::error::{ApiError, Problem};
use crate::jobs::ExecutionStatus;
use crate::store::Activity;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(overview))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    /// The instance that answered (`ip:port`).
    pub self_instance: String,
    /// The first instance in the ownership order: it runs compensation.
    pub compensation_leader: Option<String>,
    /// Healthy scheduler instances in ownership order, with the enabled jobs each owns.
    pub instances: Vec<InstanceLoad>,
    pub jobs: JobCounts,
    pub last_hour: LastHour,
    pub fire_delay: FireDelay,
    /// Every executor service some job names, with its live instances.
    pub executors: Vec<ServiceExecutors>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceLoad {
    pub instance: String,
    pub owned_jobs: usize,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCounts {
    pub total: usize,
    pub enabled: usize,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastHour {
    /// Start of the window (one hour before the answer).
    pub since: DateTime<Utc>,
    /// Fires (distinct job and fire time of first attempts, manual triggers included).
    pub fires: i64,
    /// Executions triggered in the window, retries included.
    pub executions: i64,
    /// Executions that ended FAILED or TIMEOUT.
    pub failures: i64,
    /// Executions per status; statuses without any are left out.
    pub by_status: BTreeMap<String, i64>,
}

/// How late the latest cron fires started (start time minus scheduled fire time).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FireDelay {
    /// How many first-attempt cron starts of the last hour were measured (at most 100).
    pub samples: usize,
    /// The most recent one, in milliseconds (null without samples).
    pub latest_ms: Option<i64>,
    pub average_ms: Option<i64>,
    pub max_ms: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceExecutors {
    pub service_name: String,
    /// The Nacos group the jobs name for it; null: `nacos.group`.
    pub service_group: Option<String>,
    /// Jobs (enabled or not) calling this service.
    pub jobs: usize,
    /// Live instances (`ip:port`), sorted; empty means fires of its jobs fail.
    pub instances: Vec<String>,
}

impl FireDelay {
    fn measure(starts: &[(DateTime<Utc>, DateTime<Utc>)]) -> Self {
        let delays: Vec<i64> = starts
            .iter()
            .map(|(fire, start)| (*start - *fire).num_milliseconds().max(0))
            .collect();
        let n = delays.len();
        Self {
            samples: n,
            latest_ms: delays.first().copied(),
            average_ms: (n > 0).then(|| delays.iter().sum::<i64>() / n as i64),
            max_ms: delays.iter().copied().max(),
        }
    }
}

impl LastHour {
    fn from_activity(since: DateTime<Utc>, a: &Activity) -> Self {
        let count = |wanted: &[ExecutionStatus]| -> i64 {
            a.by_status
                .iter()
                .filter(|(s, _)| wanted.contains(s))
                .map(|(_, n)| n)
                .sum()
        };
        Self {
            since,
            fires: a.fires,
            executions: a.by_status.iter().map(|(_, n)| n).sum(),
            failures: count(&[ExecutionStatus::Failed, ExecutionStatus::Timeout]),
            by_status: a
                .by_status
                .iter()
                .map(|(s, n)| (s.as_str().to_string(), *n))
                .collect(),
        }
    }
}

/// Instances, ownership spread, the last hour's fires and failures, the current fire delay and
/// the executors of every service, as this instance sees them.
#[utoipa::path(get, path = "/api/v1/overview", tag = "cluster",
    responses(
        (status = 200, description = "The overview", body = Overview),
        (status = 401, description = "Missing or unknown token", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "The server failed; the cause is in its log", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database is not reachable", body = Problem, content_type = "application/problem+json"),
    ))]
async fn overview(
    _: Auth<Viewer>,
    State(state): State<AppState>,
) -> Result<axum::Json<Overview>, ApiError> {
    let now = state.clock.now();
    let since = now - Duration::hours(1);
    let jobs = state.store.load_jobs().await?;
    let activity = state.store.activity_since(since).await?;
    let ring = state.cluster.ring();
    let mut owned: BTreeMap<&str, usize> =
        ring.instances().iter().map(|i| (i.as_str(), 0)).collect();
    for job in jobs.iter().filter(|j| j.spec.enabled) {
        if let Some(owner) = ring.owner_of(job.name().as_str()) {
            *owned.entry(owner).or_default() += 1;
        }
    }
    let executors = super::executors::services_of(&state, &jobs)
        .await
        .into_iter()
        .map(
            |(service_name, service_group, jobs, instances)| ServiceExecutors {
                service_name,
                service_group,
                jobs,
                instances: instances.into_iter().map(|e| e.addr.to_string()).collect(),
            },
        )
        .collect();
    Ok(axum::Json(Overview {
        self_instance: state.dispatcher.instance_id().to_string(),
        compensation_leader: ring.leader().map(str::to_string),
        instances: ring
            .instances()
            .iter()
            .map(|i| InstanceLoad {
                instance: i.clone(),
                owned_jobs: owned.get(i.as_str()).copied().unwrap_or(0),
            })
            .collect(),
        jobs: JobCounts {
            total: jobs.len(),
            enabled: jobs.iter().filter(|j| j.spec.enabled).count(),
        },
        last_hour: LastHour::from_activity(since, &activity),
        fire_delay: FireDelay::measure(&activity.cron_starts),
        executors,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn fire_delay_is_measured_from_the_newest_start() {
        let d = FireDelay::measure(&[
            (at("2026-01-01T00:02:00Z"), at("2026-01-01T00:02:00.040Z")),
            (at("2026-01-01T00:01:00Z"), at("2026-01-01T00:01:00.260Z")),
            // A start recorded a little before the instant (clock skew) counts as no delay.
            (at("2026-01-01T00:00:00Z"), at("2025-12-31T23:59:59.990Z")),
        ]);
        assert_eq!(d.samples, 3);
        assert_eq!(d.latest_ms, Some(40));
        assert_eq!(d.average_ms, Some(100));
        assert_eq!(d.max_ms, Some(260));
        let none = FireDelay::measure(&[]);
        assert_eq!(
            (none.samples, none.latest_ms, none.average_ms, none.max_ms),
            (0, None, None, None)
        );
    }

    #[test]
    fn failures_are_failed_and_timed_out() {
        let since = at("2026-01-01T00:00:00Z");
        let h = LastHour::from_activity(
            since,
            &Activity {
                fires: 4,
                by_status: vec![
                    (ExecutionStatus::Success, 3),
                    (ExecutionStatus::Failed, 2),
                    (ExecutionStatus::Timeout, 1),
                    (ExecutionStatus::Running, 1),
                ],
                cron_starts: vec![],
            },
        );
        assert_eq!((h.fires, h.executions, h.failures), (4, 7, 3));
        assert_eq!(h.by_status["FAILED"], 2);
        assert!(!h.by_status.contains_key("PENDING"));
    }
}
