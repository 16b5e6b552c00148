//! `GET /api/v1/audit`: the audit trail (see [`crate::audit`]), filtered and paged, newest
//! first. Admin only, and only for tokens of every namespace: the trail names every
//! namespace's jobs and every token.

use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{Admin, Auth};
use super::error::{ApiError, Problem};
use super::extract::Query;
use super::page::Page;
use super::{AppState, PageParams};
use crate::audit::{AuditAction, AuditEntry};
use crate::jobs::{FieldError, Namespace, parse_instant};
use crate::store::AuditFilter;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(read_audit))
}

/// The longest `actor` or `target` filter, in characters.
pub const MAX_FILTER_LEN: usize = 255;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// Only entries of this actor (a token's name, a proxied user, `nacos`, `anonymous`).
    actor: Option<String>,
    /// Only entries of this action.
    #[param(value_type = Option<AuditAction>)]
    action: Option<String>,
    /// Only entries in this namespace.
    namespace: Option<String>,
    /// Only entries about this target (a job's name, a trace id, a token's name, a data id).
    target: Option<String>,
    /// Entries at or after this instant (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    from: Option<String>,
    /// Entries before this instant (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    to: Option<String>,
    /// Zero-based page number.
    page: Option<u32>,
    /// Page size, 1..=200 (default 20).
    size: Option<u32>,
}

/// The audit trail, newest first: who created, changed, deleted, enabled, disabled or
/// triggered which job, retried or cancelled which execution, started or cancelled which
/// backfill, managed which token, and what each Nacos jobs document applied.
#[utoipa::path(get, path = "/api/v1/audit", tag = "auth", params(AuditParams),
    security(("bearerAuth" = ["admin"])),
    responses(
        (status = 200, description = "A page of entries", body = Page<AuditEntry>),
        (status = 400, description = "Invalid parameter; `errors` names it", body = Problem, content_type = "application/problem+json"),
    ))]
async fn read_audit(
    _: Auth<Admin>,
    State(state): State<AppState>,
    Query(p): Query<AuditParams>,
) -> Result<axum::Json<Page<AuditEntry>>, ApiError> {
    let mut errors = Vec::new();
    for (field, v) in [("actor", &p.actor), ("target", &p.target)] {
        if v.as_ref()
            .is_some_and(|v| v.is_empty() || v.chars().count() > MAX_FILTER_LEN)
        {
            let m = format!("must be 1 to {MAX_FILTER_LEN} characters long");
            errors.push(FieldError::new(field, m));
        }
    }
    let action = parsed(
        &mut errors,
        "action",
        p.action.as_deref(),
        AuditAction::parse,
    );
    let namespace = parsed(
        &mut errors,
        "namespace",
        p.namespace.as_deref(),
        Namespace::parse,
    );
    let from = parsed(&mut errors, "from", p.from.as_deref(), parse_instant);
    let to = parsed(&mut errors, "to", p.to.as_deref(), parse_instant);
    let page = PageParams {
        page: p.page,
        size: p.size,
    }
    .parse_noting(&mut errors);
    let (Some(page), true) = (page, errors.is_empty()) else {
        return Err(ApiError::Validation(errors));
    };
    let filter = AuditFilter {
        actor: p.actor,
        action,
        namespace: namespace.map(|n| n.to_string()),
        target: p.target,
        from,
        to,
    };
    let found = state.store.list_audit(&filter, page).await?;
    Ok(axum::Json(Page::of(found, page, |e| e)))
}

/// `raw` parsed, or `None` with its problem noted against `field`.
fn parsed<T>(
    errors: &mut Vec<FieldError>,
    field: &str,
    raw: Option<&str>,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Option<T> {
    match raw.map(parse)? {
        Ok(v) => Some(v),
        Err(m) => {
            errors.push(FieldError::new(field, m));
            None
        }
    }
}
