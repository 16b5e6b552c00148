//! `/api/v1/jobs/{name}/backfill…`: running a job's past instants again (rules in
//! [`backfill`](crate::jobs::backfill); docs/api.md, "Backfills").

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::{NamespaceParam, Operator, Scoped, Viewer};
use super::error::{ApiError, Problem};
use super::extract::{Path, ValidJson};
use crate::audit::AuditAction;
use crate::jobs::backfill::{
    self, Backfill, BackfillStatus, DEFAULT_PER_SECOND, MAX_FIRES, MAX_PER_SECOND,
    parse_backfill_id,
};
use crate::jobs::{FieldError, ScheduleType, local_name, new_trace_id, parse_instant};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start_backfill))
        .routes(routes!(list_backfills))
        .routes(routes!(get_backfill))
        .routes(routes!(cancel_backfill))
}

/// A backfill to start.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BackfillRequest {
    /// RFC 3339: the first instant that may run (included).
    #[schema(format = DateTime, example = "2026-12-01T00:00:00+08:00")]
    pub from: String,
    /// RFC 3339, not in the future, after `from`: instants before it run (excluded). The
    /// interval must hold at least one instant of the job's schedule and at most 10,000.
    #[schema(format = DateTime, example = "2026-12-01T08:00:00+08:00")]
    pub to: String,
    /// The client's key, 1-64 of `[A-Za-z0-9._:-]`: the same key again answers the backfill
    /// started with it and starts nothing. Generated when absent.
    pub backfill_id: Option<String>,
    /// Instants recorded per second, 1..=1000 (default 10).
    pub max_per_second: Option<i64>,
}

/// A backfill and how far it got.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackfillView {
    pub backfill_id: String,
    pub job_name: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub max_per_second: u32,
    /// Instants of the job's schedule in `[from, to)`.
    pub fires: u32,
    /// Instants recorded (and so dispatched) so far.
    pub done: u32,
    /// `RUNNING` until every instant is recorded (`DONE`), or until it is cancelled or its
    /// job deleted (`CANCELLED`).
    pub status: BackfillStatus,
    pub created_at: DateTime<Utc>,
    pub created_by: Option<String>,
    pub updated_at: DateTime<Utc>,
}

impl From<Backfill> for BackfillView {
    fn from(b: Backfill) -> Self {
        Self {
            backfill_id: b.backfill_id,
            job_name: local_name(&b.job_name).to_string(),
            from: b.from,
            to: b.to,
            max_per_second: b.max_per_second,
            fires: b.fires,
            done: b.done,
            status: b.status,
            created_at: b.created_at,
            created_by: b.created_by,
            updated_at: b.updated_at,
        }
    }
}

/// The value of a field that parsed; the field's problem noted otherwise.
fn field<T>(errors: &mut Vec<FieldError>, name: &str, parsed: Result<T, String>) -> Option<T> {
    parsed
        .map_err(|m| errors.push(FieldError::new(name, m)))
        .ok()
}

fn backfill_not_found(name: &str, id: &str) -> ApiError {
    ApiError::NotFound(format!(
        "job `{}` has no backfill `{}`",
        super::error::truncate(name),
        super::error::truncate(id)
    ))
}

/// Run every instant of the job's schedule in `[from, to)` once, as trigger type `BACKFILL`,
/// at most `maxPerSecond` a second. Answers at once; follow it with its `backfillId`.
#[utoipa::path(post, path = "/api/v1/jobs/{name}/backfill", tag = "jobs",
    security(("bearerAuth" = ["operator"])),
    params(("name" = String, Path, description = "Job name"), NamespaceParam),
    request_body = BackfillRequest,
    responses(
        (status = 202, description = "The backfill started, or the one started before with this backfillId", body = BackfillView),
        (status = 400, description = "Invalid body (the field is named), or no instant to run", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
    ))]
async fn start_backfill(
    scope: Scoped<Operator>,
    State(state): State<AppState>,
    Path(name): Path<String>,
    ValidJson(req): ValidJson<BackfillRequest>,
) -> Result<(StatusCode, axum::Json<BackfillView>), ApiError> {
    let now = state.clock.now();
    let mut errors = Vec::new();
    let from = field(&mut errors, "from", parse_instant(&req.from));
    let to = field(
        &mut errors,
        "to",
        parse_instant(&req.to).and_then(|t| {
            if t > now {
                Err("must not be in the future: the schedule itself fires from now on".into())
            } else {
                Ok(t)
            }
        }),
    );
    let id = match &req.backfill_id {
        Some(raw) => field(&mut errors, "backfillId", parse_backfill_id(raw)),
        None => Some(new_trace_id()),
    };
    let pace = field(
        &mut errors,
        "maxPerSecond",
        match req.max_per_second {
            None => Ok(DEFAULT_PER_SECOND),
            Some(n) if (1..=i64::from(MAX_PER_SECOND)).contains(&n) => Ok(n as u32),
            Some(_) => Err(format!("must be between 1 and {MAX_PER_SECOND}")),
        },
    );
    if let (Some(f), Some(t)) = (from, to)
        && f >= t
    {
        errors.push(FieldError::new("to", "must be after `from`"));
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let (from, to, id, pace) = (
        from.expect("checked"),
        to.expect("checked"),
        id.expect("checked"),
        pace.expect("checked"),
    );
    let key = scope.job(&name)?;
    let job = state
        .store
        .get_job(key.key())
        .await?
        .ok_or_else(|| ApiError::job_not_found(&name))?;
    // The same key again: the backfill there is, whatever this request says.
    if let Some(existing) = state.store.get_backfill(key.key(), &id).await? {
        return Ok((StatusCode::ACCEPTED, axum::Json(existing.into())));
    }
    if job.spec.timing.schedule_type() == ScheduleType::None {
        return Err(ApiError::field(
            "from",
            "the job's scheduleType is NONE: it has no instants to backfill",
        ));
    }
    let schedule = job.spec.schedule(&state.calendars);
    let fires = backfill::count_instants(&schedule, from, to, MAX_FIRES).ok_or_else(|| {
        ApiError::field(
            "to",
            format!(
                "the interval holds more than {MAX_FIRES} instants of the job's schedule; split it"
            ),
        )
    })?;
    let Some(first) = backfill::first_instant(&schedule, from, to) else {
        return Err(ApiError::field(
            "to",
            "no instant of the job's schedule falls in [from, to)",
        ));
    };
    let b = Backfill {
        job_name: key.key().to_string(),
        backfill_id: id,
        from,
        to,
        max_per_second: pace,
        fires,
        done: 0,
        next: Some(first),
        status: BackfillStatus::Running,
        created_at: now,
        created_by: scope.actor().map(str::to_string),
        updated_at: now,
    };
    let (stored, created) = state.store.start_backfill(&b).await?;
    if created {
        tracing::info!(job_name = %stored.job_name, backfill_id = %stored.backfill_id, fires, "backfill started");
        let detail = serde_json::json!({
            "backfillId": stored.backfill_id, "from": stored.from, "to": stored.to,
            "fires": stored.fires, "maxPerSecond": stored.max_per_second,
        });
        state
            .audit(
                &scope.principal,
                AuditAction::BackfillStarted,
                Some(key.namespace()),
                key.local(),
                Some(detail),
            )
            .await;
    }
    Ok((StatusCode::ACCEPTED, axum::Json(stored.into())))
}

/// A job's backfills, newest first (at most 50).
#[utoipa::path(get, path = "/api/v1/jobs/{name}/backfills", tag = "jobs",
    params(("name" = String, Path, description = "Job name"), NamespaceParam),
    responses(
        (status = 200, description = "The job's backfills, newest first", body = Vec<BackfillView>),
    ))]
async fn list_backfills(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<axum::Json<Vec<BackfillView>>, ApiError> {
    let list = state
        .store
        .list_backfills(scope.job(&name)?.key(), 50)
        .await?;
    Ok(axum::Json(list.into_iter().map(Into::into).collect()))
}

/// One backfill and how far it got.
#[utoipa::path(get, path = "/api/v1/jobs/{name}/backfills/{backfillId}", tag = "jobs",
    params(("name" = String, Path, description = "Job name"), ("backfillId" = String, Path, description = "The backfill's id"), NamespaceParam),
    responses(
        (status = 200, description = "The backfill", body = BackfillView),
        (status = 404, description = "No such backfill", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_backfill(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    Path((name, id)): Path<(String, String)>,
) -> Result<axum::Json<BackfillView>, ApiError> {
    let b = state
        .store
        .get_backfill(scope.job(&name)?.key(), &id)
        .await?
        .ok_or_else(|| backfill_not_found(&name, &id))?;
    Ok(axum::Json(b.into()))
}

/// Stop a backfill: no further instant is recorded (those recorded run on). A backfill that
/// has ended is answered as it is.
#[utoipa::path(post, path = "/api/v1/jobs/{name}/backfills/{backfillId}/cancel", tag = "jobs",
    security(("bearerAuth" = ["operator"])),
    params(("name" = String, Path, description = "Job name"), ("backfillId" = String, Path, description = "The backfill's id"), NamespaceParam),
    responses(
        (status = 200, description = "The backfill after the cancel", body = BackfillView),
        (status = 404, description = "No such backfill", body = Problem, content_type = "application/problem+json"),
    ))]
async fn cancel_backfill(
    scope: Scoped<Operator>,
    State(state): State<AppState>,
    Path((name, id)): Path<(String, String)>,
) -> Result<axum::Json<BackfillView>, ApiError> {
    let key = scope.job(&name)?;
    let running = state
        .store
        .get_backfill(key.key(), &id)
        .await?
        .is_some_and(|b| b.status == BackfillStatus::Running);
    let b = state
        .store
        .cancel_backfill(key.key(), &id, state.clock.now())
        .await?
        .ok_or_else(|| backfill_not_found(&name, &id))?;
    if running && b.status == BackfillStatus::Cancelled {
        state
            .audit(
                &scope.principal,
                AuditAction::BackfillCancelled,
                Some(key.namespace()),
                key.local(),
                Some(serde_json::json!({"backfillId": b.backfill_id, "done": b.done})),
            )
            .await;
    }
    Ok(axum::Json(b.into()))
}
