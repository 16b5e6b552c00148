//! `/api/v1/auth/me`: who the presented token belongs to, so a client (the console) shows only
//! what that role may do.

use axum::extract::State;
use axum::http::request::Parts;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::AuthError;
use super::error::Problem;
use crate::config::Role;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(me))
}

/// A role as the API names it; each includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RoleName {
    /// Reads jobs, executions and the cluster.
    Viewer,
    /// Also triggers, retries, cancels, enables and disables.
    Operator,
    /// Also creates, changes and deletes jobs.
    Admin,
}

impl From<RoleName> for Role {
    fn from(r: RoleName) -> Self {
        match r {
            RoleName::Viewer => Self::Viewer,
            RoleName::Operator => Self::Operator,
            RoleName::Admin => Self::Admin,
        }
    }
}

impl From<Role> for RoleName {
    fn from(r: Role) -> Self {
        match r {
            Role::Viewer => Self::Viewer,
            Role::Operator => Self::Operator,
            Role::Admin => Self::Admin,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    /// `false` when the API takes no tokens (everyone acts as admin).
    pub auth_enabled: bool,
    /// The token's name (from `auth.tokens` or `/api/v1/tokens`), or the user a trusted proxy
    /// named; null when authentication is off.
    pub name: Option<String>,
    pub role: RoleName,
    /// The namespaces the caller may act in; absent: every namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
}

/// The caller: the name and role of the bearer token, or admin when authentication is off.
#[utoipa::path(get, path = "/api/v1/auth/me", tag = "auth",
    responses(
        (status = 200, description = "The caller", body = Me),
        (status = 401, description = "Missing or unknown token", body = Problem, content_type = "application/problem+json"),
    ))]
async fn me(State(state): State<AppState>, parts: Parts) -> Result<axum::Json<Me>, AuthError> {
    let principal = state
        .tokens
        .authorize(&parts, Role::Viewer, state.store.as_ref())
        .await?;
    Ok(axum::Json(Me {
        auth_enabled: state.tokens.enabled(),
        role: principal.role.into(),
        namespaces: principal
            .namespaces
            .map(|list| list.iter().map(ToString::to_string).collect()),
        name: principal.name,
    }))
}
