//! `/api/v1/cluster`: the scheduler instances, the compensation leader, and who owns which job.

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::{Auth, Viewer};
use super::error::ApiError;
use crate::config::OwnershipStrategy;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(cluster))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    /// The instance that answered (`ip:port`).
    pub self_instance: String,
    /// Healthy scheduler instances, sorted: the ownership order.
    pub instances: Vec<String>,
    /// The first instance: it runs compensation.
    pub compensation_leader: Option<String>,
    /// `java-hash` or `rendezvous`.
    pub ownership: String,
    /// Jobs this instance schedules now.
    pub owned_jobs: usize,
    /// Every job and the instance that owns it (null when disabled or nobody can).
    pub jobs: Vec<JobOwner>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobOwner {
    /// The name within the namespace.
    pub name: String,
    pub namespace: String,
    pub enabled: bool,
    pub owner: Option<String>,
}

/// The cluster as this instance sees it.
#[utoipa::path(get, path = "/api/v1/cluster", tag = "cluster", responses((status = 200, body = ClusterView)))]
async fn cluster(
    _: Auth<Viewer>,
    State(state): State<AppState>,
) -> Result<axum::Json<ClusterView>, ApiError> {
    let ring = state.cluster.ring();
    let jobs = state.store.load_jobs().await?;
    Ok(axum::Json(ClusterView {
        self_instance: state.dispatcher.instance_id().to_string(),
        instances: ring.instances().to_vec(),
        compensation_leader: ring.leader().map(str::to_string),
        ownership: match ring.strategy() {
            OwnershipStrategy::JavaHash => "java-hash".into(),
            OwnershipStrategy::Rendezvous => "rendezvous".into(),
        },
        owned_jobs: state.cluster.owned_jobs(),
        jobs: jobs
            .iter()
            .map(|j| JobOwner {
                name: j.name().local().to_string(),
                namespace: j.name().namespace().to_string(),
                enabled: j.spec.enabled,
                owner: j
                    .spec
                    .enabled
                    .then(|| ring.owner_of(j.name().as_str()).map(str::to_string))
                    .flatten(),
            })
            .collect(),
    }))
}
