//! The wire contract between the JobFlow scheduler and executors (see
//! `docs/executor-protocol.md`): header names, the request body, the result body and the
//! request signature. The scheduler and this SDK both use these definitions.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

pub mod instant;

/// Header names of a scheduler → executor call.
pub mod headers {
    pub const TRACE_ID: &str = "X-Trace-Id";
    pub const SHARD_START: &str = "X-Shard-Start";
    pub const SHARD_END: &str = "X-Shard-End";
    pub const SHARD_COUNT: &str = "X-Shard-Count";
    pub const SHARD_STRATEGY: &str = "X-Shard-Strategy";
    pub const JOB_NAME: &str = "X-Job-Name";
    /// The job's namespace, sent only for jobs outside `default`.
    pub const JOB_NAMESPACE: &str = "X-Job-Namespace";
    pub const EXECUTION_ID: &str = "X-Execution-Id";
    pub const FIRE_TIME: &str = "X-Fire-Time";
    pub const RETRY_COUNT: &str = "X-Retry-Count";
    pub const TRACEPARENT: &str = "traceparent";
    /// Unix seconds at which the signature was made.
    pub const TIMESTAMP: &str = "X-JobFlow-Timestamp";
    /// `v1=<hex HMAC-SHA256>`, see [`super::signature`].
    pub const SIGNATURE: &str = "X-JobFlow-Signature";
}

/// Signatures more than this far from the receiver's clock are refused (replay window).
pub const MAX_SIGNATURE_AGE_SECONDS: i64 = 300;

/// The JSON body of a call: the facts of the headers plus the job's parameters.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorRequest {
    pub trace_id: String,
    pub execution_id: String,
    pub job_name: String,
    pub handler: String,
    /// CRON, MANUAL, RETRY, COMPENSATION or CHILD.
    pub trigger_type: String,
    /// The scheduled instant this execution belongs to.
    #[serde(serialize_with = "instant::serialize_fire_time")]
    pub fire_time: DateTime<Utc>,
    pub shard_start: u32,
    pub shard_end: u32,
    pub shard_count: u32,
    /// MOD_HASH, RANGE or CUSTOM.
    pub shard_strategy: String,
    pub retry_count: u32,
    pub timeout_seconds: u32,
    #[serde(default)]
    pub job_params: Option<Value>,
    /// RANGE: the inclusive data slice of this shard range.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub data_range: Option<DataRange>,
    /// CUSTOM: the item parameters of the shards in this range, by shard index.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub shard_items: Option<BTreeMap<u32, String>>,
    /// Where an asynchronous (202) execution reports its result.
    pub report_url: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct DataRange {
    pub start: i64,
    pub end: i64,
}

/// How an execution ended, as the executor saw it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FinalStatus {
    Success,
    Failed,
    /// The executor stopped the handler when the call's `timeoutSeconds` passed.
    Timeout,
    /// The scheduler asked the executor to stop it (`POST {prefix}/cancel/{traceId}`).
    Cancelled,
}

impl FinalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "SUCCESS",
            Self::Failed => "FAILED",
            Self::Timeout => "TIMEOUT",
            Self::Cancelled => "CANCELLED",
        }
    }

    /// The wire name (`SUCCESS`, …) back to the status; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Success, Self::Failed, Self::Timeout, Self::Cancelled]
            .into_iter()
            .find(|f| f.as_str() == s)
    }
}

/// What an executor answers (and reports, for 202 executions).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobResult {
    /// Required: executors that know nothing of `status` are understood by this alone.
    pub success: bool,
    /// When present it is authoritative (a TIMEOUT or CANCELLED also has `success: false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<FinalStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl JobResult {
    pub fn success(message: impl Into<String>) -> Self {
        Self {
            success: true,
            status: None,
            message: Some(message.into()),
        }
    }

    pub fn failure(message: impl Into<String>) -> Self {
        Self {
            success: false,
            status: None,
            message: Some(message.into()),
        }
    }

    /// The handler was aborted because the call's `timeoutSeconds` passed.
    pub fn timed_out(seconds: u32) -> Self {
        Self {
            success: false,
            status: Some(FinalStatus::Timeout),
            message: Some(format!("aborted after {seconds}s (timeoutSeconds)")),
        }
    }

    /// The handler was aborted because the scheduler cancelled the execution.
    pub fn cancelled() -> Self {
        Self {
            success: false,
            status: Some(FinalStatus::Cancelled),
            message: None,
        }
    }

    /// `status` when given, else SUCCESS or FAILED from `success`.
    pub fn final_status(&self) -> FinalStatus {
        self.status.unwrap_or(if self.success {
            FinalStatus::Success
        } else {
            FinalStatus::Failed
        })
    }
}

/// The state of an execution in a status or cancel answer.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ExecutionState {
    Running,
    Success,
    Failed,
    Timeout,
    Cancelled,
    /// The executor does not know the trace id (never had it, restarted since, or forgot it).
    Unknown,
}

impl From<FinalStatus> for ExecutionState {
    fn from(f: FinalStatus) -> Self {
        match f {
            FinalStatus::Success => Self::Success,
            FinalStatus::Failed => Self::Failed,
            FinalStatus::Timeout => Self::Timeout,
            FinalStatus::Cancelled => Self::Cancelled,
        }
    }
}

/// The answer of `GET {prefix}/status/{traceId}` (200, or 404 with `UNKNOWN`) and of
/// `POST {prefix}/cancel/{traceId}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StatusAnswer {
    pub trace_id: String,
    pub status: ExecutionState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When this executor process started: an `UNKNOWN` answer whose `startedAt` is later
    /// than the call means the executor restarted since (and may have run it); earlier means
    /// it never had the call, provided it remembers that far back (`rememberedSince`).
    pub started_at: DateTime<Utc>,
    /// Every execution that finished at or after this moment is still remembered. An
    /// `UNKNOWN` answer about a call made before it means the executor may have run it and
    /// forgotten. Absent from executors that never forget or do not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remembered_since: Option<DateTime<Utc>>,
}

/// Where the status of `trace_id` is asked: `{prefix}/status/{traceId}`.
pub fn status_path(prefix: &str, trace_id: &str) -> String {
    execution_path(prefix, "status", trace_id)
}

/// Where an execution is cancelled: `{prefix}/cancel/{traceId}` (POST, empty body).
pub fn cancel_path(prefix: &str, trace_id: &str) -> String {
    execution_path(prefix, "cancel", trace_id)
}

fn execution_path(prefix: &str, what: &str, trace_id: &str) -> String {
    let mut path = format!("{}/{what}/", prefix.trim_end_matches('/'));
    for b in trace_id.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            path.push(b as char);
        } else {
            path.push_str(&format!("%{b:02X}"));
        }
    }
    path
}

/// Stored excerpts of executor answers are cut to this many characters.
pub const EXCERPT_CHARS: usize = 1000;

/// `s` trimmed and cut to [`EXCERPT_CHARS`] characters (with `…` when cut).
pub fn excerpt(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() > EXCERPT_CHARS {
        format!("{}…", s.chars().take(EXCERPT_CHARS).collect::<String>())
    } else {
        s.to_string()
    }
}

/// What an executor's answer to a call means (`docs/executor-protocol.md` §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedResult {
    /// 202: the executor runs the job and reports the result to `reportUrl`.
    Accepted,
    Finished {
        status: FinalStatus,
        /// The result text of a success.
        message: Option<String>,
        /// Why it did not succeed.
        error: Option<String>,
    },
}

impl ParsedResult {
    fn failed(error: String) -> Self {
        Self::Finished {
            status: FinalStatus::Failed,
            message: None,
            error: Some(error),
        }
    }
}

/// Classifies an executor's answer to a call: 202 → accepted; 2xx with an empty body →
/// success; 2xx with a JobResult (`success` a boolean) → its `status`, else success or
/// failure; any other 2xx body → failed (the answer was not a JobResult); non-2xx → failed
/// with `HTTP {code}: {excerpt}`.
pub fn parse_job_result(status_code: u16, body: &str) -> ParsedResult {
    if status_code == 202 {
        return ParsedResult::Accepted;
    }
    if !(200..300).contains(&status_code) {
        return ParsedResult::failed(format!("HTTP {status_code}: {}", excerpt(body)));
    }
    if body.trim().is_empty() {
        return ParsedResult::Finished {
            status: FinalStatus::Success,
            message: None,
            error: None,
        };
    }
    let not_a_result = |why: &str| {
        ParsedResult::failed(format!(
            "the executor's answer is not a JobResult ({why}): {}",
            excerpt(body)
        ))
    };
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(body) else {
        return not_a_result("not a JSON object");
    };
    let Some(success) = map.get("success").and_then(Value::as_bool) else {
        return not_a_result("`success` must be a boolean");
    };
    let status = match map.get("status") {
        None | Some(Value::Null) => {
            if success {
                FinalStatus::Success
            } else {
                FinalStatus::Failed
            }
        }
        Some(Value::String(s)) => match FinalStatus::parse(s) {
            Some(f) => f,
            None => return not_a_result("unknown `status`"),
        },
        Some(_) => return not_a_result("`status` must be a string"),
    };
    let message = match map.get("message") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(excerpt(s)),
        Some(other) => Some(excerpt(&other.to_string())),
    };
    match status {
        FinalStatus::Success => ParsedResult::Finished {
            status,
            message,
            error: None,
        },
        _ => ParsedResult::Finished {
            status,
            message: None,
            error: Some(message.unwrap_or_else(|| match status {
                FinalStatus::Timeout => "the executor stopped it at its timeout".into(),
                FinalStatus::Cancelled => "the executor cancelled it".into(),
                _ => "the executor reported failure".into(),
            })),
        },
    }
}

/// What the executor says about an execution (its status or cancel answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutorStatus {
    /// Still running (for a cancel answer: not stopped yet).
    Running,
    Finished(FinalStatus, Option<String>),
    /// The executor does not know it; compare `started_at` (and `remembered_since`) with the
    /// time of the call.
    Unknown {
        started_at: DateTime<Utc>,
        remembered_since: Option<DateTime<Utc>>,
    },
}

/// Classifies an executor's answer to a status or cancel request: 200 with a
/// [`StatusAnswer`], or 404 with an `UNKNOWN` one. Anything else (another HTTP status, a 404
/// without a StatusAnswer: no status endpoint, a body that is not a StatusAnswer) is an error
/// describing the answer; it says nothing about the execution.
pub fn parse_status_answer(status_code: u16, body: &str) -> Result<ExecutorStatus, String> {
    if status_code != 200 && status_code != 404 {
        return Err(format!("HTTP {status_code}: {}", excerpt(body)));
    }
    let answer: StatusAnswer = serde_json::from_str(body).map_err(|e| {
        format!(
            "HTTP {status_code} without a status answer ({e}): {}",
            excerpt(body)
        )
    })?;
    let final_status = |f: FinalStatus| Ok(ExecutorStatus::Finished(f, answer.message.clone()));
    match (status_code, answer.status) {
        (_, ExecutionState::Unknown) => Ok(ExecutorStatus::Unknown {
            started_at: answer.started_at,
            remembered_since: answer.remembered_since,
        }),
        (404, other) => Err(format!("HTTP 404 with status {other:?}")),
        (_, ExecutionState::Running) => Ok(ExecutorStatus::Running),
        (_, ExecutionState::Success) => final_status(FinalStatus::Success),
        (_, ExecutionState::Failed) => final_status(FinalStatus::Failed),
        (_, ExecutionState::Timeout) => final_status(FinalStatus::Timeout),
        (_, ExecutionState::Cancelled) => final_status(FinalStatus::Cancelled),
    }
}

/// `v1=` + hex(HMAC-SHA256(secret, "{method}\n{path}\n{timestamp}\n{traceId}\n{body}")).
pub fn signature(
    secret: &[u8],
    method: &str,
    path: &str,
    timestamp: i64,
    trace_id: &str,
    body: &[u8],
) -> String {
    let mac = signed_mac(secret, method, path, timestamp, trace_id, body);
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// The HMAC of a request, before it is finished.
fn signed_mac(
    secret: &[u8],
    method: &str,
    path: &str,
    timestamp: i64,
    trace_id: &str,
    body: &[u8],
) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts any key length");
    for part in [
        method.as_bytes(),
        path.as_bytes(),
        timestamp.to_string().as_bytes(),
        trace_id.as_bytes(),
    ] {
        mac.update(part);
        mac.update(b"\n");
    }
    mac.update(body);
    mac
}

/// Checks a signature: right secret, right request, made within
/// [`MAX_SIGNATURE_AGE_SECONDS`] of `now`. Compared in constant time.
#[allow(clippy::too_many_arguments)]
pub fn verify_signature(
    secret: &[u8],
    method: &str,
    path: &str,
    timestamp: i64,
    trace_id: &str,
    body: &[u8],
    presented: &str,
    now: DateTime<Utc>,
) -> bool {
    if (now.timestamp() - timestamp).abs() > MAX_SIGNATURE_AGE_SECONDS {
        return false;
    }
    let Some(presented) = presented
        .strip_prefix("v1=")
        .and_then(|h| hex::decode(h).ok())
    else {
        return false;
    };
    // The MAC's own comparison takes the same time wherever the bytes differ.
    signed_mac(secret, method, path, timestamp, trace_id, body)
        .verify_slice(&presented)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector() {
        // Also stated in docs/executor-protocol.md, so other languages can check themselves.
        let body = br#"{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736"}"#;
        let sig = signature(
            b"s3cret",
            "POST",
            "/internal/job/syncOrders",
            1_700_000_000,
            "4bf92f3577b34da6a3ce929d0e0e4736",
            body,
        );
        assert_eq!(
            sig,
            signature(
                b"s3cret",
                "POST",
                "/internal/job/syncOrders",
                1_700_000_000,
                "4bf92f3577b34da6a3ce929d0e0e4736",
                body
            )
        );
        assert!(sig.starts_with("v1=") && sig.len() == 67);
    }

    #[test]
    fn every_part_is_covered_and_staleness_refused() {
        let now = Utc::now();
        let ts = now.timestamp();
        let base = signature(b"k", "POST", "/p", ts, "t", b"{}");
        assert!(verify_signature(
            b"k", "POST", "/p", ts, "t", b"{}", &base, now
        ));
        for (secret, method, path, t, trace, body) in [
            (&b"x"[..], "POST", "/p", ts, "t", &b"{}"[..]),
            (b"k", "GET", "/p", ts, "t", b"{}"),
            (b"k", "POST", "/q", ts, "t", b"{}"),
            (b"k", "POST", "/p", ts + 1, "t", b"{}"),
            (b"k", "POST", "/p", ts, "u", b"{}"),
            (b"k", "POST", "/p", ts, "t", b"{ }"),
        ] {
            assert!(!verify_signature(
                secret, method, path, t, trace, body, &base, now
            ));
        }
        let old = ts - MAX_SIGNATURE_AGE_SECONDS - 1;
        assert!(!verify_signature(
            b"k",
            "POST",
            "/p",
            old,
            "t",
            b"{}",
            &signature(b"k", "POST", "/p", old, "t", b"{}"),
            now
        ));
        assert!(!verify_signature(
            b"k", "POST", "/p", ts, "t", b"{}", "v1=00", now
        ));
    }

    fn finished(status: FinalStatus, message: Option<&str>, error: Option<&str>) -> ParsedResult {
        ParsedResult::Finished {
            status,
            message: message.map(String::from),
            error: error.map(String::from),
        }
    }

    #[test]
    fn execution_paths_are_built_in_one_place() {
        assert_eq!(
            status_path("/internal/job", "4bf92f35"),
            "/internal/job/status/4bf92f35"
        );
        assert_eq!(cancel_path("/jobs/", "4bf92f35"), "/jobs/cancel/4bf92f35");
        assert_eq!(status_path("", "a b/c"), "/status/a%20b%2Fc");
    }

    #[test]
    fn job_results_serialise_status_only_when_known() {
        let json = |r: &JobResult| serde_json::to_value(r).unwrap();
        assert_eq!(
            json(&JobResult::success("ok")),
            serde_json::json!({"success": true, "message": "ok"})
        );
        assert_eq!(
            json(&JobResult::timed_out(5)),
            serde_json::json!({"success": false, "status": "TIMEOUT",
                "message": "aborted after 5s (timeoutSeconds)"})
        );
        assert_eq!(
            json(&JobResult::cancelled()),
            serde_json::json!({"success": false, "status": "CANCELLED"})
        );
        assert_eq!(JobResult::failure("x").final_status(), FinalStatus::Failed);
        assert_eq!(
            JobResult::cancelled().final_status(),
            FinalStatus::Cancelled
        );
    }

    #[test]
    fn answers_to_calls_are_classified_per_the_contract() {
        use FinalStatus::*;
        assert_eq!(parse_job_result(202, ""), ParsedResult::Accepted);
        assert_eq!(parse_job_result(202, "{}"), ParsedResult::Accepted);
        assert_eq!(parse_job_result(200, ""), finished(Success, None, None));
        assert_eq!(parse_job_result(204, "  \n"), finished(Success, None, None));
        assert_eq!(
            parse_job_result(200, r#"{"success":true,"message":"synced 5"}"#),
            finished(Success, Some("synced 5"), None)
        );
        assert_eq!(
            parse_job_result(200, r#"{"success":false,"message":"db down"}"#),
            finished(Failed, None, Some("db down"))
        );
        assert_eq!(
            parse_job_result(200, r#"{"success":false}"#),
            finished(Failed, None, Some("the executor reported failure"))
        );
        // `status` is authoritative.
        assert_eq!(
            parse_job_result(
                200,
                r#"{"success":false,"status":"TIMEOUT","message":"aborted after 5s (timeoutSeconds)"}"#
            ),
            finished(Timeout, None, Some("aborted after 5s (timeoutSeconds)"))
        );
        assert_eq!(
            parse_job_result(200, r#"{"success":false,"status":"CANCELLED"}"#),
            finished(Cancelled, None, Some("the executor cancelled it"))
        );
        assert_eq!(
            parse_job_result(200, r#"{"success":true,"status":"FAILED","message":"m"}"#),
            finished(Failed, None, Some("m"))
        );
        assert_eq!(
            parse_job_result(201, r#"{"success":true,"status":null}"#),
            finished(Success, None, None)
        );
        // Not JobResults: the handler may have run, but nothing says it succeeded.
        for (body, why) in [
            ("ok", "not a JSON object"),
            ("[true]", "not a JSON object"),
            (r#"{"success":"false"}"#, "`success` must be a boolean"),
            (r#"{"message":"done"}"#, "`success` must be a boolean"),
            (r#"{"success":true,"status":"DONE"}"#, "unknown `status`"),
            (
                r#"{"success":true,"status":1}"#,
                "`status` must be a string",
            ),
        ] {
            assert_eq!(
                parse_job_result(200, body),
                finished(
                    Failed,
                    None,
                    Some(&format!(
                        "the executor's answer is not a JobResult ({why}): {body}"
                    ))
                ),
                "{body}"
            );
        }
        assert_eq!(
            parse_job_result(500, "  boom "),
            finished(Failed, None, Some("HTTP 500: boom"))
        );
        assert_eq!(
            parse_job_result(404, r#"{"success":true}"#),
            finished(Failed, None, Some(r#"HTTP 404: {"success":true}"#))
        );
        let long = "x".repeat(EXCERPT_CHARS + 10);
        let ParsedResult::Finished { error, .. } = parse_job_result(503, &long) else {
            panic!()
        };
        assert_eq!(
            error.unwrap(),
            format!("HTTP 503: {}…", "x".repeat(EXCERPT_CHARS))
        );
    }

    #[test]
    fn status_answers_tell_running_final_and_unknown_apart() {
        let started = "2026-11-30T17:00:00Z";
        let at: DateTime<Utc> = started.parse().unwrap();
        let body = |status: &str, message: Option<&str>| {
            let mut v =
                serde_json::json!({"traceId": "t1", "status": status, "startedAt": started});
            if let Some(m) = message {
                v["message"] = m.into();
            }
            v.to_string()
        };
        assert_eq!(
            parse_status_answer(200, &body("RUNNING", None)),
            Ok(ExecutorStatus::Running)
        );
        assert_eq!(
            parse_status_answer(200, &body("SUCCESS", Some("done"))),
            Ok(ExecutorStatus::Finished(
                FinalStatus::Success,
                Some("done".into())
            ))
        );
        for (wire, f) in [
            ("FAILED", FinalStatus::Failed),
            ("TIMEOUT", FinalStatus::Timeout),
            ("CANCELLED", FinalStatus::Cancelled),
        ] {
            assert_eq!(
                parse_status_answer(200, &body(wire, None)),
                Ok(ExecutorStatus::Finished(f, None))
            );
        }
        assert_eq!(
            parse_status_answer(404, &body("UNKNOWN", None)),
            Ok(ExecutorStatus::Unknown {
                started_at: at,
                remembered_since: None
            })
        );
        // Nothing is learnt about the execution from these.
        assert!(parse_status_answer(404, "").is_err());
        assert!(parse_status_answer(404, &body("RUNNING", None)).is_err());
        assert!(parse_status_answer(500, &body("RUNNING", None)).is_err());
        assert!(parse_status_answer(401, "").is_err());
        assert!(parse_status_answer(200, r#"{"status":"RUNNING"}"#).is_err());
        assert!(parse_status_answer(200, &body("DONE", None)).is_err());
        // The answer's JSON shape, as executors in other languages must write it.
        let answer = StatusAnswer {
            trace_id: "t1".into(),
            status: ExecutionState::Cancelled,
            message: None,
            started_at: at,
            remembered_since: None,
        };
        assert_eq!(
            serde_json::to_value(&answer).unwrap(),
            serde_json::json!({"traceId": "t1", "status": "CANCELLED", "startedAt": started})
        );
    }
}
