//! Executions: history of a job, lookup by trace id, manual trigger and retry.

use axum::extract::State;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, Problem};
use super::extract::{Path, Query, ValidJson};
use super::{AppState, PageParams};
use crate::jobs::{Execution, ExecutionStatus};
use crate::store::Page;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_executions))
        .routes(routes!(get_execution))
        .routes(routes!(trigger_job))
        .routes(routes!(retry_execution))
        .routes(routes!(report_result))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ExecutionListParams {
    /// Zero-based page number.
    page: Option<u32>,
    /// Page size, 1..=200 (default 20).
    size: Option<u32>,
    /// Only executions in this status.
    #[param(value_type = Option<ExecutionStatus>)]
    status: Option<String>,
}

/// Execution history of a job, newest first.
#[utoipa::path(get, path = "/api/v1/jobs/{name}/executions", tag = "executions",
    params(("name" = String, Path, description = "Job name"), ExecutionListParams),
    responses(
        (status = 200, description = "A page of executions", body = Page<Execution>),
        (status = 400, description = "Invalid parameter", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_executions(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(p): Query<ExecutionListParams>,
) -> Result<axum::Json<Page<Execution>>, ApiError> {
    let page = PageParams {
        page: p.page,
        size: p.size,
    }
    .parse()?;
    let status = p
        .status
        .map(|s| s.parse::<ExecutionStatus>())
        .transpose()
        .map_err(|m| ApiError::field("status", m))?;
    Ok(axum::Json(
        state.store.list_executions(&name, status, page).await?,
    ))
}

/// One execution by its trace id.
#[utoipa::path(get, path = "/api/v1/jobs/executions/{traceId}", tag = "executions",
    params(("traceId" = String, Path, description = "Trace id of the execution")),
    responses(
        (status = 200, description = "The execution", body = Execution),
        (status = 404, description = "No such execution", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_execution(
    State(state): State<AppState>,
    Path(trace_id): Path<String>,
) -> Result<axum::Json<Execution>, ApiError> {
    let e = state
        .store
        .get_execution(&trace_id)
        .await?
        .ok_or_else(|| execution_not_found(&trace_id))?;
    Ok(axum::Json(e))
}

pub fn execution_not_found(trace_id: &str) -> ApiError {
    ApiError::NotFound(format!(
        "execution `{}` does not exist",
        super::error::truncate(trace_id)
    ))
}

/// Fire a job now, on this instance, whoever owns it. Returns one execution per shard range
/// (PENDING; follow them by trace id).
#[utoipa::path(post, path = "/api/v1/jobs/{name}/trigger", tag = "executions",
    params(("name" = String, Path, description = "Job name")),
    responses(
        (status = 200, description = "The executions created", body = Vec<Execution>),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
    ))]
async fn trigger_job(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<axum::Json<Vec<Execution>>, ApiError> {
    Ok(axum::Json(state.dispatcher.trigger(&name).await?))
}

/// Run a finished execution's shard range again as a new RETRY execution.
#[utoipa::path(post, path = "/api/v1/jobs/executions/{traceId}/retry", tag = "executions",
    params(("traceId" = String, Path, description = "Trace id of the execution to retry")),
    responses(
        (status = 200, description = "The new execution", body = Execution),
        (status = 404, description = "No such execution, or its job was deleted", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The execution has not finished", body = Problem, content_type = "application/problem+json"),
    ))]
async fn retry_execution(
    State(state): State<AppState>,
    Path(trace_id): Path<String>,
) -> Result<axum::Json<Execution>, ApiError> {
    Ok(axum::Json(state.dispatcher.retry(&trace_id).await?))
}

/// The result an executor reports for an execution it accepted with 202.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultReport {
    pub success: bool,
    /// Result text (success) or error text (failure), at most 4000 characters.
    pub message: Option<String>,
}

/// Report the result of an asynchronous (202) execution. Settles a RUNNING execution once;
/// a failure gets the retry policy.
#[utoipa::path(post, path = "/api/v1/jobs/executions/{traceId}/result", tag = "executions",
    params(("traceId" = String, Path, description = "Trace id of the execution")),
    request_body = ResultReport,
    responses(
        (status = 200, description = "The execution after the report", body = Execution),
        (status = 400, description = "Invalid report", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such execution", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The execution is not RUNNING (already settled)", body = Problem, content_type = "application/problem+json"),
    ))]
async fn report_result(
    State(state): State<AppState>,
    Path(trace_id): Path<String>,
    ValidJson(report): ValidJson<ResultReport>,
) -> Result<axum::Json<Execution>, ApiError> {
    if report
        .message
        .as_ref()
        .is_some_and(|m| m.chars().count() > 4000)
    {
        return Err(ApiError::field(
            "message",
            "must be at most 4000 characters",
        ));
    }
    Ok(axum::Json(
        state
            .dispatcher
            .report(&trace_id, report.success, report.message)
            .await?,
    ))
}
