//! Executions: history of a job, lookup by trace id, manual trigger and retry.

use axum::extract::State;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{AuthError, NamespaceParam, Operator, RequiredRole, Scoped, Viewer};
use super::error::{ApiError, Problem};
use super::extract::{Path, Query, RawBody};
use super::page::Page;
use super::{AppState, PageParams};
use crate::audit::AuditAction;
use crate::jobs::log::LogBatch;
use crate::jobs::{Execution, ExecutionStatus, Namespace, choose, local_name};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_executions))
        .routes(routes!(get_execution))
        .routes(routes!(trigger_job))
        .routes(routes!(retry_execution))
        .routes(routes!(cancel_execution))
        .routes(routes!(report_result))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ExecutionListParams {
    /// The namespace (1-40 of `a-z 0-9 -`); absent: `default`.
    #[allow(dead_code)] // read by `Scoped`
    namespace: Option<String>,
    /// Zero-based page number.
    page: Option<u32>,
    /// Page size, 1..=200 (default 20).
    size: Option<u32>,
    /// Only executions in this status.
    #[param(value_type = Option<ExecutionStatus>)]
    status: Option<String>,
}

/// Execution history of a job, newest first. A sub-resource of the job: once the job is
/// deleted this answers 404, and its kept history is found with
/// `GET /api/v1/executions?jobName=`.
#[utoipa::path(get, path = "/api/v1/jobs/{name}/executions", tag = "executions",
    params(("name" = String, Path, description = "Job name"), ExecutionListParams),
    responses(
        (status = 200, description = "A page of executions", body = Page<Execution>),
        (status = 400, description = "Invalid parameter", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such job (never created, or deleted)", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_executions(
    scope: Scoped<Viewer>,
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
        .map(|s| choose::<ExecutionStatus>(&s))
        .transpose()
        .map_err(|m| ApiError::field("status", m))?;
    let key = scope.job(&name)?;
    if state.store.get_job(key.key()).await?.is_none() {
        return Err(ApiError::job_not_found(&name));
    }
    let found = state.store.list_executions(key.key(), status, page).await?;
    Ok(axum::Json(Page::of(found, page, |e| e)))
}

/// One execution by its trace id.
#[utoipa::path(get, path = "/api/v1/jobs/executions/{traceId}", tag = "executions",
    params(("traceId" = String, Path, description = "Trace id of the execution"), NamespaceParam),
    responses(
        (status = 200, description = "The execution", body = Execution),
        (status = 404, description = "No such execution", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_execution(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    Path(trace_id): Path<String>,
) -> Result<axum::Json<Execution>, ApiError> {
    Ok(axum::Json(execution_in(&state, &scope, &trace_id).await?))
}

/// The execution `trace_id` when its job is in the request's namespace; an execution of
/// another namespace is answered 404 like one that does not exist.
pub(super) async fn execution_in<R: RequiredRole>(
    state: &AppState,
    scope: &Scoped<R>,
    trace_id: &str,
) -> Result<Execution, ApiError> {
    state
        .store
        .get_execution(trace_id)
        .await?
        .filter(|e| scope.holds(&e.job_name))
        .ok_or_else(|| execution_not_found(trace_id))
}

/// A report is accepted with a valid, fresh executor signature over this request, or with an
/// operator token that may act in the execution's namespace.
pub(super) async fn authorize_report(
    state: &AppState,
    parts: &axum::http::request::Parts,
    trace_id: &str,
    body: &[u8],
) -> Result<(), ApiError> {
    use jobflow_executor::protocol::{headers, verify_signature};
    let signed = (|| {
        let secret = state.settings.executor.signing_secret.as_ref()?;
        let ts = parts
            .headers
            .get(headers::TIMESTAMP)?
            .to_str()
            .ok()?
            .parse::<i64>()
            .ok()?;
        let sig = parts.headers.get(headers::SIGNATURE)?.to_str().ok()?;
        verify_signature(
            secret.expose().as_bytes(),
            "POST",
            parts.uri.path(),
            ts,
            trace_id,
            body,
            sig,
            // Signatures carry the wall time both sides read.
            chrono::Utc::now(),
        )
        .then_some(())
    })();
    if signed.is_some() {
        return Ok(());
    }
    let principal = state
        .tokens
        .authorize(parts, crate::config::Role::Operator, state.store.as_ref())
        .await
        .map_err(|e| match e {
            AuthError::Unauthenticated => ApiError::Unauthorized(
                "a valid executor signature or operator token is required".into(),
            ),
            AuthError::Forbidden(_) => ApiError::Forbidden(
                "reporting results needs the operator role or an executor signature".into(),
            ),
            other => ApiError::Unavailable(format!("{other:?}")),
        })?;
    if principal.unrestricted() {
        return Ok(());
    }
    // A token of some namespaces reports only for their executions.
    let namespace = state
        .store
        .get_execution(trace_id)
        .await?
        .map(|e| e.namespace)
        .ok_or_else(|| execution_not_found(trace_id))?;
    match Namespace::parse(&namespace) {
        Ok(ns) if principal.may_act_in(&ns) => Ok(()),
        _ => Err(execution_not_found(trace_id)),
    }
}

pub fn execution_not_found(trace_id: &str) -> ApiError {
    ApiError::NotFound(format!(
        "execution `{}` does not exist",
        super::error::truncate(trace_id)
    ))
}

/// What a manual trigger may choose for this run (docs/api.md); every field optional.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TriggerRequest {
    /// Any JSON (at most 65,535 bytes serialised, as a job's): replaces the job's `jobParams`
    /// for this run and its retries.
    #[schema(value_type = Option<Value>)]
    pub job_params: Option<serde_json::Value>,
    /// `ip:port` of a live instance of the job's service: every range runs there.
    pub executor: Option<String>,
}

/// Fire a job now, on this instance, whoever owns it. Returns one execution per shard range
/// (PENDING; follow them by trace id). The job's `overlapPolicy` applies as to a cron fire:
/// under `SKIP`, while the job has a PENDING or RUNNING execution, the executions are recorded
/// `SKIPPED` (their `errorMessage` names the running ones) and no executor is called; under
/// `COVER` those executions are cancelled first. The optional body sets this run's `jobParams`
/// (kept by its retries) and executor.
#[utoipa::path(post, path = "/api/v1/jobs/{name}/trigger", tag = "executions",
    security(("bearerAuth" = ["operator"])),
    params(("name" = String, Path, description = "Job name"), NamespaceParam),
    request_body(content = Option<TriggerRequest>, description = "Optional: this run's jobParams and executor"),
    responses(
        (status = 200, description = "The executions created, one per shard range (SKIPPED ones were not called)", body = Vec<Execution>),
        (status = 400, description = "Invalid body; the field is named", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`executor` is not a live instance of the job's service", body = Problem, content_type = "application/problem+json"),
    ))]
async fn trigger_job(
    scope: Scoped<Operator>,
    State(state): State<AppState>,
    Path(name): Path<String>,
    parts: axum::http::request::Parts,
    RawBody(body): RawBody,
) -> Result<axum::Json<Vec<Execution>>, ApiError> {
    // No body, or JSON `null`: a trigger as before the body existed.
    let request: TriggerRequest = if body.iter().all(u8::is_ascii_whitespace) {
        TriggerRequest::default()
    } else {
        super::extract::parse_json::<Option<TriggerRequest>>(&parts.headers, &body)?
            .unwrap_or_default()
    };
    if let Some(params) = &request.job_params {
        crate::jobs::check_job_params(params).map_err(|m| ApiError::field("jobParams", m))?;
    }
    let executor = request
        .executor
        .as_deref()
        .map(crate::discovery::InstanceAddr::parse)
        .transpose()
        .map_err(|e| ApiError::field("executor", e))?;
    let key = scope.job(&name)?;
    let detail = serde_json::json!({"jobParams": request.job_params, "executor": request.executor});
    let options = crate::dispatch::TriggerOptions {
        job_params: request.job_params,
        executor,
    };
    let rows = state
        .dispatcher
        .operator()
        .trigger(key.key(), options)
        .await?;
    let mut detail = detail;
    detail["traceIds"] = rows.iter().map(|e| e.trace_id.clone()).collect();
    state
        .audit(
            &scope.principal,
            AuditAction::JobTriggered,
            Some(key.namespace()),
            key.local(),
            Some(detail),
        )
        .await;
    Ok(axum::Json(rows))
}

/// Run a finished execution's shard range again as a new RETRY execution.
#[utoipa::path(post, path = "/api/v1/jobs/executions/{traceId}/retry", tag = "executions",
    security(("bearerAuth" = ["operator"])),
    params(("traceId" = String, Path, description = "Trace id of the execution to retry"), NamespaceParam),
    responses(
        (status = 200, description = "The new execution", body = Execution),
        (status = 404, description = "No such execution, or its job was deleted", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The execution has not finished", body = Problem, content_type = "application/problem+json"),
    ))]
async fn retry_execution(
    scope: Scoped<Operator>,
    State(state): State<AppState>,
    Path(trace_id): Path<String>,
) -> Result<axum::Json<Execution>, ApiError> {
    let old = execution_in(&state, &scope, &trace_id).await?;
    let new = state.dispatcher.operator().retry(&trace_id).await?;
    state
        .audit(
            &scope.principal,
            AuditAction::ExecutionRetried,
            Some(&old.namespace),
            &trace_id,
            Some(serde_json::json!({
                "jobName": local_name(&old.job_name),
                "traceId": new.trace_id,
            })),
        )
        .await;
    Ok(axum::Json(new))
}

/// The longest result message a report may carry, in characters.
pub const MAX_REPORT_MESSAGE: usize = 4000;

/// Stop a PENDING or RUNNING execution: it becomes CANCELLED (final, no retry follows) and
/// the executor running it is asked to stop it (`POST {prefix}/cancel/{traceId}`); what the
/// executor answered is in the execution's `errorMessage`.
#[utoipa::path(post, path = "/api/v1/jobs/executions/{traceId}/cancel", tag = "executions",
    security(("bearerAuth" = ["operator"])),
    params(("traceId" = String, Path, description = "Trace id of the execution to cancel"), NamespaceParam),
    responses(
        (status = 200, description = "The cancelled execution", body = Execution),
        (status = 401, description = "No or unknown token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The token's role may not cancel", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such execution", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The execution is already final", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The scheduler is shutting down", body = Problem, content_type = "application/problem+json"),
    ))]
async fn cancel_execution(
    scope: Scoped<Operator>,
    State(state): State<AppState>,
    Path(trace_id): Path<String>,
) -> Result<axum::Json<Execution>, ApiError> {
    let old = execution_in(&state, &scope, &trace_id).await?;
    let cancelled = state
        .dispatcher
        .operator()
        .cancel(&trace_id, scope.actor())
        .await?;
    state
        .audit(
            &scope.principal,
            AuditAction::ExecutionCancelled,
            Some(&old.namespace),
            &trace_id,
            Some(serde_json::json!({
                "jobName": local_name(&old.job_name),
                "status": old.status,
            })),
        )
        .await;
    Ok(axum::Json(cancelled))
}

/// The final status an executor's SDK reports, when it knows more than success or failure.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReportedStatus {
    Success,
    Failed,
    Timeout,
    Cancelled,
}

/// The result an executor reports for an execution it accepted with 202 (or whose caller went
/// away before the answer).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultReport {
    pub success: bool,
    /// Result text (success) or error text (failure), at most 4000 characters.
    pub message: Option<String>,
    /// The precise verdict (e.g. TIMEOUT when the executor stopped the handler at the job's
    /// timeout); `success` decides when absent.
    pub status: Option<ReportedStatus>,
    /// What the handler logged and had not shipped yet, with the log's end: stored before
    /// the result, by the rules of the log endpoint.
    pub logs: Option<LogBatch>,
}

/// Report the result of an asynchronous (202) execution. Settles a RUNNING execution once;
/// a failure gets the retry policy. Authenticated by the executor signature
/// (`X-JobFlow-Timestamp`, `X-JobFlow-Signature`, as on calls to executors) or an operator
/// token.
#[utoipa::path(post, path = "/api/v1/jobs/executions/{traceId}/result", tag = "executions",
    security(("bearerAuth" = ["operator"])),
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
    parts: axum::http::request::Parts,
    RawBody(body): RawBody,
) -> Result<axum::Json<Execution>, ApiError> {
    authorize_report(&state, &parts, &trace_id, &body).await?;
    let report: ResultReport = super::extract::parse_json(&parts.headers, &body)?;
    if report
        .message
        .as_ref()
        .is_some_and(|m| m.chars().count() > MAX_REPORT_MESSAGE)
    {
        return Err(ApiError::field(
            "message",
            format!("must be at most {MAX_REPORT_MESSAGE} characters"),
        ));
    }
    if let Some(batch) = report.logs {
        // Stored first, and whatever the report comes to (an execution settled already
        // still keeps its log): the executor sends these lines nowhere else.
        super::execution_logs::keep(&state, &trace_id, batch, "logs.").await?;
    }
    Ok(axum::Json(
        state
            .dispatcher
            .operator()
            .report(
                &trace_id,
                report.success,
                report.status.map(|s| match s {
                    ReportedStatus::Success => ExecutionStatus::Success,
                    ReportedStatus::Failed => ExecutionStatus::Failed,
                    ReportedStatus::Timeout => ExecutionStatus::Timeout,
                    ReportedStatus::Cancelled => ExecutionStatus::Cancelled,
                }),
                report.message,
            )
            .await?,
    ))
}
