//! Liveness, readiness and the Prometheus endpoint.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(live))
        .routes(routes!(ready))
        .routes(routes!(prometheus))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `UP` or `DOWN`.
    pub status: &'static str,
    /// Per dependency: `UP` or `DOWN: reason`.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub checks: std::collections::BTreeMap<&'static str, String>,
}

/// The process is alive.
#[utoipa::path(get, path = "/health/live", tag = "health", security(()), responses((status = 200, body = Health)))]
async fn live() -> axum::Json<Health> {
    axum::Json(Health {
        status: "UP",
        checks: Default::default(),
    })
}

/// The instance can serve: database reachable and discovery working.
#[utoipa::path(get, path = "/health/ready", tag = "health", security(()),
    responses((status = 200, description = "Ready", body = Health), (status = 503, description = "Not ready", body = Health)))]
async fn ready(State(state): State<AppState>) -> (StatusCode, axum::Json<Health>) {
    let mut checks = std::collections::BTreeMap::new();
    let db = match tokio::time::timeout(std::time::Duration::from_secs(2), state.store.ping()).await
    {
        Ok(Ok(())) => "UP".to_string(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: database check failed");
            "DOWN: database not reachable".to_string()
        }
        Err(_) => "DOWN: database did not answer within 2s".to_string(),
    };
    checks.insert("database", db);
    checks.insert("discovery", state.discovery_status());
    let up = checks.values().all(|v| v == "UP");
    let status = if up {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        axum::Json(Health {
            status: if up { "UP" } else { "DOWN" },
            checks,
        }),
    )
}

/// Prometheus metrics in the text exposition format (a viewer token is needed when
/// `auth.protect_metrics` is set).
#[utoipa::path(get, path = "/metrics", tag = "health", security((), ("bearerAuth" = [])),
    responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain"), (status = 401, description = "Token required")))]
async fn prometheus(
    State(state): State<AppState>,
    mut parts: axum::http::request::Parts,
) -> Result<impl IntoResponse, super::auth::AuthError> {
    use axum::extract::FromRequestParts;
    if state.tokens.protect_metrics {
        // The metrics label every namespace's jobs: a token of every namespace.
        super::auth::Auth::<super::auth::Viewer>::from_request_parts(&mut parts, &state).await?;
    }
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    ))
}
