//! The executor wire protocol, scheduler side (docs/executor-protocol.md): the
//! call with every header and the JSON body, the status probe and the cancel request, and the
//! classification of what comes back. Nothing else in JobFlow talks HTTP to executors.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use jobflow_executor::protocol::{
    DataRange, ExecutorRequest, ExecutorStatus, FinalStatus, ParsedResult, cancel_path, headers,
    parse_job_result, parse_status_answer, signature, status_path,
};

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
pub struct ExecutorClient {
    http: reqwest::Client,
    path_prefix: String,
    secret: Option<Vec<u8>>,
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
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .pool_idle_timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("jobflow/", env!("CARGO_PKG_VERSION")))
            .build()?;
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

    fn signed(
        &self,
        req: reqwest::RequestBuilder,
        method: &str,
        path: &str,
        trace_id: &str,
        body: &[u8],
    ) -> reqwest::RequestBuilder {
        let req = req.header(headers::TRACE_ID, trace_id);
        match &self.secret {
            Some(secret) => {
                let ts = Utc::now().timestamp();
                req.header(headers::TIMESTAMP, ts).header(
                    headers::SIGNATURE,
                    signature(secret, method, path, ts, trace_id, body),
                )
            }
            None => req,
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
        let addr = instance.addr.as_str();
        let url = format!("http://{addr}{}/{handler}", self.prefix(instance));
        let path = &url["http://".len() + addr.len()..];
        let body = serde_json::to_vec(request).expect("request serialises");
        let r = request;
        let timeout = Duration::from_secs(r.timeout_seconds as u64) + ANSWER_GRACE;
        let span_id: u64 = rand::random::<u64>() | 1;
        let req = self
            .http
            .post(url.as_str())
            .timeout(timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(headers::SHARD_START, r.shard_start)
            .header(headers::SHARD_END, r.shard_end)
            .header(headers::SHARD_COUNT, r.shard_count)
            .header(headers::SHARD_STRATEGY, &r.shard_strategy)
            .header(headers::JOB_NAME, percent_encoded(&r.job_name).as_ref())
            .header(
                headers::EXECUTION_ID,
                percent_encoded(&r.execution_id).as_ref(),
            )
            .header(
                headers::FIRE_TIME,
                r.fire_time.to_rfc3339_opts(SecondsFormat::Secs, true),
            )
            .header(headers::RETRY_COUNT, r.retry_count)
            .header(
                headers::TRACEPARENT,
                format!("00-{}-{span_id:016x}-01", r.trace_id),
            );
        let req = match namespace {
            Some(ns) => req.header(headers::JOB_NAMESPACE, ns),
            None => req,
        };
        let req = self.signed(req, "POST", path, &r.trace_id, &body);
        let no_answer =
            || CallOutcome::NoAnswer(format!("no answer within {}s", timeout.as_secs()));
        let resp = match req.body(body).send().await {
            Ok(resp) => resp,
            Err(e) if e.is_connect() => return CallOutcome::Unreachable(error_chain(&e)),
            Err(e) if e.is_timeout() => return no_answer(),
            Err(e) => return failed(format!("request failed: {}", error_chain(&e))),
        };
        let status = resp.status();
        if status == reqwest::StatusCode::ACCEPTED {
            return CallOutcome::Accepted;
        }
        let status_code = status.as_u16();
        match read_bounded(resp).await {
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
            Err(e) if e.is_timeout() => no_answer(),
            Err(e) => failed(format!("reading the response failed: {}", error_chain(&e))),
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
        let req = self
            .http
            .get(format!("http://{}{path}", instance.addr))
            .timeout(PROBE_TIMEOUT);
        let req = self.signed(req, "GET", &path, trace_id, b"");
        probe(req, since).await
    }

    /// `POST {prefix}/cancel/{traceId}`: asks the executor to stop `trace_id`.
    pub async fn cancel(
        &self,
        instance: &ExecutorInstance,
        trace_id: &str,
        since: DateTime<Utc>,
    ) -> Probe {
        let path = cancel_path(self.prefix(instance), trace_id);
        let req = self
            .http
            .post(format!("http://{}{path}", instance.addr))
            .timeout(STOP_WAIT);
        let req = self.signed(req, "POST", &path, trace_id, b"");
        probe(req, since).await
    }
}

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

async fn probe(req: reqwest::RequestBuilder, since: DateTime<Utc>) -> Probe {
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return Probe::Unreachable(error_chain(&e)),
    };
    let code = resp.status();
    if code.is_server_error() {
        return Probe::Unreachable(format!("HTTP {}", code.as_u16()));
    }
    let text = match read_bounded(resp).await {
        Ok(t) => t,
        Err(e) => return Probe::Unreachable(error_chain(&e)),
    };
    classify_probe(code.as_u16(), &text, since)
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

/// Reads at most `MAX_RESPONSE_BYTES` of the body, however much the executor sends.
async fn read_bounded(mut resp: reqwest::Response) -> Result<String, reqwest::Error> {
    let mut buf = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        let room = MAX_RESPONSE_BYTES - buf.len();
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if buf.len() >= MAX_RESPONSE_BYTES {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
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
