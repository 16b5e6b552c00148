//! The executor wire protocol, scheduler side (SPEC §6.4–6.5, docs/executor-protocol.md): the
//! call with every header and the JSON body, the status probe and the cancel request, and the
//! classification of what comes back. Nothing else in JobFlow talks HTTP to executors.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use jobflow_executor::protocol::{DataRange, ExecutorRequest, headers, signature};
use serde::Deserialize;

use crate::discovery::ExecutorInstance;
use crate::jobs::{Execution, ExecutionStatus, JobDefinition};

/// At most this much of an executor's response is read; the rest is discarded unread.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Stored excerpts of bodies and errors are cut to this many characters.
const EXCERPT_CHARS: usize = 1000;
/// How long a status probe or a cancel request may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
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
    /// The executor answered with a verdict.
    Finished {
        status: ExecutionStatus,
        message: Option<String>,
        error: Option<String>,
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

/// Sends calls, status probes and cancel requests, signed when a secret is configured.
pub struct ExecutorClient {
    http: reqwest::Client,
    path_prefix: String,
    secret: Option<Vec<u8>>,
}

impl ExecutorClient {
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

    /// `http://ip:port` and the path of `endpoint` (a handler, `status/{trace}`, …) on
    /// `instance`, whose own prefix (from its Nacos metadata) wins over the configured one.
    fn url(&self, instance: &ExecutorInstance, endpoint: &str) -> (String, String) {
        let prefix = instance.path_prefix.as_deref().unwrap_or(&self.path_prefix);
        (
            format!("http://{}", instance.addr),
            format!("{prefix}/{endpoint}"),
        )
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
    /// [`ANSWER_GRACE`].
    pub async fn call(
        &self,
        instance: &ExecutorInstance,
        handler: &str,
        request: &ExecutorRequest,
    ) -> CallOutcome {
        let (base, path) = self.url(instance, handler);
        let body = serde_json::to_vec(request).expect("request serialises");
        let r = request;
        let timeout = Duration::from_secs(r.timeout_seconds as u64) + ANSWER_GRACE;
        let span_id: u64 = rand::random::<u64>() | 1;
        let req = self
            .http
            .post(format!("{base}{path}"))
            .timeout(timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(headers::SHARD_START, r.shard_start)
            .header(headers::SHARD_END, r.shard_end)
            .header(headers::SHARD_COUNT, r.shard_count)
            .header(headers::SHARD_STRATEGY, &r.shard_strategy)
            .header(headers::JOB_NAME, &r.job_name)
            .header(headers::EXECUTION_ID, &r.execution_id)
            .header(
                headers::FIRE_TIME,
                r.fire_time.to_rfc3339_opts(SecondsFormat::Secs, true),
            )
            .header(headers::RETRY_COUNT, r.retry_count)
            .header(
                headers::TRACEPARENT,
                format!("00-{}-{span_id:016x}-01", r.trace_id),
            );
        let req = self.signed(req, "POST", &path, &r.trace_id, &body);
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
        match read_bounded(resp).await {
            Ok(text) => classify_answer(status.as_u16(), &text),
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
        let (base, path) = self.url(instance, &format!("status/{trace_id}"));
        let req = self
            .http
            .get(format!("{base}{path}"))
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
        let (base, path) = self.url(instance, &format!("cancel/{trace_id}"));
        let req = self
            .http
            .post(format!("{base}{path}"))
            .timeout(PROBE_TIMEOUT);
        let req = self.signed(req, "POST", &path, trace_id, b"");
        probe(req, since).await
    }
}

/// The body of the call for execution `e` of `job`, reporting to `report_url`.
pub fn executor_request(e: &Execution, job: &JobDefinition, report_url: String) -> ExecutorRequest {
    let spec = &job.spec;
    ExecutorRequest {
        trace_id: e.trace_id.clone(),
        execution_id: e.execution_id.clone(),
        job_name: e.job_name.clone(),
        handler: spec.handler.to_string(),
        trigger_type: e.trigger_type.as_str().to_string(),
        fire_time: e.fire_time,
        shard_start: e.shard_start,
        shard_end: e.shard_end,
        shard_count: e.shard_count,
        shard_strategy: spec.shard_strategy.as_str().to_string(),
        retry_count: e.retry_count,
        timeout_seconds: spec.timeout_seconds,
        job_params: spec.job_params.clone(),
        data_range: spec
            .shard_params
            .data_range(e.shard_start, e.shard_end, e.shard_count)
            .map(|(start, end)| DataRange { start, end }),
        shard_items: spec.shard_params.items_in(e.shard_start, e.shard_end),
        report_url,
    }
}

/// A JobResult as executors send it; `success` must be a boolean, `status` (when present)
/// is the SDK's precise verdict.
#[derive(Debug, Deserialize)]
struct JobResult {
    success: serde_json::Value,
    message: Option<String>,
    status: Option<String>,
}

/// Classifies a non-202 answer (SPEC §6.5, docs/executor-protocol.md): an empty 2xx is a
/// success; a 2xx must otherwise be a JobResult whose `success` is a boolean, or it is a
/// failure saying so (a misbehaving executor never counts as a success); other statuses fail
/// with an excerpt of the body.
pub fn classify_answer(status: u16, body: &str) -> CallOutcome {
    if !(200..300).contains(&status) {
        return failed(format!("HTTP {status}: {}", excerpt(body)));
    }
    if body.trim().is_empty() {
        return CallOutcome::Finished {
            status: ExecutionStatus::Success,
            message: None,
            error: None,
        };
    }
    let parsed = serde_json::from_str::<JobResult>(body).ok();
    let Some((success, result)) = parsed.and_then(|r| r.success.as_bool().map(|b| (b, r))) else {
        return failed(format!(
            "the executor answered HTTP {status} with a body that is not a JobResult \
             (`success` must be a boolean): {}",
            excerpt(body)
        ));
    };
    let verdict = match result.status.as_deref() {
        Some("TIMEOUT") => ExecutionStatus::Timeout,
        Some("CANCELLED") => ExecutionStatus::Cancelled,
        Some("FAILED") => ExecutionStatus::Failed,
        Some("SUCCESS") => ExecutionStatus::Success,
        _ if success => ExecutionStatus::Success,
        _ => ExecutionStatus::Failed,
    };
    let message = result.message.map(|m| excerpt(&m));
    if verdict == ExecutionStatus::Success {
        CallOutcome::Finished {
            status: verdict,
            message,
            error: None,
        }
    } else {
        CallOutcome::Finished {
            status: verdict,
            message: None,
            error: Some(message.unwrap_or_else(|| "the executor reported failure".into())),
        }
    }
}

/// The status endpoint's answer (and the cancel endpoint's).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusBody {
    status: String,
    message: Option<String>,
    started_at: Option<DateTime<Utc>>,
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

/// Classifies a status or cancel answer; see [`Probe`].
pub fn classify_probe(code: u16, body: &str, since: DateTime<Utc>) -> Probe {
    let Ok(answer) = serde_json::from_str::<StatusBody>(body) else {
        return Probe::Unsupported;
    };
    let finished = |status| Probe::Finished {
        status,
        message: answer.message.clone(),
    };
    match (code, answer.status.as_str()) {
        (200, "RUNNING") => Probe::Running,
        (200, "SUCCESS") => finished(ExecutionStatus::Success),
        (200, "FAILED") => finished(ExecutionStatus::Failed),
        (200, "TIMEOUT") => finished(ExecutionStatus::Timeout),
        (200, "CANCELLED") => finished(ExecutionStatus::Cancelled),
        (404, "UNKNOWN") => Probe::Unknown {
            restarted: answer.started_at.is_some_and(|s| s > since),
        },
        _ => Probe::Unsupported,
    }
}

fn failed(error: String) -> CallOutcome {
    CallOutcome::Finished {
        status: ExecutionStatus::Failed,
        message: None,
        error: Some(error),
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

pub fn excerpt(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() > EXCERPT_CHARS {
        format!("{}…", s.chars().take(EXCERPT_CHARS).collect::<String>())
    } else {
        s.to_string()
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
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
    use ExecutionStatus::*;

    fn verdict(code: u16, body: &str) -> Option<ExecutionStatus> {
        match classify_answer(code, body) {
            CallOutcome::Finished { status, .. } => Some(status),
            _ => None,
        }
    }

    #[test]
    fn excerpts_are_bounded() {
        assert_eq!(
            excerpt(&"x".repeat(5000)).chars().count(),
            EXCERPT_CHARS + 1
        );
        assert_eq!(excerpt("  short "), "short");
    }

    #[test]
    fn an_answer_counts_as_success_only_when_it_says_so() {
        assert_eq!(verdict(200, ""), Some(Success));
        assert_eq!(verdict(204, "  "), Some(Success));
        assert_eq!(
            verdict(200, r#"{"success":true,"message":"ok"}"#),
            Some(Success)
        );
        assert_eq!(verdict(200, r#"{"success":false}"#), Some(Failed));
        assert_eq!(verdict(200, r#"{"success":"false"}"#), Some(Failed));
        assert_eq!(verdict(200, r#"{"message":"no verdict"}"#), Some(Failed));
        assert_eq!(verdict(200, "OK"), Some(Failed));
        assert_eq!(verdict(500, r#"{"success":true}"#), Some(Failed));
        assert_eq!(
            verdict(200, r#"{"success":false,"status":"TIMEOUT"}"#),
            Some(Timeout)
        );
        assert_eq!(
            verdict(200, r#"{"success":false,"status":"CANCELLED"}"#),
            Some(Cancelled)
        );
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
        assert_eq!(
            classify_probe(200, r#"{"status":"RUNNING"}"#, call),
            Probe::Running
        );
        assert_eq!(
            classify_probe(200, r#"{"status":"SUCCESS","message":"m"}"#, call),
            Probe::Finished {
                status: Success,
                message: Some("m".into())
            }
        );
    }
}
