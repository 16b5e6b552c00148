//! Expose JobFlow job handlers from an axum service in a few lines.
//!
//! ```no_run
//! use jobflow_executor::{JobContext, JobExecutor, JobResult};
//!
//! # async fn run() -> std::io::Result<()> {
//! let executor = JobExecutor::with_secret("shared-signing-secret")
//!     .handler("syncOrders", |ctx: JobContext| async move {
//!         // Only the shards of this execution: ids where id % shardCount is in range.
//!         let mine = (1..=1000u64).filter(|id| ctx.owns_id(*id)).count();
//!         JobResult::success(format!("synced {mine} orders"))
//!     })
//!     .background_handler("rebuildIndex", |ctx: JobContext| async move {
//!         // Answered 202 at once; the result is reported to the scheduler when done.
//!         Err::<(), _>(format!("index {} not found", ctx.job_name))
//!     });
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9001").await?;
//! axum::serve(listener, executor.router()).await
//! # }
//! ```
//!
//! What the SDK does for every call:
//! - checks the scheduler's signature (`X-JobFlow-Timestamp`, `X-JobFlow-Signature`) and
//!   refuses unsigned, wrong or stale (> 5 min) calls with 401, unless the executor was built
//!   with [`JobExecutor::without_signatures`];
//! - parses the call into a typed [`JobContext`] (trace id, execution id, fire time, shard
//!   range and count, strategy, RANGE data slice, CUSTOM item parameters, job params, retry
//!   count);
//! - runs the handler inside a tracing span carrying `trace_id`, `job` and `execution_id`
//!   (what MDC is to the Java version), so every log line of the handler can be found by
//!   trace id;
//! - maps the handler's result, or its panic, to the JobResult JSON;
//! - for background handlers answers 202, then reports the result (signed) to the scheduler
//!   and keeps it for the status endpoint (`GET {prefix}/status/{traceId}`) that the
//!   scheduler's compensation asks.

pub mod protocol;

#[cfg(feature = "nacos")]
pub mod nacos;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::ops::RangeInclusive;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tracing::Instrument;

pub use protocol::{DataRange, ExecutorRequest, JobResult, StatusAnswer};
use protocol::{headers, verify_signature};

/// Everything a handler knows about the execution it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct JobContext {
    pub trace_id: String,
    pub execution_id: String,
    pub job_name: String,
    pub handler: String,
    /// CRON, MANUAL, RETRY or COMPENSATION.
    pub trigger_type: String,
    pub fire_time: DateTime<Utc>,
    pub shard_start: u32,
    pub shard_end: u32,
    pub shard_count: u32,
    /// MOD_HASH, RANGE or CUSTOM.
    pub shard_strategy: String,
    pub retry_count: u32,
    pub timeout_seconds: u32,
    pub job_params: Option<Value>,
    /// RANGE jobs: the inclusive slice of the data range this execution owns.
    pub data_range: Option<DataRange>,
    /// CUSTOM jobs: the item parameter of each shard in this execution's range.
    pub shard_items: BTreeMap<u32, String>,
}

impl JobContext {
    fn from_request(r: ExecutorRequest) -> Self {
        Self {
            trace_id: r.trace_id,
            execution_id: r.execution_id,
            job_name: r.job_name,
            handler: r.handler,
            trigger_type: r.trigger_type,
            fire_time: r.fire_time,
            shard_start: r.shard_start,
            shard_end: r.shard_end,
            shard_count: r.shard_count,
            shard_strategy: r.shard_strategy,
            retry_count: r.retry_count,
            timeout_seconds: r.timeout_seconds,
            job_params: r.job_params,
            data_range: r.data_range,
            shard_items: r.shard_items.unwrap_or_default(),
        }
    }

    /// The shard indexes of this execution.
    pub fn shards(&self) -> RangeInclusive<u32> {
        self.shard_start..=self.shard_end
    }

    /// MOD_HASH: whether record `id` belongs to this execution (`id % shardCount` in range).
    pub fn owns_id(&self, id: u64) -> bool {
        self.shards()
            .contains(&((id % self.shard_count.max(1) as u64) as u32))
    }

    /// The job parameters as a typed value.
    pub fn params<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_value(self.job_params.clone().unwrap_or(Value::Null))
    }
}

/// What a handler may return.
pub trait IntoJobResult {
    fn into_job_result(self) -> JobResult;
}

impl IntoJobResult for JobResult {
    fn into_job_result(self) -> JobResult {
        self
    }
}

impl<E: std::fmt::Display> IntoJobResult for Result<(), E> {
    fn into_job_result(self) -> JobResult {
        match self {
            Ok(()) => JobResult {
                success: true,
                message: None,
            },
            Err(e) => JobResult::failure(e.to_string()),
        }
    }
}

impl<E: std::fmt::Display> IntoJobResult for Result<String, E> {
    fn into_job_result(self) -> JobResult {
        match self {
            Ok(m) => JobResult::success(m),
            Err(e) => JobResult::failure(e.to_string()),
        }
    }
}

type BoxedHandler =
    Arc<dyn Fn(JobContext) -> Pin<Box<dyn Future<Output = JobResult> + Send>> + Send + Sync>;

#[derive(Clone)]
struct Registered {
    run: BoxedHandler,
    background: bool,
}

/// How many finished background executions the status endpoint remembers.
const REMEMBERED: usize = 10_000;

#[derive(Default)]
struct Outcomes {
    by_trace: HashMap<String, StatusAnswer>,
    order: VecDeque<String>,
}

impl Outcomes {
    fn set(&mut self, trace: &str, answer: StatusAnswer) {
        if self.by_trace.insert(trace.to_string(), answer).is_none() {
            self.order.push_back(trace.to_string());
            while self.order.len() > REMEMBERED {
                if let Some(old) = self.order.pop_front() {
                    self.by_trace.remove(&old);
                }
            }
        }
    }
}

/// Builder and state of an executor: its handlers and how calls are authenticated.
#[derive(Clone)]
pub struct JobExecutor {
    secret: Option<Arc<Vec<u8>>>,
    path_prefix: String,
    handlers: HashMap<String, Registered>,
    outcomes: Arc<Mutex<Outcomes>>,
    http: reqwest::Client,
}

impl JobExecutor {
    /// An executor that accepts only calls signed with `secret` (the scheduler's
    /// `executor.signing_secret`).
    pub fn with_secret(secret: impl AsRef<[u8]>) -> Self {
        Self::build(Some(secret.as_ref().to_vec()))
    }

    /// An executor that accepts unsigned calls. Anyone who can reach it can run its
    /// handlers: use only on a trusted network.
    pub fn without_signatures() -> Self {
        Self::build(None)
    }

    fn build(secret: Option<Vec<u8>>) -> Self {
        Self {
            secret: secret.map(Arc::new),
            path_prefix: "/internal/job".into(),
            handlers: HashMap::new(),
            outcomes: Arc::default(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("HTTP client"),
        }
    }

    /// Serves handlers under another prefix (announce it to the scheduler through the Nacos
    /// metadata key `jobflow.path-prefix`). Default `/internal/job`.
    pub fn path_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.path_prefix = prefix.into().trim_end_matches('/').to_string();
        self
    }

    /// A handler whose answer is the result: the scheduler waits for it (up to the job's
    /// timeout).
    pub fn handler<F, Fut, R>(self, name: &str, f: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoJobResult + 'static,
    {
        self.register(name, f, false)
    }

    /// A long-running handler: the call is answered 202 at once and the result is reported
    /// to the scheduler when the handler finishes.
    pub fn background_handler<F, Fut, R>(self, name: &str, f: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoJobResult + 'static,
    {
        self.register(name, f, true)
    }

    fn register<F, Fut, R>(mut self, name: &str, f: F, background: bool) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoJobResult + 'static,
    {
        let run: BoxedHandler = Arc::new(move |ctx| {
            let fut = f(ctx);
            Box::pin(async move { fut.await.into_job_result() })
        });
        self.handlers
            .insert(name.to_string(), Registered { run, background });
        self
    }

    /// The axum router: `POST {prefix}/{handler}` and `GET {prefix}/status/{traceId}`.
    pub fn router(self) -> Router {
        let prefix = self.path_prefix.clone();
        Router::new()
            .route(&format!("{prefix}/status/{{trace_id}}"), get(status))
            .route(&format!("{prefix}/{{handler}}"), post(execute))
            .with_state(Arc::new(self))
    }

    fn check_signature(
        &self,
        uri: &Uri,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(), &'static str> {
        let Some(secret) = &self.secret else {
            return Ok(());
        };
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let ts = header(headers::TIMESTAMP)
            .ok_or("unsigned call refused")?
            .parse::<i64>()
            .map_err(|_| "bad signature timestamp")?;
        let sig = header(headers::SIGNATURE).ok_or("unsigned call refused")?;
        let trace = header(headers::TRACE_ID).unwrap_or("");
        if verify_signature(secret, "POST", uri.path(), ts, trace, body, sig, Utc::now()) {
            Ok(())
        } else {
            Err("signature wrong or stale")
        }
    }

    /// Posts a background result to the scheduler, signed, retrying a few times.
    async fn report(&self, url: &str, trace_id: &str, result: &JobResult) {
        let body = serde_json::to_vec(result).expect("result serialises");
        let Ok(parsed) = reqwest::Url::parse(url) else {
            return tracing::warn!(url, "report URL is not a URL");
        };
        for attempt in 0..5u32 {
            let mut req = self
                .http
                .post(url)
                .header("content-type", "application/json")
                .header(headers::TRACE_ID, trace_id);
            if let Some(secret) = &self.secret {
                let ts = Utc::now().timestamp();
                req = req.header(headers::TIMESTAMP, ts).header(
                    headers::SIGNATURE,
                    protocol::signature(secret, "POST", parsed.path(), ts, trace_id, &body),
                );
            }
            match req.body(body.clone()).send().await {
                // 409: the scheduler settled the execution already (compensation); done.
                Ok(r) if r.status().is_success() || r.status() == StatusCode::CONFLICT => return,
                Ok(r) => tracing::warn!(
                    status = r.status().as_u16(),
                    attempt,
                    "result report refused"
                ),
                Err(e) => tracing::warn!(error = %e, attempt, "result report failed"),
            }
            tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
        }
        tracing::error!(
            "result could not be reported; the scheduler's compensation will ask the status endpoint"
        );
    }
}

fn reply(status: StatusCode, result: JobResult) -> Response {
    (status, axum::Json(result)).into_response()
}

async fn execute(
    State(ex): State<Arc<JobExecutor>>,
    Path(handler): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(why) = ex.check_signature(&uri, &headers, &body) {
        tracing::warn!(handler, why, "call refused");
        return reply(StatusCode::UNAUTHORIZED, JobResult::failure(why));
    }
    let Some(registered) = ex.handlers.get(&handler).cloned() else {
        return reply(
            StatusCode::NOT_FOUND,
            JobResult::failure(format!("no handler `{handler}`")),
        );
    };
    let request: ExecutorRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return reply(
                StatusCode::BAD_REQUEST,
                JobResult::failure(format!("not a JobFlow call: {e}")),
            );
        }
    };
    let report_url = request.report_url.clone();
    let ctx = JobContext::from_request(request);
    let span = tracing::info_span!("job", trace_id = %ctx.trace_id, job = %ctx.job_name, execution_id = %ctx.execution_id);
    let trace_id = ctx.trace_id.clone();
    // Spawned so that a panic becomes a failed result instead of a dropped connection.
    let run = tokio::spawn((registered.run)(ctx).instrument(span.clone()));
    let settle = async move {
        match run.await {
            Ok(r) => r,
            Err(e) if e.is_panic() => {
                let payload = e.into_panic();
                let msg = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned());
                tracing::error!(panic = msg.as_deref().unwrap_or("?"), "handler panicked");
                JobResult::failure(format!(
                    "handler panicked: {}",
                    msg.unwrap_or_else(|| "unknown cause".into())
                ))
            }
            Err(_) => JobResult::failure("handler was cancelled"),
        }
    };
    if !registered.background {
        let result = settle.await;
        span.in_scope(|| tracing::info!(success = result.success, "job finished"));
        return reply(StatusCode::OK, result);
    }
    ex.outcomes.lock().expect("outcomes lock").set(
        &trace_id,
        StatusAnswer {
            status: "RUNNING".into(),
            message: None,
        },
    );
    let ex2 = ex.clone();
    tokio::spawn(
        async move {
            let result = settle.await;
            tracing::info!(
                success = result.success,
                "background job finished; reporting"
            );
            let status = if result.success { "SUCCESS" } else { "FAILED" };
            ex2.outcomes.lock().expect("outcomes lock").set(
                &trace_id,
                StatusAnswer {
                    status: status.into(),
                    message: result.message.clone(),
                },
            );
            ex2.report(&report_url, &trace_id, &result).await;
        }
        .instrument(span),
    );
    StatusCode::ACCEPTED.into_response()
}

async fn status(State(ex): State<Arc<JobExecutor>>, Path(trace_id): Path<String>) -> Response {
    match ex
        .outcomes
        .lock()
        .expect("outcomes lock")
        .by_trace
        .get(&trace_id)
    {
        Some(answer) => (StatusCode::OK, axum::Json(answer.clone())).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
