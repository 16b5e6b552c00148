//! The REST API (docs/api.md): JSON in camelCase, errors as problem+json, OpenAPI generated
//! from the handlers and served with Swagger UI from the binary.

pub(crate) mod audit;
pub mod auth;
mod backfills;
mod cluster;
mod console;
mod contract;
mod cron;
pub mod error;
mod execution_logs;
mod execution_search;
mod executions;
mod executors;
mod extract;
mod health;
mod jobs;
mod overview;
mod page;
mod session;
pub(crate) mod tokens;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::middleware::{self, Next};
use axum::response::Response;
use metrics_exporter_prometheus::PrometheusHandle;
use tower_http::compression::CompressionLayer;
use tower_http::timeout::TimeoutLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use crate::config::Settings;
use crate::discovery::Discovery;
use crate::dispatch::Dispatcher;
use crate::engine::ClusterState;
use crate::jobs::TimeZoneName;
use crate::store::{PageRequest, Store};
pub use error::{ApiError, Problem};
pub use jobs::JobView;

/// Request bodies above this are refused with 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
pub const MAX_PAGE_SIZE: u32 = 200;
/// The highest zero-based page number accepted.
pub const MAX_PAGE: u32 = 1_000_000;

/// Everything a handler may need, built once at start-up.
#[derive(Clone)]
pub struct AppState {
    /// The time every handler reads.
    pub clock: crate::clock::Clock,
    pub store: Arc<dyn Store>,
    pub settings: Arc<Settings>,
    pub default_tz: TimeZoneName,
    pub metrics: PrometheusHandle,
    /// Wakes the scheduling engine after a job change made through this instance.
    pub job_changes: Arc<tokio::sync::Notify>,
    /// The job definitions the engine and the launcher work from.
    pub book: Arc<crate::jobs::JobBook>,
    pub dispatcher: Arc<Dispatcher>,
    pub discovery: Arc<dyn Discovery>,
    pub cluster: Arc<ClusterState>,
    pub tokens: Arc<auth::Tokens>,
    /// Raises alerts (failures, skipped fires, no executor, recoveries) without blocking.
    pub alerts: Arc<crate::alerts::Alerts>,
    /// The calendars jobs may name (`[[calendars]]`).
    pub calendars: Arc<crate::jobs::Calendars>,
}

impl AppState {
    /// A job written through this instance: known to its launcher before the answer, then
    /// read back by the engine.
    pub fn job_saved(&self, job: &crate::jobs::JobDefinition) {
        self.book.note_saved(job.clone());
        self.job_changes.notify_one();
    }

    /// A job deleted through this instance at `at` (see [`AppState::job_saved`]).
    pub fn job_deleted(&self, name: &str, at: chrono::DateTime<chrono::Utc>) {
        self.book.note_deleted(name, at);
        self.job_changes.notify_one();
    }

    /// Records what `actor` did in the audit trail (see [`crate::audit`]): after the change,
    /// never failing it.
    pub async fn audit(
        &self,
        actor: &auth::Principal,
        action: crate::audit::AuditAction,
        namespace: Option<&str>,
        target: &str,
        detail: Option<serde_json::Value>,
    ) {
        let entry = crate::audit::AuditEntry {
            at: self.clock.now(),
            actor: actor.actor().to_string(),
            action,
            namespace: namespace.map(str::to_string),
            target: target.to_string(),
            detail,
        };
        crate::store::record_audit(self.store.as_ref(), &entry).await;
    }

    /// `UP` or `DOWN: reason` for the readiness check.
    pub fn discovery_status(&self) -> String {
        match self.discovery.status() {
            Ok(()) => "UP".into(),
            Err(reason) => format!("DOWN: {reason}"),
        }
    }
}

/// `page`/`size` query parameters, checked.
pub struct PageParams {
    pub page: Option<u32>,
    pub size: Option<u32>,
}

impl PageParams {
    /// The page, or `None` with its problems added to `errors` (for handlers that answer every
    /// bad parameter at once).
    pub fn parse_noting(self, errors: &mut Vec<crate::jobs::FieldError>) -> Option<PageRequest> {
        match self.parse() {
            Ok(page) => Some(page),
            Err(ApiError::Validation(e)) => {
                errors.extend(e);
                None
            }
            Err(_) => None,
        }
    }

    pub fn parse(self) -> Result<PageRequest, ApiError> {
        let size = self.size.unwrap_or(20);
        if !(1..=MAX_PAGE_SIZE).contains(&size) {
            return Err(ApiError::field(
                "size",
                format!("must be between 1 and {MAX_PAGE_SIZE}"),
            ));
        }
        let page = self.page.unwrap_or(0);
        if page > MAX_PAGE {
            return Err(ApiError::field(
                "page",
                format!("must be at most {MAX_PAGE}"),
            ));
        }
        Ok(PageRequest { page, size })
    }
}

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearerAuth",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API token: from auth.tokens, or made through /api/v1/tokens",
                    ))
                    .build(),
            ),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "JobFlow", description = "Distributed, lock-free job scheduler for Nacos microservices."),
    modifiers(&BearerAuth),
    security(("bearerAuth" = [])),
    tags(
        (name = "jobs", description = "Job definitions"),
        (name = "executions", description = "Executions: history, trigger, retry"),
        (name = "cluster", description = "Scheduler instances and job ownership"),
        (name = "health", description = "Health and metrics"),
        (name = "auth", description = "The caller's identity and role, API tokens, the audit trail"),
    )
)]
struct ApiDoc;

/// The OpenAPI document of every route, completed into an exact contract (`contract.rs`).
pub fn openapi() -> serde_json::Value {
    contract::document(api_router().split_for_parts().1)
}

fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(jobs::router())
        .merge(backfills::router())
        .merge(executions::router())
        .merge(execution_logs::router())
        .merge(execution_search::router())
        .merge(cron::router())
        .merge(cluster::router())
        .merge(health::router())
        .merge(overview::router())
        .merge(executors::router())
        .merge(session::router())
        .merge(tokens::router())
        .merge(audit::router())
}

/// The complete HTTP application.
pub fn router(state: AppState) -> Router {
    let (api, doc) = api_router().split_for_parts();
    let timeout = Duration::from_secs(state.settings.server.request_timeout_seconds.get());
    let doc = contract::document(doc);
    api.merge(SwaggerUi::new("/swagger-ui").external_url_unchecked("/api-docs/openapi.json", doc))
        .merge(console::router())
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            timeout,
        ))
        // gzip for every client that accepts it: the console's files, the API's JSON,
        // /metrics (bodies under 32 bytes, images and event streams go as they are).
        .layer(CompressionLayer::new())
        .layer(middleware::from_fn(record_http_metrics))
        .with_state(state)
}

/// `http_server_requests_seconds{method,uri,status}`, with the route template as `uri` so
/// path parameters do not explode the label set.
async fn record_http_metrics(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = req.method().to_string();
    let uri = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "UNMATCHED".into());
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    metrics::histogram!("http_server_requests_seconds", "method" => method, "uri" => uri, "status" => status)
        .record(start.elapsed().as_secs_f64());
    resp
}
