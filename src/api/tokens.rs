//! `/api/v1/tokens`: API tokens an admin creates, lists, rotates and revokes without a
//! redeploy (docs/operations.md, "Tokens"). A token's secret is shown once, in the answer that
//! made it; the database keeps only its SHA-256. Tokens from the configuration
//! (`auth.tokens`) keep working beside these (the first admin comes from there) and are not
//! listed here.

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::{Admin, Auth, MANAGED_PREFIX, digest};
use super::error::{ApiError, Problem};
use super::extract::{Path, ValidJson};
use super::session::RoleName;
use crate::audit::AuditAction;
use crate::jobs::{Namespace, parse_plain};
use crate::store::StoredToken;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_token, list_tokens))
        .routes(routes!(rotate_token))
        .routes(routes!(revoke_token))
}

/// The longest token name.
pub const MAX_TOKEN_NAME: usize = 100;
/// [`MAX_TOKEN_NAME`] and the characters of a token name as an ECMA-262 pattern.
pub const TOKEN_NAME_PATTERN: &str = "^[A-Za-z0-9._:-]{1,100}$";
/// The most namespaces one token may list.
pub const MAX_TOKEN_NAMESPACES: usize = 100;

/// A token to create.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// 1-100 of `[A-Za-z0-9._:-]`, unique (and not the name of a configured token): recorded
    /// as the actor of what the token does.
    #[schema(example = "payments-ci")]
    pub name: String,
    pub role: RoleName,
    /// The namespaces the token may act in (1 to 100); null or absent: every namespace.
    #[schema(example = json!(["payments"]))]
    pub namespaces: Option<Vec<String>>,
}

/// A token, without its secret.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenView {
    pub name: String,
    pub role: RoleName,
    /// The namespaces it may act in; null: every namespace.
    pub namespaces: Option<Vec<String>>,
    pub created_at: DateTime<Utc>,
    pub created_by: Option<String>,
    /// When its secret was last replaced; null: never.
    pub rotated_at: Option<DateTime<Utc>>,
}

/// A token with its secret: the only answer that shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenSecret {
    pub name: String,
    pub role: RoleName,
    pub namespaces: Option<Vec<String>>,
    /// The bearer token (`jf_` and 43 characters). Shown once: only its SHA-256 is kept.
    pub token: String,
    pub created_at: DateTime<Utc>,
}

impl From<StoredToken> for TokenView {
    fn from(t: StoredToken) -> Self {
        Self {
            name: t.name,
            role: t.role.into(),
            namespaces: t.namespaces,
            created_at: t.created_at,
            created_by: t.created_by,
            rotated_at: t.rotated_at,
        }
    }
}

impl TokenSecret {
    fn of(t: StoredToken, token: String) -> Self {
        Self {
            name: t.name,
            role: t.role.into(),
            namespaces: t.namespaces,
            token,
            created_at: t.created_at,
        }
    }
}

/// A new secret: 32 random bytes, base64url, after the prefix.
fn new_secret() -> String {
    use base64::Engine;
    let bytes: [u8; 32] = rand::random();
    format!(
        "{MANAGED_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// The token's detail in the audit trail: what it may do, never its secret.
fn audit_detail(t: &StoredToken) -> serde_json::Value {
    serde_json::json!({"role": RoleName::from(t.role), "namespaces": t.namespaces})
}

/// Create a token. The answer carries its secret, once.
#[utoipa::path(post, path = "/api/v1/tokens", tag = "auth", request_body = TokenRequest,
    security(("bearerAuth" = ["admin"])),
    responses(
        (status = 201, description = "Created; `token` is the secret, shown this once", body = TokenSecret),
        (status = 400, description = "Invalid input; `errors` names the field", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A token with this name exists", body = Problem, content_type = "application/problem+json"),
    ))]
async fn create_token(
    auth: Auth<Admin>,
    State(state): State<AppState>,
    ValidJson(req): ValidJson<TokenRequest>,
) -> Result<(StatusCode, axum::Json<TokenSecret>), ApiError> {
    let name = parse_plain(&req.name, MAX_TOKEN_NAME).map_err(|m| ApiError::field("name", m))?;
    let namespaces = match req.namespaces {
        None => None,
        Some(list) => {
            if list.is_empty() || list.len() > MAX_TOKEN_NAMESPACES {
                return Err(ApiError::field(
                    "namespaces",
                    format!(
                        "must list 1 to {MAX_TOKEN_NAMESPACES} namespaces (null: every namespace)"
                    ),
                ));
            }
            let mut parsed = Vec::with_capacity(list.len());
            for (i, n) in list.iter().enumerate() {
                let ns = Namespace::parse(n)
                    .map_err(|m| ApiError::field(&format!("namespaces[{i}]"), m))?;
                if !parsed.contains(&ns.to_string()) {
                    parsed.push(ns.to_string());
                }
            }
            Some(parsed)
        }
    };
    if state.tokens.configured(&name) {
        return Err(ApiError::Conflict(format!(
            "`{name}` is the name of a token in the configuration (auth.tokens)"
        )));
    }
    let token = StoredToken {
        name,
        role: req.role.into(),
        namespaces,
        created_at: crate::store::ms(state.clock.now()),
        created_by: auth.actor().map(str::to_string),
        rotated_at: None,
    };
    let secret = new_secret();
    if !state.store.create_token(&token, &digest(&secret)).await? {
        return Err(ApiError::Conflict(format!(
            "a token named `{}` exists already",
            token.name
        )));
    }
    state
        .audit(
            &auth.0,
            AuditAction::TokenCreated,
            None,
            &token.name,
            Some(audit_detail(&token)),
        )
        .await;
    Ok((
        StatusCode::CREATED,
        axum::Json(TokenSecret::of(token, secret)),
    ))
}

/// The tokens created through the API, by name, without their secrets.
#[utoipa::path(get, path = "/api/v1/tokens", tag = "auth",
    security(("bearerAuth" = ["admin"])),
    responses(
        (status = 200, description = "Every token created through the API", body = Vec<TokenView>),
    ))]
async fn list_tokens(
    _: Auth<Admin>,
    State(state): State<AppState>,
) -> Result<axum::Json<Vec<TokenView>>, ApiError> {
    let tokens = state.store.list_tokens().await?;
    Ok(axum::Json(tokens.into_iter().map(Into::into).collect()))
}

/// Give a token a new secret; the old one is refused from now on. The answer carries the new
/// secret, once.
#[utoipa::path(post, path = "/api/v1/tokens/{name}/rotate", tag = "auth",
    security(("bearerAuth" = ["admin"])),
    params(("name" = String, Path, description = "Token name")),
    responses(
        (status = 200, description = "Rotated; `token` is the new secret, shown this once", body = TokenSecret),
        (status = 404, description = "No such token", body = Problem, content_type = "application/problem+json"),
    ))]
async fn rotate_token(
    auth: Auth<Admin>,
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<axum::Json<TokenSecret>, ApiError> {
    let secret = new_secret();
    let token = state
        .store
        .rotate_token(&name, &digest(&secret), state.clock.now())
        .await?
        .ok_or_else(|| token_not_found(&name))?;
    state
        .audit(
            &auth.0,
            AuditAction::TokenRotated,
            None,
            &token.name,
            Some(audit_detail(&token)),
        )
        .await;
    Ok(axum::Json(TokenSecret::of(token, secret)))
}

/// Revoke a token: it is refused from the next request on.
#[utoipa::path(delete, path = "/api/v1/tokens/{name}", tag = "auth",
    security(("bearerAuth" = ["admin"])),
    params(("name" = String, Path, description = "Token name")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 404, description = "No such token", body = Problem, content_type = "application/problem+json"),
    ))]
async fn revoke_token(
    auth: Auth<Admin>,
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    if !state.store.delete_token(&name).await? {
        return Err(token_not_found(&name));
    }
    state
        .audit(&auth.0, AuditAction::TokenRevoked, None, &name, None)
        .await;
    Ok(StatusCode::NO_CONTENT)
}

fn token_not_found(name: &str) -> ApiError {
    ApiError::NotFound(format!(
        "token `{}` does not exist",
        super::error::truncate(name)
    ))
}
