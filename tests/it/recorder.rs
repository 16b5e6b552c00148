//! A recording executor: a small axum server on 127.0.0.1:0 that stores every call the
//! dispatcher makes and answers as the test tells it to.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct RecordedCall {
    pub handler: String,
    pub headers: BTreeMap<String, String>,
    pub body: Value,
    pub received_at: DateTime<Utc>,
}

impl RecordedCall {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
            .unwrap_or("")
    }

    pub fn trace_id(&self) -> &str {
        self.header("x-trace-id")
    }

    pub fn range(&self) -> (u32, u32) {
        (
            self.header("x-shard-start").parse().unwrap(),
            self.header("x-shard-end").parse().unwrap(),
        )
    }
}

/// How the executor answers a call.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    pub delay: Duration,
}

impl Reply {
    pub fn ok() -> Self {
        Self {
            status: 200,
            body: r#"{"success": true, "message": "done"}"#.into(),
            delay: Duration::ZERO,
        }
    }
    pub fn status(status: u16, body: &str) -> Self {
        Self {
            status,
            body: body.into(),
            delay: Duration::ZERO,
        }
    }
    pub fn slow(delay: Duration) -> Self {
        Self {
            delay,
            ..Self::ok()
        }
    }
}

type Behaviour = Arc<dyn Fn(&RecordedCall) -> Reply + Send + Sync>;

#[derive(Clone)]
struct Shared {
    calls: Arc<Mutex<Vec<RecordedCall>>>,
    behaviour: Arc<Mutex<Behaviour>>,
    status: Arc<Mutex<Option<Value>>>,
    cancels: Arc<Mutex<Vec<String>>>,
    /// Set for an executor that remembers its runs, as every SDK does: the status of a trace
    /// id it was called for, by trace id (RUNNING until its reply, then its verdict).
    memory: Option<Arc<Mutex<BTreeMap<String, &'static str>>>>,
}

pub struct Recorder {
    pub addr: String,
    shared: Shared,
    stop: CancellationToken,
}

impl Recorder {
    pub async fn start() -> Self {
        Self::with(|_| Reply::ok()).await
    }

    pub async fn with(behaviour: impl Fn(&RecordedCall) -> Reply + Send + Sync + 'static) -> Self {
        Self::serve(Shared {
            calls: Arc::default(),
            behaviour: Arc::new(Mutex::new(Arc::new(behaviour))),
            status: Arc::default(),
            cancels: Arc::default(),
            memory: None,
        })
        .await
    }

    /// Answers every call at once, and its status from the memory of its runs, as the SDKs
    /// do (docs/executor-protocol.md): asked about a trace id it was called for, it answers
    /// RUNNING or the verdict it replied with; 404 only for one it never had. A scheduler that
    /// died between a call and writing RUNNING is then not called again by compensation.
    #[allow(dead_code, reason = "used by the cluster suite")]
    pub async fn remembering() -> Self {
        Self::serve(Shared {
            calls: Arc::default(),
            behaviour: Arc::new(Mutex::new(Arc::new(|_: &RecordedCall| Reply::ok()))),
            status: Arc::default(),
            cancels: Arc::default(),
            memory: Some(Arc::default()),
        })
        .await
    }

    async fn serve(shared: Shared) -> Self {
        let app = Router::new()
            .route("/internal/job/status/{trace}", get(status))
            .route("/internal/job/cancel/{trace}", post(cancel))
            .route("/internal/job/{handler}", post(call))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = CancellationToken::new();
        let token = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { token.cancelled().await })
                .await
                .unwrap();
        });
        Self { addr, shared, stop }
    }

    /// Answers calls of `handler` after `delay` (a run that lasts), others at once.
    pub async fn slow_for(handler: &'static str, delay: Duration) -> Self {
        Self::with(move |c| {
            if c.handler == handler {
                Reply::slow(delay)
            } else {
                Reply::ok()
            }
        })
        .await
    }

    pub fn calls(&self) -> Vec<RecordedCall> {
        self.shared.calls.lock().unwrap().clone()
    }

    /// What `GET /internal/job/status/{traceId}` answers (404 while `None`).
    /// Trace ids the scheduler asked this executor to stop.
    pub fn cancels(&self) -> Vec<String> {
        self.shared.cancels.lock().unwrap().clone()
    }

    pub fn set_status_answer(&self, answer: Option<Value>) {
        *self.shared.status.lock().unwrap() = answer;
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn call(
    State(s): State<Shared>,
    Path(handler): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let rec = RecordedCall {
        handler,
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        received_at: Utc::now(),
    };
    let behaviour = s.behaviour.lock().unwrap().clone();
    let reply = behaviour(&rec);
    let trace = rec.trace_id().to_string();
    s.calls.lock().unwrap().push(rec);
    if let Some(memory) = &s.memory {
        memory.lock().unwrap().insert(trace.clone(), "RUNNING");
    }
    tokio::time::sleep(reply.delay).await;
    if let Some(memory) = &s.memory {
        let success = reply.status == 200
            && serde_json::from_str::<Value>(&reply.body)
                .is_ok_and(|b| b["success"] == Value::Bool(true));
        let verdict = if success { "SUCCESS" } else { "FAILED" };
        memory.lock().unwrap().insert(trace, verdict);
    }
    (StatusCode::from_u16(reply.status).unwrap(), reply.body)
}

/// Cancel requests are recorded and confirmed, as the SDK does for an execution it runs.
async fn cancel(State(s): State<Shared>, Path(trace): Path<String>) -> (StatusCode, String) {
    s.cancels.lock().unwrap().push(trace.clone());
    let answer = serde_json::json!({"traceId": trace, "status": "CANCELLED", "startedAt": "2020-01-01T00:00:00Z"});
    (StatusCode::OK, answer.to_string())
}

/// The status answer set by the test, completed with the fields every SDK answer carries.
async fn status(State(s): State<Shared>, Path(trace): Path<String>) -> (StatusCode, String) {
    match s.status.lock().unwrap().clone() {
        Some(mut v) => {
            v["traceId"] = Value::String(trace);
            if v.get("startedAt").is_none() {
                v["startedAt"] = Value::String("2020-01-01T00:00:00Z".into());
            }
            // As the SDK answers for an execution it does not know.
            let code = if v["status"] == "UNKNOWN" {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::OK
            };
            (code, v.to_string())
        }
        None => {
            let remembered = s
                .memory
                .as_ref()
                .and_then(|m| m.lock().unwrap().get(&trace).copied());
            match remembered {
                Some(status) => {
                    let answer = serde_json::json!({"traceId": trace, "status": status,
                        "message": "remembered", "startedAt": "2020-01-01T00:00:00Z"});
                    (StatusCode::OK, answer.to_string())
                }
                None => (StatusCode::NOT_FOUND, String::new()),
            }
        }
    }
}

/// An address where nothing listens: connections are refused.
pub async fn dead_address() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    addr
}
