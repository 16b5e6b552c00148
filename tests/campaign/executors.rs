//! The campaign's executors: SDK executors (built on `jobflow-executor`, registered in Nacos
//! by the SDK) and bare ones (only `POST /internal/job/{handler}`, answered synchronously;
//! status and cancel are 404 without a body: no memory; registered over Nacos's HTTP API as
//! persistent instances, like an older service).
//!
//! Every handler run is recorded with its true start and true end: the end is when the work
//! really stopped (finished, aborted by the SDK, or died with its executor), kept by a drop
//! guard. Handlers, chosen per job by its `handler`:
//! - `fast`: 10-50 ms; `slow`: 0.5-4 s; `flaky`: 50-300 ms, fails one call in three;
//! - `overrun`: runs 3 s past the job's `timeoutSeconds` (the SDK stops it at the timeout; a
//!   bare executor lets it run);
//! - `stubborn`: slow to stop: 8-35 s of work on a blocked thread, which neither the SDK's
//!   timeout nor its cancel can interrupt (the SDK then answers a cancel `RUNNING` after
//!   10 s, as documented); it ends only when its work is done, often past
//!   `stuck_after_seconds`.
//!
//! Durations and failures are drawn from a hash of the trace id, so a call behaves the same
//! wherever it lands. An executor can be killed (its runtime is shut down: listener,
//! connections and running handlers die at once and its memory is gone; an SDK executor
//! leaves Nacos as a dead process's connection would) and restarted on the same port with a
//! fresh SDK, and it can be made slow (every run takes 1-3 s longer).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::Path;
use axum::routing::post;
use chrono::{DateTime, Utc};
use jobflow_executor::{JobContext, JobExecutor, JobResult};
use serde_json::{Value, json};

use crate::history::{ExecutorLife, Run};

pub const SDK_SERVICE: &str = "camp-sdk";
pub const BARE_SERVICE: &str = "camp-bare";
pub const HANDLERS: [&str; 5] = ["fast", "slow", "flaky", "overrun", "stubborn"];

/// Every handler run of every executor.
#[derive(Default)]
pub struct Recorder {
    runs: Mutex<Vec<Run>>,
}

impl Recorder {
    pub fn runs(&self) -> Vec<Run> {
        self.runs.lock().unwrap().clone()
    }

    fn start(&self, run: Run) -> usize {
        let mut runs = self.runs.lock().unwrap();
        runs.push(run);
        runs.len() - 1
    }

    fn end(&self, i: usize, outcome: &str) {
        let mut runs = self.runs.lock().unwrap();
        if runs[i].end.is_none() {
            runs[i].end = Some(Utc::now());
            runs[i].outcome = outcome.to_string();
        }
    }
}

/// What one life of an executor shares with its handlers.
struct Life {
    name: String,
    sdk: bool,
    life: u32,
    killed: AtomicBool,
    /// Runs take 1-3 s longer until then.
    slow_until: Arc<Mutex<Option<DateTime<Utc>>>>,
    recorder: Arc<Recorder>,
}

/// Marks a run's true end when dropped: finished, aborted, or killed.
struct RunGuard {
    life: Arc<Life>,
    index: usize,
    outcome: &'static str,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        let outcome = if self.life.killed.load(Ordering::SeqCst) && self.outcome == "RUNNING" {
            "KILLED"
        } else if self.outcome == "RUNNING" {
            "ABORTED"
        } else {
            self.outcome
        };
        self.life.recorder.end(self.index, outcome);
    }
}

/// What a call says about itself.
struct Call {
    trace_id: String,
    execution_id: String,
    job_name: String,
    handler: String,
    trigger_type: String,
    fire_time: DateTime<Utc>,
    shard_start: u32,
    shard_end: u32,
    retry_count: u32,
    timeout_seconds: u32,
    job_params: Value,
}

impl Call {
    fn from_context(ctx: &JobContext) -> Self {
        Self {
            trace_id: ctx.trace_id.clone(),
            execution_id: ctx.execution_id.clone(),
            job_name: ctx.job_name.clone(),
            handler: ctx.handler.clone(),
            trigger_type: ctx.trigger_type.clone(),
            fire_time: ctx.fire_time,
            shard_start: ctx.shard_start,
            shard_end: ctx.shard_end,
            retry_count: ctx.retry_count,
            timeout_seconds: ctx.timeout_seconds,
            job_params: ctx.job_params.clone().unwrap_or(Value::Null),
        }
    }

    fn from_body(handler: &str, body: &Value) -> Option<Self> {
        Some(Self {
            trace_id: body["traceId"].as_str()?.to_string(),
            execution_id: body["executionId"].as_str()?.to_string(),
            job_name: body["jobName"].as_str()?.to_string(),
            handler: handler.to_string(),
            trigger_type: body["triggerType"].as_str()?.to_string(),
            fire_time: body["fireTime"].as_str()?.parse().ok()?,
            shard_start: body["shardStart"].as_u64()? as u32,
            shard_end: body["shardEnd"].as_u64()? as u32,
            retry_count: body["retryCount"].as_u64()? as u32,
            timeout_seconds: body["timeoutSeconds"].as_u64()? as u32,
            job_params: body["jobParams"].clone(),
        })
    }

    /// A number fixed by the trace id.
    fn draw(&self, salt: u64) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ salt;
        for b in self.trace_id.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^ (h >> 29)
    }

    fn between_ms(&self, salt: u64, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.draw(salt) % (hi - lo + 1))
    }
}

impl Life {
    fn begin(self: &Arc<Self>, call: &Call) -> RunGuard {
        let index = self.recorder.start(Run {
            executor: self.name.clone(),
            sdk: self.sdk,
            life: self.life,
            trace_id: call.trace_id.clone(),
            execution_id: call.execution_id.clone(),
            job_name: call.job_name.clone(),
            handler: call.handler.clone(),
            trigger_type: call.trigger_type.clone(),
            fire_time: call.fire_time,
            shard_start: call.shard_start,
            shard_end: call.shard_end,
            retry_count: call.retry_count,
            job_params: call.job_params.clone(),
            start: Utc::now(),
            end: None,
            outcome: "RUNNING".into(),
        });
        RunGuard {
            life: self.clone(),
            index,
            outcome: "RUNNING",
        }
    }

    fn extra(&self, call: &Call) -> Duration {
        let slow = self
            .slow_until
            .lock()
            .unwrap()
            .is_some_and(|until| Utc::now() < until);
        if slow {
            call.between_ms(7, 1000, 3000)
        } else {
            Duration::ZERO
        }
    }

    /// Runs `call`'s behaviour; `(success, message)`.
    async fn work(self: &Arc<Self>, call: Call) -> (bool, String) {
        let mut guard = self.begin(&call);
        let extra = self.extra(&call);
        let success = match call.handler.as_str() {
            "fast" => {
                tokio::time::sleep(call.between_ms(1, 10, 50) + extra).await;
                true
            }
            "slow" => {
                tokio::time::sleep(call.between_ms(2, 500, 4000) + extra).await;
                true
            }
            "flaky" => {
                tokio::time::sleep(call.between_ms(3, 50, 300) + extra).await;
                !call.draw(4).is_multiple_of(3)
            }
            "overrun" => {
                let past = Duration::from_secs(u64::from(call.timeout_seconds) + 3);
                tokio::time::sleep(past + extra).await;
                true
            }
            "stubborn" => {
                let work = call.between_ms(5, 8000, 35_000) + extra;
                let life = self.clone();
                // A blocked thread: no await point, so an abort cannot land before it ends.
                let block = move || {
                    let until = std::time::Instant::now() + work;
                    while std::time::Instant::now() < until && !life.killed.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                };
                if self.sdk {
                    tokio::task::block_in_place(block);
                } else {
                    tokio::task::spawn_blocking(block).await.ok();
                }
                if self.killed.load(Ordering::SeqCst) {
                    guard.outcome = "KILLED";
                    drop(guard);
                    std::future::pending::<()>().await;
                    unreachable!()
                }
                true
            }
            other => return (false, format!("no handler {other}")),
        };
        guard.outcome = if success { "SUCCESS" } else { "FAILED" };
        drop(guard);
        (success, format!("{} on {}", call.handler, self.name))
    }
}

/// One executor across its lives.
pub struct Executor {
    pub name: String,
    pub sdk: bool,
    pub port: u16,
    keep_finished: Option<usize>,
    nacos: String,
    recorder: Arc<Recorder>,
    slow_until: Arc<Mutex<Option<DateTime<Utc>>>>,
    lives: Vec<ExecutorLife>,
    current: Option<Running>,
}

struct Running {
    life: Arc<Life>,
    runtime: Option<tokio::runtime::Runtime>,
    naming: Option<nacos_sdk::api::naming::NamingService>,
}

impl Drop for Running {
    /// Whatever ends a life (a kill, or the test ending) ends everything it runs at once.
    fn drop(&mut self) {
        self.life.killed.store(true, Ordering::SeqCst);
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Executor {
    pub fn new(
        name: &str,
        sdk: bool,
        keep_finished: Option<usize>,
        nacos: &str,
        recorder: Arc<Recorder>,
    ) -> Self {
        Self {
            name: name.into(),
            sdk,
            port: crate::harness::free_port(),
            keep_finished,
            nacos: nacos.into(),
            recorder,
            slow_until: Arc::default(),
            lives: Vec::new(),
            current: None,
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn lives(&self) -> Vec<ExecutorLife> {
        self.lives.clone()
    }

    pub fn is_up(&self) -> bool {
        self.current.is_some()
    }

    /// Starts a new life on the executor's port: a fresh runtime, a fresh SDK (no memory),
    /// registered in Nacos (SDK executors; bare ones are registered once, persistently).
    pub async fn start(&mut self) {
        assert!(self.current.is_none(), "{} is running", self.name);
        let life = Arc::new(Life {
            name: self.name.clone(),
            sdk: self.sdk,
            life: self.lives.len() as u32,
            killed: AtomicBool::new(false),
            slow_until: self.slow_until.clone(),
            recorder: self.recorder.clone(),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("{}-{}", self.name, life.life))
            .enable_all()
            .build()
            .unwrap();
        // The port was just freed by the previous life: wait until it can be bound again.
        let listener = loop {
            match std::net::TcpListener::bind(("127.0.0.1", self.port)) {
                Ok(l) => break l,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        listener.set_nonblocking(true).unwrap();
        let app = if self.sdk {
            sdk_router(life.clone(), self.keep_finished)
        } else {
            bare_router(life.clone())
        };
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let _ = axum::serve(listener, app).await;
        });
        let naming = if self.sdk {
            Some(register(&self.nacos, self.port).await)
        } else {
            None
        };
        self.lives.push(ExecutorLife {
            executor: self.name.clone(),
            life: life.life,
            start: Utc::now(),
            end: None,
        });
        self.current = Some(Running {
            life,
            runtime: Some(runtime),
            naming,
        });
    }

    /// Kills the current life: everything it runs dies at once, its memory is gone, and an
    /// SDK executor leaves Nacos (as a dead process's connection would).
    pub async fn kill(&mut self) {
        let Some(mut running) = self.current.take() else {
            return;
        };
        let naming = running.naming.take();
        drop(running);
        if let Some(last) = self.lives.last_mut() {
            last.end = Some(Utc::now());
        }
        if let Some(naming) = naming {
            let _ = naming
                .deregister_instance(SDK_SERVICE.into(), None, instance(self.port))
                .await;
        }
    }

    /// Every run takes 1-3 s longer until `until`.
    pub fn slow_until(&self, until: DateTime<Utc>) {
        *self.slow_until.lock().unwrap() = Some(until);
    }
}

fn instance(port: u16) -> nacos_sdk::api::naming::ServiceInstance {
    nacos_sdk::api::naming::ServiceInstance {
        instance_id: None,
        ip: "127.0.0.1".into(),
        port: port as i32,
        weight: 1.0,
        healthy: true,
        enabled: true,
        ephemeral: true,
        cluster_name: None,
        service_name: None,
        metadata: Default::default(),
    }
}

async fn register(nacos: &str, port: u16) -> nacos_sdk::api::naming::NamingService {
    let registration = jobflow_executor::nacos::Registration {
        server_addr: nacos.to_string(),
        namespace: String::new(),
        group: None,
        service_name: SDK_SERVICE.into(),
        ip: "127.0.0.1".into(),
        port,
        path_prefix: None,
        username: None,
        password: None,
    };
    for attempt in 0.. {
        match jobflow_executor::nacos::register(&registration).await {
            Ok(n) => return n,
            Err(e) if attempt < 20 => {
                eprintln!("executor registration failed ({e}); trying again");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("executor registration failed: {e}"),
        }
    }
    unreachable!()
}

fn sdk_router(life: Arc<Life>, keep_finished: Option<usize>) -> Router {
    let mut executor = JobExecutor::without_signatures();
    if let Some(n) = keep_finished {
        // Few by count, as many as the default by time: what it remembers must not depend on
        // how many executions it runs.
        executor = executor.keep_finished(jobflow_executor::Keep {
            at_least: n,
            ..jobflow_executor::Keep::default()
        });
    }
    for name in HANDLERS {
        let life = life.clone();
        executor = executor.handler(name, move |ctx: JobContext| {
            let life = life.clone();
            async move {
                let (success, message) = life.work(Call::from_context(&ctx)).await;
                if success {
                    JobResult::success(message)
                } else {
                    JobResult::failure(message)
                }
            }
        });
    }
    executor.router()
}

/// Only the call endpoint. The work goes on when the caller hangs up, as a servlet thread's
/// would; status and cancel are plain 404s.
fn bare_router(life: Arc<Life>) -> Router {
    Router::new().route(
        "/internal/job/{handler}",
        post(move |Path(handler): Path<String>, body: Bytes| {
            let life = life.clone();
            async move {
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let Some(call) = Call::from_body(&handler, &body) else {
                    return (
                        axum::http::StatusCode::BAD_REQUEST,
                        "not a call".to_string(),
                    );
                };
                let work = tokio::spawn(async move { life.work(call).await });
                let (success, message) = work.await.unwrap_or((false, "died".into()));
                (
                    axum::http::StatusCode::OK,
                    json!({"success": success, "message": message}).to_string(),
                )
            }
        }),
    )
}
