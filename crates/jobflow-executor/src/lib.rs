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
//!   with [`JobExecutor::without_signatures`]; status and cancel requests likewise;
//! - parses the call into a typed [`JobContext`] (trace id, execution id, fire time, shard
//!   range and count, strategy, RANGE data slice, CUSTOM item parameters, job params, retry
//!   count);
//! - runs the handler in its own task inside a tracing span carrying `trace_id`, `job` and
//!   `execution_id` (what MDC is to the Java version), so every log line of the handler can be
//!   found by trace id;
//! - aborts the handler when the call's `timeoutSeconds` pass (result `TIMEOUT`) or when the
//!   scheduler cancels it (`POST {prefix}/cancel/{traceId}`, result `CANCELLED`);
//! - maps the handler's result, or its panic, to the JobResult JSON;
//! - remembers every execution by trace id: a repeated call never runs the handler twice
//!   (202 while the first run goes on, then a report; the result once it is known), and
//!   `GET {prefix}/status/{traceId}` answers for running and finished executions;
//! - for background handlers answers 202, then reports the result (signed) to the scheduler;
//!   a synchronous call whose caller went away is reported the same way.

mod ledger;
pub mod logs;
pub mod protocol;
mod runtime;

#[cfg(feature = "nacos")]
pub mod nacos;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::ops::RangeInclusive;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use ledger::{KEEP_FINISHED, KEEP_FINISHED_AT_MOST, KEEP_FINISHED_FOR, Keep};
pub use protocol::{
    DataRange, ExecutionState, ExecutorRequest, FinalStatus, JobResult, StatusAnswer,
};

/// Everything a handler knows about the execution it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct JobContext {
    pub trace_id: String,
    pub execution_id: String,
    pub job_name: String,
    pub handler: String,
    /// CRON, MANUAL, RETRY, COMPENSATION or CHILD.
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
                status: None,
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

/// Builder and state of an executor: its handlers and how calls are authenticated.
#[derive(Clone)]
pub struct JobExecutor {
    secret: Option<Arc<Vec<u8>>>,
    path_prefix: String,
    handlers: HashMap<String, Registered>,
    /// Every execution this executor runs or remembers, by trace id.
    ledger: Arc<Mutex<ledger::Ledger>>,
    /// When this executor began: status answers carry it so the scheduler can tell "never
    /// had it" from "restarted since".
    started_at: DateTime<Utc>,
    http: reqwest::Client,
    /// Bytes of log messages each execution keeps ([`logs`]); 0 captures nothing.
    log_bound: usize,
    /// Logs carried in answers lately, for repeated calls.
    carried: Arc<std::sync::Mutex<logs::CarriedMemory>>,
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
        let started_at = Utc::now();
        Self {
            secret: secret.map(Arc::new),
            path_prefix: "/internal/job".into(),
            handlers: HashMap::new(),
            ledger: Arc::new(Mutex::new(ledger::Ledger::new(Keep::default(), started_at))),
            started_at,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("HTTP client"),
            log_bound: logs::DEFAULT_BOUND,
            carried: Arc::default(),
        }
    }

    /// How many bytes of log messages each execution keeps and ships to the scheduler
    /// (default 1 MiB; 0 ships nothing). What a handler logs beyond it is counted, not kept.
    pub fn log_bound(mut self, bytes: usize) -> Self {
        self.log_bound = bytes;
        self
    }

    /// Serves handlers under another prefix (announce it to the scheduler through the Nacos
    /// metadata key `jobflow.path-prefix`). Default `/internal/job`.
    pub fn path_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.path_prefix = prefix.into().trim_end_matches('/').to_string();
        self
    }

    /// How long and how many finished executions are remembered for status questions and
    /// repeated calls (default [`Keep::default`]: at least [`KEEP_FINISHED`] and at least those
    /// of the last [`KEEP_FINISHED_FOR`], at most [`KEEP_FINISHED_AT_MOST`]); the
    /// oldest-finished are forgotten first. Running ones are always remembered.
    pub fn keep_finished(mut self, keep: Keep) -> Self {
        self.ledger = Arc::new(Mutex::new(ledger::Ledger::new(keep, self.started_at)));
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

    /// The axum router: `POST {prefix}/{handler}`, `GET {prefix}/status/{traceId}` and
    /// `POST {prefix}/cancel/{traceId}`.
    pub fn router(self) -> Router {
        let prefix = self.path_prefix.clone();
        Router::new()
            .route(
                &format!("{prefix}/status/{{trace_id}}"),
                get(runtime::status),
            )
            .route(
                &format!("{prefix}/cancel/{{trace_id}}"),
                post(runtime::cancel),
            )
            .route(&format!("{prefix}/{{handler}}"), post(runtime::execute))
            .with_state(Arc::new(self))
    }
}
