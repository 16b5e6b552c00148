//! One HTTP call to an executor (SPEC §6.4, §6.5): the request with every header and the JSON
//! body, and the classification of what came back.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

use crate::jobs::{Execution, ExecutionStatus, JobDefinition, ShardStrategy};

/// At most this much of an executor's response is read; the rest is discarded unread.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Stored excerpts of bodies and errors are cut to this many characters.
const EXCERPT_CHARS: usize = 1000;

/// Headers of the executor protocol.
pub mod headers {
    pub const TRACE_ID: &str = "X-Trace-Id";
    pub const SHARD_START: &str = "X-Shard-Start";
    pub const SHARD_END: &str = "X-Shard-End";
    pub const SHARD_COUNT: &str = "X-Shard-Count";
    pub const SHARD_STRATEGY: &str = "X-Shard-Strategy";
    pub const JOB_NAME: &str = "X-Job-Name";
    pub const EXECUTION_ID: &str = "X-Execution-Id";
    pub const FIRE_TIME: &str = "X-Fire-Time";
    pub const RETRY_COUNT: &str = "X-Retry-Count";
    pub const TRACEPARENT: &str = "traceparent";
    /// Unix seconds the signature was made at.
    pub const TIMESTAMP: &str = "X-JobFlow-Timestamp";
    /// `v1=<hex HMAC-SHA256>`; see [`super::signature`].
    pub const SIGNATURE: &str = "X-JobFlow-Signature";
}

/// The JSON body sent to the executor: the same facts as the headers plus the parameters.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorRequest {
    pub trace_id: String,
    pub execution_id: String,
    pub job_name: String,
    pub handler: String,
    pub trigger_type: String,
    pub fire_time: DateTime<Utc>,
    pub shard_start: u32,
    pub shard_end: u32,
    pub shard_count: u32,
    pub shard_strategy: ShardStrategy,
    pub retry_count: u32,
    pub timeout_seconds: u32,
    pub job_params: Option<Value>,
    /// RANGE: the inclusive data slice of this shard range.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub data_range: Option<DataRange>,
    /// CUSTOM: the item parameters of the shards in this range, by shard index.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub shard_items: Option<BTreeMap<u32, String>>,
    /// Where a 202 (asynchronous) execution reports its result.
    pub report_url: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct DataRange {
    pub start: i64,
    pub end: i64,
}

impl ExecutorRequest {
    pub fn new(e: &Execution, job: &JobDefinition, report_url: String) -> Self {
        let spec = &job.spec;
        Self {
            trace_id: e.trace_id.clone(),
            execution_id: e.execution_id.clone(),
            job_name: e.job_name.clone(),
            handler: spec.handler.to_string(),
            trigger_type: e.trigger_type.as_str().to_string(),
            fire_time: e.fire_time,
            shard_start: e.shard_start,
            shard_end: e.shard_end,
            shard_count: e.shard_count,
            shard_strategy: spec.shard_strategy,
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
}

/// The executor's `JobResult`.
#[derive(Debug, Deserialize)]
struct JobResult {
    success: Option<bool>,
    message: Option<String>,
}

/// What one call came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// The connection could not be made: try the next executor instance.
    Unreachable(String),
    /// 202: the executor runs the job and reports later.
    Accepted,
    Finished {
        status: ExecutionStatus,
        message: Option<String>,
        error: Option<String>,
    },
}

/// The signature over one call: `HMAC-SHA256(secret, "{method}\n{path}\n{timestamp}\n{trace_id}\n{body}")`,
/// hex-encoded and sent as `v1=<hex>`.
pub fn signature(
    secret: &[u8],
    method: &str,
    path: &str,
    timestamp: i64,
    trace_id: &str,
    body: &[u8],
) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts any key length");
    mac.update(method.as_bytes());
    mac.update(b"\n");
    mac.update(path.as_bytes());
    mac.update(b"\n");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b"\n");
    mac.update(trace_id.as_bytes());
    mac.update(b"\n");
    mac.update(body);
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// Signatures older (or newer) than this are refused.
pub const MAX_SIGNATURE_AGE_SECONDS: i64 = 300;

/// Checks a `v1=` signature: right secret, right request, made within
/// `MAX_SIGNATURE_AGE_SECONDS` of `now`. Compared in constant time.
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
    let expected = signature(secret, method, path, timestamp, trace_id, body);
    expected.len() == presented.len()
        && expected
            .bytes()
            .zip(presented.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

pub struct Call<'a> {
    pub http: &'a reqwest::Client,
    pub base_url: String,
    pub path: String,
    pub request: &'a ExecutorRequest,
    pub secret: Option<&'a [u8]>,
    pub timeout: Duration,
}

impl Call<'_> {
    pub async fn send(self) -> CallOutcome {
        let body = serde_json::to_vec(self.request).expect("request serialises");
        let r = self.request;
        let span_id: u64 = rand::random::<u64>() | 1;
        let mut req = self
            .http
            .post(format!("{}{}", self.base_url, self.path))
            .timeout(self.timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(headers::TRACE_ID, &r.trace_id)
            .header(headers::SHARD_START, r.shard_start)
            .header(headers::SHARD_END, r.shard_end)
            .header(headers::SHARD_COUNT, r.shard_count)
            .header(headers::SHARD_STRATEGY, r.shard_strategy.as_str())
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
        if let Some(secret) = self.secret {
            let ts = Utc::now().timestamp();
            req = req.header(headers::TIMESTAMP, ts).header(
                headers::SIGNATURE,
                signature(secret, "POST", &self.path, ts, &r.trace_id, &body),
            );
        }
        let resp = match req.body(body).send().await {
            Ok(resp) => resp,
            Err(e) if e.is_connect() => return CallOutcome::Unreachable(error_chain(&e)),
            Err(e) if e.is_timeout() => return timed_out(self.timeout),
            Err(e) => return failed(format!("request failed: {}", error_chain(&e))),
        };
        let status = resp.status();
        if status == reqwest::StatusCode::ACCEPTED {
            return CallOutcome::Accepted;
        }
        let text = match read_bounded(resp).await {
            Ok(t) => t,
            Err(e) if e.is_timeout() => return timed_out(self.timeout),
            Err(e) => return failed(format!("reading the response failed: {}", error_chain(&e))),
        };
        if !status.is_success() {
            return failed(format!("HTTP {}: {}", status.as_u16(), excerpt(&text)));
        }
        if text.trim().is_empty() {
            return CallOutcome::Finished {
                status: ExecutionStatus::Success,
                message: None,
                error: None,
            };
        }
        match serde_json::from_str::<JobResult>(&text) {
            Ok(JobResult {
                success: Some(false),
                message,
            }) => CallOutcome::Finished {
                status: ExecutionStatus::Failed,
                message: None,
                error: Some(
                    message
                        .map(|m| excerpt(&m))
                        .unwrap_or_else(|| "the executor reported failure".into()),
                ),
            },
            Ok(JobResult { message, .. }) => CallOutcome::Finished {
                status: ExecutionStatus::Success,
                message: message.map(|m| excerpt(&m)),
                error: None,
            },
            // A 2xx with a body that is not a JobResult still means the handler ran.
            Err(_) => CallOutcome::Finished {
                status: ExecutionStatus::Success,
                message: Some(excerpt(&text)),
                error: None,
            },
        }
    }
}

fn failed(error: String) -> CallOutcome {
    CallOutcome::Finished {
        status: ExecutionStatus::Failed,
        message: None,
        error: Some(error),
    }
}

fn timed_out(after: Duration) -> CallOutcome {
    CallOutcome::Finished {
        status: ExecutionStatus::Timeout,
        message: None,
        error: Some(format!("no answer within {}s", after.as_secs())),
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

    #[test]
    fn signature_is_stable_and_covers_every_part() {
        let base = signature(
            b"secret",
            "POST",
            "/internal/job/h",
            1_700_000_000,
            "abc",
            b"{}",
        );
        assert!(base.starts_with("v1=") && base.len() == 3 + 64);
        assert_eq!(
            base,
            signature(
                b"secret",
                "POST",
                "/internal/job/h",
                1_700_000_000,
                "abc",
                b"{}"
            )
        );
        for other in [
            signature(
                b"secret2",
                "POST",
                "/internal/job/h",
                1_700_000_000,
                "abc",
                b"{}",
            ),
            signature(
                b"secret",
                "GET",
                "/internal/job/h",
                1_700_000_000,
                "abc",
                b"{}",
            ),
            signature(
                b"secret",
                "POST",
                "/internal/job/x",
                1_700_000_000,
                "abc",
                b"{}",
            ),
            signature(
                b"secret",
                "POST",
                "/internal/job/h",
                1_700_000_001,
                "abc",
                b"{}",
            ),
            signature(
                b"secret",
                "POST",
                "/internal/job/h",
                1_700_000_000,
                "abd",
                b"{}",
            ),
            signature(
                b"secret",
                "POST",
                "/internal/job/h",
                1_700_000_000,
                "abc",
                b"{ }",
            ),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn verification_rejects_wrong_and_stale_signatures() {
        let now = Utc::now();
        let ts = now.timestamp();
        let good = signature(b"k", "POST", "/p", ts, "t", b"{}");
        assert!(verify_signature(
            b"k", "POST", "/p", ts, "t", b"{}", &good, now
        ));
        assert!(!verify_signature(
            b"other", "POST", "/p", ts, "t", b"{}", &good, now
        ));
        assert!(!verify_signature(
            b"k",
            "POST",
            "/p",
            ts,
            "t",
            b"{\"x\":1}",
            &good,
            now
        ));
        assert!(!verify_signature(
            b"k", "POST", "/p", ts, "t", b"{}", "v1=00", now
        ));
        let old = ts - MAX_SIGNATURE_AGE_SECONDS - 1;
        let stale = signature(b"k", "POST", "/p", old, "t", b"{}");
        assert!(!verify_signature(
            b"k", "POST", "/p", old, "t", b"{}", &stale, now
        ));
    }

    #[test]
    fn excerpts_are_bounded() {
        assert_eq!(
            excerpt(&"x".repeat(5000)).chars().count(),
            EXCERPT_CHARS + 1
        );
        assert_eq!(excerpt("  short "), "short");
    }
}
