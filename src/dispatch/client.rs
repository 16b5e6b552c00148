//! The executor wire protocol, scheduler side (docs/executor-protocol.md): the
//! call with every header and the JSON body, the status probe and the cancel request, and the
//! classification of what comes back. Nothing else in JobFlow talks HTTP to executors.

use std::time::Duration;

use chrono::{DateTime, Utc};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue, USER_AGENT};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use jobflow_executor::protocol::{
    DataRange, ExecutorRequest, ExecutorStatus, FinalStatus, ParsedResult, cancel_path, headers,
    parse_job_result, parse_status_answer, signature, status_path,
};
use tokio::time::{Instant, timeout_at};

use crate::discovery::ExecutorInstance;
use crate::jobs::log::LogBatch;
use crate::jobs::{Execution, ExecutionStatus, JobDefinition, percent_encoded};

pub use jobflow_executor::protocol::excerpt;

/// At most this much of an executor's response is read; the rest is discarded unread.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// How long a status probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a cancel request may take. An executor answers once the handler has stopped, or
/// `RUNNING` after at most 10 s (docs/executor-protocol.md): the answer is waited for, so a
/// handler slow to stop reads as running, never as unreachable.
pub const STOP_WAIT: Duration = Duration::from_secs(15);
/// The SDK stops a handler at `timeoutSeconds` and answers; the scheduler waits this much
/// longer before it gives up on the answer, so the executor's own verdict normally wins.
pub const ANSWER_GRACE: Duration = Duration::from_secs(5);
/// How long a connection to an executor may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// An idle pooled connection is closed after this long.
const POOL_IDLE: Duration = Duration::from_secs(30);

/// What one call came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// The connection could not be made: try the next executor instance.
    Unreachable(String),
    /// 202: the executor runs the job and reports later.
    Accepted,
    /// The executor answered with a verdict, and perhaps with the rest of the handler's log.
    Finished {
        status: ExecutionStatus,
        message: Option<String>,
        error: Option<String>,
        log: Option<LogBatch>,
    },
    /// No answer within the timeout: the handler may still be running.
    NoAnswer(String),
}

/// What an executor says about one execution (status probe or cancel request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    Running,
    Finished {
        status: ExecutionStatus,
        message: Option<String>,
    },
    /// The executor does not know the execution. `restarted` when its process started after
    /// `since` (it lost the execution); otherwise it never received it.
    Unknown {
        restarted: bool,
    },
    /// The executor has no such endpoint (a minimal executor): nothing can be learnt.
    Unsupported,
    /// No answer (connection refused, timeout, 5xx).
    Unreachable(String),
}

impl Probe {
    /// Whether the execution runs no more at the executor: it finished, or the executor does
    /// not have it. An executor without the endpoint cannot tell, and counts as stopped: the
    /// documented exception of bare executors.
    pub fn stopped(&self) -> bool {
        matches!(
            self,
            Self::Finished { .. } | Self::Unknown { .. } | Self::Unsupported
        )
    }
}

/// Sends calls, status probes and cancel requests, signed when a secret is configured.
///
/// Plain HTTP/1.1 through hyper's pooled client: executors are reached by address inside the
/// service network, so there is no TLS, redirect or proxy to follow, and at thousands of calls
/// a second what a general-purpose client adds per call is CPU the fire path does not have
/// (docs/benchmarks.md, "What one call costs the client").
pub struct ExecutorClient {
    http: Client<HttpConnector, Full<Bytes>>,
    path_prefix: String,
    secret: Option<Vec<u8>>,
}

/// Why an exchange with an executor gave no answer.
enum Failure {
    /// The connection could not be made.
    Connect(String),
    /// The deadline passed before the answer was read in full.
    Timeout,
    /// The request failed after the connection was made.
    Send(String),
    /// The answer's body could not be read.
    Read(String),
}

impl ExecutorClient {
    /// The client `[executor]` describes: its path prefix and signing secret.
    pub fn configured(settings: &crate::config::ExecutorSettings) -> anyhow::Result<Self> {
        let secret = settings.signing_secret.as_ref();
        Self::new(
            settings.path_prefix.clone(),
            secret.map(|s| s.expose().as_bytes().to_vec()),
        )
    }

    pub fn new(path_prefix: String, secret: Option<Vec<u8>>) -> anyhow::Result<Self> {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Ok(Self {
            http,
            path_prefix,
            secret,
        })
    }

    /// The path prefix of `instance`: its own (from its Nacos metadata) wins over the
    /// configured one.
    fn prefix<'a>(&'a self, instance: &'a ExecutorInstance) -> &'a str {
        instance.path_prefix.as_deref().unwrap_or(&self.path_prefix)
    }

    /// A request to `path` on `instance` for `trace_id`, with the headers every request
    /// carries: the user agent, the trace id, and the signature when a secret is configured.
    fn request(
        &self,
        method: Method,
        instance: &ExecutorInstance,
        path: &str,
        trace_id: &str,
        body: &[u8],
    ) -> hyper::http::request::Builder {
        let n = &*NAMES;
        let req = Request::builder()
            .method(method.clone())
            .uri(format!("http://{}{path}", instance.addr))
            .header(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE))
            .header(&n.trace_id, trace_id);
        match &self.secret {
            Some(secret) => {
                let ts = Utc::now().timestamp();
                req.header(&n.timestamp, ts).header(
                    &n.signature,
                    signature(secret, method.as_str(), path, ts, trace_id, body),
                )
            }
            None => req,
        }
    }

    /// Sends `req` and waits for its answer's status until `deadline`.
    async fn send(
        &self,
        req: Result<Request<Full<Bytes>>, hyper::http::Error>,
        deadline: Instant,
    ) -> Result<Response<Incoming>, Failure> {
        let req = req.map_err(|e| Failure::Send(error_chain(&e)))?;
        match timeout_at(deadline, self.http.request(req)).await {
            Err(_) => Err(Failure::Timeout),
            Ok(Err(e)) if e.is_connect() => Err(Failure::Connect(error_chain(&e))),
            Ok(Err(e)) => Err(Failure::Send(error_chain(&e))),
            Ok(Ok(resp)) => Ok(resp),
        }
    }

    /// Calls `handler` on `instance` for `request`, waiting up to the job's timeout plus
    /// [`ANSWER_GRACE`]. `namespace` is the job's when it is not `default`.
    pub async fn call(
        &self,
        instance: &ExecutorInstance,
        handler: &str,
        namespace: Option<&str>,
        request: &ExecutorRequest,
    ) -> CallOutcome {
        let path = format!("{}/{handler}", self.prefix(instance));
        let body = serde_json::to_vec(request).expect("request serialises");
        let r = request;
        let timeout = Duration::from_secs(r.timeout_seconds as u64) + ANSWER_GRACE;
        let deadline = Instant::now() + timeout;
        let span_id: u64 = rand::random::<u64>() | 1;
        let n = &*NAMES;
        let req = self
            .request(Method::POST, instance, &path, &r.trace_id, &body)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(&n.shard_start, r.shard_start)
            .header(&n.shard_end, r.shard_end)
            .header(&n.shard_count, r.shard_count)
            .header(&n.shard_strategy, &r.shard_strategy)
            .header(&n.job_name, percent_encoded(&r.job_name).as_ref())
            .header(&n.execution_id, percent_encoded(&r.execution_id).as_ref())
            .header(
                &n.fire_time,
                jobflow_executor::protocol::instant::rfc3339_seconds(r.fire_time),
            )
            .header(&n.retry_count, r.retry_count)
            .header(
                &n.traceparent,
                format!("00-{}-{span_id:016x}-01", r.trace_id),
            );
        let req = match namespace {
            Some(ns) => req.header(&n.job_namespace, ns),
            None => req,
        };
        let no_answer =
            || CallOutcome::NoAnswer(format!("no answer within {}s", timeout.as_secs()));
        let resp = match self.send(req.body(Full::from(body)), deadline).await {
            Ok(resp) => resp,
            Err(Failure::Connect(e)) => return CallOutcome::Unreachable(e),
            Err(Failure::Timeout) => return no_answer(),
            Err(Failure::Send(e) | Failure::Read(e)) => {
                return failed(format!("request failed: {e}"));
            }
        };
        let status = resp.status();
        if status == StatusCode::ACCEPTED {
            return CallOutcome::Accepted;
        }
        let status_code = status.as_u16();
        match read_bounded(resp, deadline).await {
            Ok(text) => match parse_job_result(status_code, &text) {
                ParsedResult::Accepted => CallOutcome::Accepted,
                ParsedResult::Finished {
                    status,
                    message,
                    error,
                } => CallOutcome::Finished {
                    status: execution_status(status),
                    message,
                    error,
                    log: carried_log(status_code, &text),
                },
            },
            Err(Failure::Timeout) => no_answer(),
            Err(Failure::Connect(e) | Failure::Send(e) | Failure::Read(e)) => {
                failed(format!("reading the response failed: {e}"))
            }
        }
    }

    /// `GET {prefix}/status/{traceId}`: what the executor knows of `trace_id`, called at
    /// `since`.
    pub async fn status(
        &self,
        instance: &ExecutorInstance,
        trace_id: &str,
        since: DateTime<Utc>,
    ) -> Probe {
        let path = status_path(self.prefix(instance), trace_id);
        let req = self.request(Method::GET, instance, &path, trace_id, b"");
        self.probe(req, PROBE_TIMEOUT, since).await
    }

    /// `POST {prefix}/cancel/{traceId}`: asks the executor to stop `trace_id`.
    pub async fn cancel(
        &self,
        instance: &ExecutorInstance,
        trace_id: &str,
        since: DateTime<Utc>,
    ) -> Probe {
        let path = cancel_path(self.prefix(instance), trace_id);
        let req = self.request(Method::POST, instance, &path, trace_id, b"");
        self.probe(req, STOP_WAIT, since).await
    }

    async fn probe(
        &self,
        req: hyper::http::request::Builder,
        timeout: Duration,
        since: DateTime<Utc>,
    ) -> Probe {
        let deadline = Instant::now() + timeout;
        let unreachable = |why: Failure| {
            Probe::Unreachable(match why {
                Failure::Timeout => format!("no answer within {}s", timeout.as_secs()),
                Failure::Connect(e) | Failure::Send(e) | Failure::Read(e) => e,
            })
        };
        let resp = match self.send(req.body(Full::default()), deadline).await {
            Ok(r) => r,
            Err(why) => return unreachable(why),
        };
        let code = resp.status();
        if code.is_server_error() {
            return Probe::Unreachable(format!("HTTP {}", code.as_u16()));
        }
        match read_bounded(resp, deadline).await {
            Ok(text) => classify_probe(code.as_u16(), &text, since),
            Err(why) => unreachable(why),
        }
    }
}

/// The protocol's header names, parsed once: a name given as text is parsed (checked and
/// lower-cased) at every call, a dozen times a call.
struct Names {
    trace_id: HeaderName,
    timestamp: HeaderName,
    signature: HeaderName,
    shard_start: HeaderName,
    shard_end: HeaderName,
    shard_count: HeaderName,
    shard_strategy: HeaderName,
    job_name: HeaderName,
    job_namespace: HeaderName,
    execution_id: HeaderName,
    fire_time: HeaderName,
    retry_count: HeaderName,
    traceparent: HeaderName,
}

static NAMES: std::sync::LazyLock<Names> = std::sync::LazyLock::new(|| {
    let name = |text: &str| HeaderName::try_from(text).expect("a protocol header name");
    Names {
        trace_id: name(headers::TRACE_ID),
        timestamp: name(headers::TIMESTAMP),
        signature: name(headers::SIGNATURE),
        shard_start: name(headers::SHARD_START),
        shard_end: name(headers::SHARD_END),
        shard_count: name(headers::SHARD_COUNT),
        shard_strategy: name(headers::SHARD_STRATEGY),
        job_name: name(headers::JOB_NAME),
        job_namespace: name(headers::JOB_NAMESPACE),
        execution_id: name(headers::EXECUTION_ID),
        fire_time: name(headers::FIRE_TIME),
        retry_count: name(headers::RETRY_COUNT),
        traceparent: name(headers::TRACEPARENT),
    }
});

const USER_AGENT_VALUE: &str = concat!("jobflow/", env!("CARGO_PKG_VERSION"));

/// The body of the call for execution `e` of `job`, reporting to `report_url`. The row's own
/// `jobParams` (a manual trigger's, carried by its retries) win over the job's.
pub fn executor_request(e: &Execution, job: &JobDefinition, report_url: String) -> ExecutorRequest {
    let spec = &job.spec;
    ExecutorRequest {
        trace_id: e.trace_id.clone(),
        execution_id: e.execution_id.clone(),
        // The executor knows the job by its name; the namespace goes in its own header.
        job_name: crate::jobs::local_name(&e.job_name).to_string(),
        handler: spec.handler.to_string(),
        trigger_type: e.trigger_type.as_str().to_string(),
        fire_time: e.fire_time,
        shard_start: e.shard_start,
        shard_end: e.shard_end,
        shard_count: e.shard_count,
        shard_strategy: spec.shard_strategy.as_str().to_string(),
        retry_count: e.retry_count,
        timeout_seconds: spec.timeout_seconds,
        job_params: e.job_params.clone().or_else(|| spec.job_params.clone()),
        data_range: spec
            .shard_params
            .data_range(e.shard_start, e.shard_end, e.shard_count)
            .map(|(start, end)| DataRange { start, end }),
        shard_items: spec.shard_params.items_in(e.shard_start, e.shard_end),
        report_url,
    }
}

/// Classifies a status or cancel answer (read by the SDK's shared parser); see [`Probe`].
pub fn classify_probe(code: u16, body: &str, since: DateTime<Utc>) -> Probe {
    match parse_status_answer(code, body) {
        Ok(ExecutorStatus::Running) => Probe::Running,
        Ok(ExecutorStatus::Finished(status, message)) => Probe::Finished {
            status: execution_status(status),
            message,
        },
        // Forgotten is not "never had it": nothing can be learnt.
        Ok(ExecutorStatus::Unknown {
            remembered_since: Some(remembered),
            ..
        }) if remembered > since => Probe::Unsupported,
        Ok(ExecutorStatus::Unknown { started_at, .. }) => Probe::Unknown {
            restarted: started_at > since,
        },
        Err(_) => Probe::Unsupported,
    }
}

/// The log a 2xx answer carries in its `logs` field (docs/executor-protocol.md, "Shipping
/// logs"): the lines the handler logged that its executor had not shipped, with the log's
/// end. An answer whose `logs` is not a log batch keeps its verdict; its lines are lost, and
/// a warning says so.
fn carried_log(status_code: u16, body: &str) -> Option<LogBatch> {
    #[derive(serde::Deserialize)]
    struct Carrier {
        logs: Option<LogBatch>,
    }
    if !(200..300).contains(&status_code) || !body.contains("\"logs\"") {
        return None;
    }
    match serde_json::from_str::<Carrier>(body) {
        Ok(carrier) => carrier.logs,
        Err(e) => {
            tracing::warn!(error = %e, "the answer's logs are not a log batch; they are not kept");
            None
        }
    }
}

fn execution_status(s: FinalStatus) -> ExecutionStatus {
    match s {
        FinalStatus::Success => ExecutionStatus::Success,
        FinalStatus::Failed => ExecutionStatus::Failed,
        FinalStatus::Timeout => ExecutionStatus::Timeout,
        FinalStatus::Cancelled => ExecutionStatus::Cancelled,
    }
}

fn failed(error: String) -> CallOutcome {
    CallOutcome::Finished {
        status: ExecutionStatus::Failed,
        message: None,
        error: Some(error),
        log: None,
    }
}

/// Reads at most `MAX_RESPONSE_BYTES` of the body until `deadline`, however much the executor
/// sends.
async fn read_bounded(resp: Response<Incoming>, deadline: Instant) -> Result<String, Failure> {
    let read = async {
        let mut body = resp.into_body();
        let mut buf = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| Failure::Read(error_chain(&e)))?;
            let Some(chunk) = frame.data_ref() else {
                continue;
            };
            let room = MAX_RESPONSE_BYTES - buf.len();
            buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if buf.len() >= MAX_RESPONSE_BYTES {
                break;
            }
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    };
    timeout_at(deadline, read)
        .await
        .unwrap_or(Err(Failure::Timeout))
}

/// An error with its causes, `: `-separated (HTTP clients' own text names the request only).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ExecutionStatus::Success;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    fn instance(addr: std::net::SocketAddr) -> ExecutorInstance {
        ExecutorInstance {
            addr: crate::jobs::InstanceAddr::parse(&addr.to_string()).unwrap(),
            path_prefix: None,
        }
    }

    fn request() -> ExecutorRequest {
        ExecutorRequest {
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            execution_id: "bericht-ü:20260101030000:0-1".into(),
            job_name: "bericht-ü".into(),
            handler: "h".into(),
            trigger_type: "CRON".into(),
            fire_time: "2026-01-01T03:00:00Z".parse().unwrap(),
            shard_start: 0,
            shard_end: 1,
            shard_count: 4,
            shard_strategy: "MOD_HASH".into(),
            retry_count: 2,
            timeout_seconds: 0,
            job_params: None,
            data_range: None,
            shard_items: None,
            report_url: "http://127.0.0.1:1/r".into(),
        }
    }

    /// Reads one request (its head, then the body its `content-length` names).
    async fn read_request(conn: &mut TcpStream) -> (String, Vec<u8>) {
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = conn.read(&mut buf).await.unwrap();
            raw.extend_from_slice(&buf[..n]);
            let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8(raw[..end].to_vec()).unwrap();
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_string)
                })
                .map_or(0, |n| n.parse::<usize>().unwrap());
            if raw.len() >= end + 4 + len {
                return (head, raw[end + 4..end + 4 + len].to_vec());
            }
        }
    }

    /// An executor that answers one request with `answer` and hands the request back.
    async fn answering(
        answer: &'static [u8],
    ) -> (ExecutorInstance, tokio::task::JoinHandle<(String, Vec<u8>)>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = instance(listener.local_addr().unwrap());
        let served = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let request = read_request(&mut conn).await;
            conn.write_all(answer).await.unwrap();
            request
        });
        (at, served)
    }

    fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
        head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(": ")?;
            n.eq_ignore_ascii_case(name).then_some(v)
        })
    }

    #[tokio::test]
    async fn a_call_carries_the_protocols_headers_body_and_signature() {
        let (at, served) = answering(
            b"HTTP/1.1 200 OK\r\ncontent-length: 31\r\n\r\n{\"success\":true,\"message\":\"ok\"}",
        )
        .await;
        let client = ExecutorClient::new("/jobs".into(), Some(b"s3cret".to_vec())).unwrap();
        let outcome = client.call(&at, "h", Some("team-a"), &request()).await;
        assert_eq!(
            outcome,
            CallOutcome::Finished {
                status: Success,
                message: Some("ok".into()),
                error: None,
                log: None
            }
        );
        let (head, body) = served.await.unwrap();
        assert_eq!(head.lines().next(), Some("POST /jobs/h HTTP/1.1"));
        let r = request();
        let want = [
            (headers::TRACE_ID, r.trace_id.as_str()),
            (headers::SHARD_START, "0"),
            (headers::SHARD_END, "1"),
            (headers::SHARD_COUNT, "4"),
            (headers::SHARD_STRATEGY, "MOD_HASH"),
            (headers::JOB_NAME, "bericht-%C3%BC"),
            (headers::JOB_NAMESPACE, "team-a"),
            (headers::EXECUTION_ID, "bericht-%C3%BC:20260101030000:0-1"),
            (headers::FIRE_TIME, "2026-01-01T03:00:00Z"),
            (headers::RETRY_COUNT, "2"),
            ("content-type", "application/json"),
            ("user-agent", USER_AGENT_VALUE),
            ("host", at.addr.as_str()),
        ];
        for (name, value) in want {
            assert_eq!(header(&head, name), Some(value), "{name} in {head}");
        }
        let traceparent = header(&head, headers::TRACEPARENT).unwrap();
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(
            (parts[0], parts[1], parts[3]),
            ("00", r.trace_id.as_str(), "01")
        );
        assert_eq!(parts[2].len(), 16, "{traceparent}");
        assert_eq!(serde_json::from_slice::<ExecutorRequest>(&body).unwrap(), r);
        let ts: i64 = header(&head, headers::TIMESTAMP).unwrap().parse().unwrap();
        assert_eq!(
            header(&head, headers::SIGNATURE),
            Some(signature(b"s3cret", "POST", "/jobs/h", ts, &r.trace_id, &body).as_str())
        );
    }

    #[tokio::test]
    async fn an_answer_is_read_to_its_bound_and_no_further() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = instance(listener.local_addr().unwrap());
        // A body that never ends: the call returns once it has read its bound.
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            read_request(&mut conn).await;
            let head = b"HTTP/1.1 500 Internal Server Error\r\ntransfer-encoding: chunked\r\n\r\n";
            conn.write_all(head).await.unwrap();
            let chunk = format!("4000\r\n{}\r\n", "x".repeat(0x4000));
            while conn.write_all(chunk.as_bytes()).await.is_ok() {}
        });
        let client = ExecutorClient::new(String::new(), None).unwrap();
        let CallOutcome::Finished { status, error, .. } =
            client.call(&at, "h", None, &request()).await
        else {
            panic!("a verdict, not a wait for the end of the body");
        };
        assert_eq!(status, ExecutionStatus::Failed);
        assert!(error.unwrap().starts_with("HTTP 500: xxx"));
    }

    #[tokio::test]
    async fn a_refused_connection_is_unreachable_and_a_5xx_probe_too() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let closed = instance(listener.local_addr().unwrap());
        drop(listener);
        let client = ExecutorClient::new(String::new(), None).unwrap();
        let outcome = client.call(&closed, "h", None, &request()).await;
        assert!(
            matches!(outcome, CallOutcome::Unreachable(_)),
            "{outcome:?}"
        );
        let since = Utc::now();
        let probe = client.status(&closed, "t", since).await;
        assert!(matches!(probe, Probe::Unreachable(_)), "{probe:?}");

        let (at, served) =
            answering(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n").await;
        let probe = client.cancel(&at, "t-1", since).await;
        assert_eq!(probe, Probe::Unreachable("HTTP 503".into()));
        let (head, _) = served.await.unwrap();
        assert_eq!(head.lines().next(), Some("POST /cancel/t-1 HTTP/1.1"));
    }

    #[tokio::test]
    async fn a_status_probe_reads_the_executors_answer() {
        let (at, served) = answering(
            b"HTTP/1.1 200 OK\r\ncontent-length: 69\r\n\r\n{\"traceId\":\"t\",\"status\":\"RUNNING\",\"startedAt\":\"2026-01-01T00:00:00Z\"}",
        )
        .await;
        let client = ExecutorClient::new("/jobs".into(), None).unwrap();
        assert_eq!(client.status(&at, "t", Utc::now()).await, Probe::Running);
        let (head, body) = served.await.unwrap();
        assert_eq!(head.lines().next(), Some("GET /jobs/status/t HTTP/1.1"));
        assert!(body.is_empty());
    }

    #[test]
    fn a_probe_tells_never_had_it_from_restarted() {
        let call = "2026-01-01T00:00:10Z".parse().unwrap();
        let before = r#"{"traceId":"t","status":"UNKNOWN","startedAt":"2026-01-01T00:00:00Z"}"#;
        let after = r#"{"traceId":"t","status":"UNKNOWN","startedAt":"2026-01-01T00:00:20Z"}"#;
        assert_eq!(
            classify_probe(404, before, call),
            Probe::Unknown { restarted: false }
        );
        assert_eq!(
            classify_probe(404, after, call),
            Probe::Unknown { restarted: true }
        );
        assert_eq!(classify_probe(404, "Not Found", call), Probe::Unsupported);
        let running = r#"{"traceId":"t","status":"RUNNING","startedAt":"2026-01-01T00:00:00Z"}"#;
        assert_eq!(classify_probe(200, running, call), Probe::Running);
        let done = r#"{"traceId":"t","status":"SUCCESS","message":"m","startedAt":"2026-01-01T00:00:00Z"}"#;
        assert_eq!(
            classify_probe(200, done, call),
            Probe::Finished {
                status: Success,
                message: Some("m".into())
            }
        );
    }
}
