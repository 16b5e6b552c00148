//! Execution logs (docs/api.md, "Execution logs"): executors ship what a handler logged, in
//! batches signed like result reports; viewers read it forward from a cursor, while the
//! execution runs and after.
//!
//! `complete` tells a reader to stop polling: the execution is final and either its
//! executor sent the log's end and every line up to it has been read, or it finished more
//! than [`LOG_GRACE`] ago without one (an executor without log support, or one that died
//! before its last batch). Lines come back in the order the handler logged them.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::{Scoped, Viewer};
use super::error::{ApiError, Problem};
use super::executions::{authorize_report, execution_not_found};
use super::extract::{Path, Query, RawBody};
use crate::jobs::log::LogBatch;

/// Lines per page read, by default and at most.
const DEFAULT_LIMIT: u32 = 200;
const MAX_LIMIT: u32 = 1000;
/// How long after a final execution's end a log without its executor's end is complete.
pub const LOG_GRACE: chrono::TimeDelta = chrono::TimeDelta::seconds(30);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(read_log, ship_log))
}

/// What a batch wrote.
#[derive(Debug, Serialize, ToSchema)]
pub struct LogAck {
    /// Lines stored by this batch (a line shipped before is not stored again).
    pub written: u64,
}

/// A line as read.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReadLine {
    pub at: DateTime<Utc>,
    pub level: String,
    pub message: String,
}

/// Lines after a cursor.
#[derive(Debug, Serialize, ToSchema)]
pub struct LogRead {
    pub lines: Vec<ReadLine>,
    /// The cursor to read on from (`after`); the same cursor again when no line came.
    pub next: String,
    /// Nothing more will come: stop polling.
    pub complete: bool,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LogParams {
    /// The namespace (1-40 of `a-z 0-9 -`); absent: `default`.
    #[allow(dead_code)] // read by `Scoped`
    namespace: Option<String>,
    /// A `next` of an earlier answer; from the first line when absent.
    #[param(pattern = "^[0-9]{0,18}$")]
    after: Option<String>,
    /// Lines per answer, 1..=1000 (default 200).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// The log of an execution, forward from a cursor.
#[utoipa::path(get, path = "/api/v1/jobs/executions/{traceId}/logs", tag = "executions",
    params(("traceId" = String, Path, description = "Trace id of the execution"), LogParams),
    responses(
        (status = 200, description = "Lines after the cursor", body = LogRead,
            headers(("Link" = String, description = "With `log.execution_link` configured: `<url>; rel=\"related\"`, the execution's log in the services' log system"))),
        (status = 400, description = "Invalid cursor or limit", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such execution", body = Problem, content_type = "application/problem+json"),
    ))]
async fn read_log(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    Path(trace_id): Path<String>,
    Query(params): Query<LogParams>,
) -> Result<axum::response::Response, ApiError> {
    let after = match params.after.as_deref() {
        None | Some("") => 0,
        Some(raw) => Some(raw)
            .filter(|r| r.len() <= 18 && r.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|r| r.parse::<i64>().ok())
            .ok_or_else(|| ApiError::field("after", "must be a `next` of an earlier answer"))?,
    };
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::field(
            "limit",
            format!("must be between 1 and {MAX_LIMIT}"),
        ));
    }
    let execution = super::executions::execution_in(&state, &scope, &trace_id).await?;
    let page = state.store.read_log(&trace_id, after, limit).await?;
    let next = page.lines.last().map_or(after, |l| l.seq);
    let complete = execution.status.is_final()
        && match &page.end {
            Some(end) => next >= end.lines,
            None => execution
                .finish_time
                .is_some_and(|f| state.clock.now() - f > LOG_GRACE),
        };
    let read = axum::Json(LogRead {
        lines: page
            .lines
            .into_iter()
            .map(|l| ReadLine {
                at: l.at,
                level: l.level,
                message: l.message,
            })
            .collect(),
        next: next.to_string(),
        complete,
    });
    use axum::response::IntoResponse;
    Ok(match state.settings.log.execution_link(&trace_id) {
        Some(url) => (
            [(
                axum::http::header::LINK,
                format!("<{url}>; rel=\"related\""),
            )],
            read,
        )
            .into_response(),
        None => read.into_response(),
    })
}

/// Ship a batch of an execution's log (executors). Authenticated like result reports: the
/// executor signature over this request, or an operator token. A batch shipped again writes
/// nothing twice.
#[utoipa::path(post, path = "/api/v1/jobs/executions/{traceId}/logs", tag = "executions",
    security(("bearerAuth" = ["operator"])),
    params(("traceId" = String, Path, description = "Trace id of the execution")),
    request_body = LogBatch,
    responses(
        (status = 200, description = "The batch was stored", body = LogAck),
        (status = 400, description = "Invalid batch", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such execution", body = Problem, content_type = "application/problem+json"),
    ))]
async fn ship_log(
    State(state): State<AppState>,
    Path(trace_id): Path<String>,
    parts: axum::http::request::Parts,
    RawBody(body): RawBody,
) -> Result<axum::Json<LogAck>, ApiError> {
    authorize_report(&state, &parts, &trace_id, &body).await?;
    let batch: LogBatch = super::extract::parse_json(&parts.headers, &body)?;
    let written = keep(&state, &trace_id, batch, "").await?;
    Ok(axum::Json(LogAck { written }))
}

/// Stores a batch an executor handed over for `trace_id` (pushed here, or carried in a
/// result report), naming a field that breaks a rule under `prefix`: the lines it stored.
pub(super) async fn keep(
    state: &AppState,
    trace_id: &str,
    batch: LogBatch,
    prefix: &str,
) -> Result<u64, ApiError> {
    let log = batch
        .check(state.clock.now())
        .map_err(|(field, why)| ApiError::field(&format!("{prefix}{field}"), why))?;
    let Some(written) = state.store.append_log(trace_id, log).await? else {
        return Err(execution_not_found(trace_id));
    };
    Ok(written)
}
