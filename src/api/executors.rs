//! `/api/v1/executors`: every executor service the jobs name, its live instances, the calls
//! in flight to each across the cluster (its RUNNING rows), and the last call the answering
//! instance made to it (the console's Executors page, docs/console.md, "At a glance").

use std::collections::{BTreeMap, HashMap};

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::{Auth, Viewer};
use super::error::ApiError;
use crate::discovery::{ExecutorInstance, Service};
use crate::jobs::{JobDefinition, Namespace, local_name};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(executors))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorsView {
    /// The instance that answered (`ip:port`): `lastCall` is its own.
    pub self_instance: String,
    pub services: Vec<ExecutorService>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorService {
    pub service_name: String,
    /// The Nacos group the jobs name for it; null: `nacos.group`.
    pub service_group: Option<String>,
    /// Jobs (enabled or not) calling this service.
    pub jobs: usize,
    /// Live instances, sorted by address; empty means fires of its jobs fail.
    pub instances: Vec<ExecutorView>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorView {
    /// `ip:port`.
    pub address: String,
    /// The endpoint prefix it announced (Nacos metadata `jobflow.path-prefix`), or the
    /// configured `executor.path_prefix`; null: none.
    pub path_prefix: Option<String>,
    /// Executions RUNNING at it, whichever instance called them.
    pub calls_in_flight: i64,
    /// The last call the answering instance made to it; null when it made none (in the last
    /// day).
    pub last_call: Option<LastCallView>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastCallView {
    pub trace_id: String,
    /// The job's name within its namespace.
    pub job_name: String,
    pub namespace: String,
    pub at: DateTime<Utc>,
    /// The status the executor answered, `ACCEPTED` (it reports later), `NO_ANSWER` (none
    /// within the timeout) or `UNREACHABLE` (connection refused).
    pub outcome: String,
}

/// Every executor service the jobs name, with its live instances, in name order.
pub(super) async fn services_of(
    state: &AppState,
    jobs: &[JobDefinition],
) -> Vec<(String, Option<String>, usize, Vec<ExecutorInstance>)> {
    let mut services: BTreeMap<(String, Option<String>), usize> = BTreeMap::new();
    for job in jobs {
        let service = (
            job.spec.service_name.as_str().to_string(),
            job.spec.service_group.clone(),
        );
        *services.entry(service).or_default() += 1;
    }
    let mut out = Vec::with_capacity(services.len());
    for ((name, group), count) in services {
        let service = Service {
            name: &name,
            group: group.as_deref(),
        };
        let mut instances = state.discovery.executors(service).await.to_vec();
        instances.sort_by(|a, b| a.addr.as_str().cmp(b.addr.as_str()));
        instances.dedup_by(|a, b| a.addr == b.addr);
        out.push((name, group, count, instances));
    }
    out
}

/// The executors of every service the jobs name: live instances, calls in flight, last call.
#[utoipa::path(get, path = "/api/v1/executors", tag = "cluster",
    responses((status = 200, description = "The executor services and their instances", body = ExecutorsView)))]
async fn executors(
    _: Auth<Viewer>,
    State(state): State<AppState>,
) -> Result<axum::Json<ExecutorsView>, ApiError> {
    let jobs = state.store.load_jobs().await?;
    let in_flight: HashMap<String, i64> = state.store.running_per_executor().await?;
    let calls = state.dispatcher.calls();
    let services = services_of(&state, &jobs)
        .await
        .into_iter()
        .map(
            |(service_name, service_group, jobs, instances)| ExecutorService {
                service_name,
                service_group,
                jobs,
                instances: instances
                    .into_iter()
                    .map(|e| {
                        let address = e.addr.to_string();
                        ExecutorView {
                            calls_in_flight: in_flight.get(&address).copied().unwrap_or(0),
                            last_call: calls.last(&address).map(|c| LastCallView {
                                trace_id: c.trace_id,
                                namespace: Namespace::of_key(&c.job_name).to_string(),
                                job_name: local_name(&c.job_name).to_string(),
                                at: c.at,
                                outcome: c.outcome.to_string(),
                            }),
                            path_prefix: e.path_prefix,
                            address,
                        }
                    })
                    .collect(),
            },
        )
        .collect();
    Ok(axum::Json(ExecutorsView {
        self_instance: state.dispatcher.instance_id().to_string(),
        services,
    }))
}
