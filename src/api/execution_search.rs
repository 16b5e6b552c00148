//! `GET /api/v1/executions`: executions of all jobs, searched by job, status, trigger type,
//! executor and trigger time. This is also where the history of a deleted job stays
//! reachable (its rows are kept; `/api/v1/jobs/{name}/executions` answers 404 once the job
//! is gone).

use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{Scoped, Viewer};
use super::error::{ApiError, Problem};
use super::extract::Query;
use super::page::Page;
use super::{AppState, PageParams};
use crate::jobs::{Execution, ExecutionStatus, JobName, Namespace, TriggerType, choose};
use crate::store::{ExecutionFilter, MAX_COUNTED_EXECUTIONS};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(search_executions))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ExecutionSearchParams {
    /// The namespace searched (1-40 of `a-z 0-9 -`); absent: `default`.
    #[allow(dead_code)] // read by `Scoped`
    namespace: Option<String>,
    /// Only executions of this job of the namespace (deleted jobs included).
    job_name: Option<String>,
    /// Only executions in this status.
    #[param(value_type = Option<ExecutionStatus>)]
    status: Option<String>,
    /// Only executions started this way.
    #[param(value_type = Option<TriggerType>)]
    trigger_type: Option<String>,
    /// Only executions planned for or run by this executor instance (`ip:port`).
    executor: Option<String>,
    /// Earliest trigger time, inclusive (RFC 3339 instant, e.g. `2026-01-31T00:00:00Z`).
    #[param(value_type = Option<String>, format = DateTime)]
    from: Option<String>,
    /// Latest trigger time, inclusive (RFC 3339 instant).
    #[param(value_type = Option<String>, format = DateTime)]
    to: Option<String>,
    /// Zero-based page number.
    page: Option<u32>,
    /// Page size, 1..=200 (default 20).
    size: Option<u32>,
}

/// The longest executor address accepted as a filter (the column's width).
pub const MAX_EXECUTOR_LEN: usize = 100;

impl ExecutionSearchParams {
    /// The filter and page, or a 400 naming every bad parameter.
    fn parse(
        self,
        namespace: &Namespace,
    ) -> Result<(ExecutionFilter, crate::store::PageRequest), ApiError> {
        let mut errors = Vec::new();
        let mut field = |name: &str, message: String| {
            errors.push(crate::jobs::FieldError::new(name, message));
        };
        let job_name = self
            .job_name
            .map(|n| JobName::parse_in(namespace, &n).map(|n| n.key().to_string()))
            .transpose()
            .map_err(|m| field("jobName", m))
            .ok()
            .flatten();
        let status = self
            .status
            .map(|s| choose::<ExecutionStatus>(&s))
            .transpose()
            .map_err(|m| field("status", m))
            .ok()
            .flatten();
        let trigger_type = self
            .trigger_type
            .map(|s| choose::<TriggerType>(&s))
            .transpose()
            .map_err(|m| field("triggerType", m))
            .ok()
            .flatten();
        if let Some(e) = &self.executor
            && (e.is_empty() || e.chars().count() > MAX_EXECUTOR_LEN)
        {
            field(
                "executor",
                format!("must be 1 to {MAX_EXECUTOR_LEN} characters long"),
            );
        }
        let mut instant = |name: &str, raw: Option<String>| {
            raw.and_then(|r| {
                crate::jobs::parse_instant(&r)
                    .map_err(|m| field(name, m))
                    .ok()
            })
        };
        let from = instant("from", self.from);
        let to = instant("to", self.to);
        let page = PageParams {
            page: self.page,
            size: self.size,
        }
        .parse_noting(&mut errors);
        let (Some(page), true) = (page, errors.is_empty()) else {
            return Err(ApiError::Validation(errors));
        };
        let filter = ExecutionFilter {
            namespace: Some(namespace.clone()),
            job_name,
            status,
            trigger_type,
            executor: self.executor,
            from,
            to,
        };
        Ok((filter, page))
    }
}

/// Search the executions of all jobs, newest first (by trigger time). Every given filter must
/// match; `from` and `to` bound the trigger time, both inclusive. The history of a deleted job
/// is kept and found here by `jobName`. `totalElements` counts at most 100,000 matches
/// (`totalElementsCapped` is then `true`): narrow the search for an exact count.
#[utoipa::path(get, path = "/api/v1/executions", tag = "executions",
    params(ExecutionSearchParams),
    responses(
        (status = 200, description = "A page of executions", body = Page<Execution>),
        (status = 400, description = "Invalid parameter; `errors` names it", body = Problem, content_type = "application/problem+json"),
    ))]
async fn search_executions(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    Query(p): Query<ExecutionSearchParams>,
) -> Result<axum::Json<Page<Execution>>, ApiError> {
    let (filter, page) = p.parse(&scope.namespace)?;
    let found = state
        .store
        .search_executions(&filter, page, MAX_COUNTED_EXECUTIONS)
        .await?;
    Ok(axum::Json(Page::of(found, page, |e| e)))
}
