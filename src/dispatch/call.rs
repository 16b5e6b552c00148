//! One HTTP call to an executor (SPEC §6.4, §6.5): the request with every header and the JSON
//! body, and the classification of what came back.

use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use jobflow_executor::protocol::{DataRange, ExecutorRequest, headers, signature};
use serde::Deserialize;

use crate::jobs::{Execution, ExecutionStatus, JobDefinition};

/// At most this much of an executor's response is read; the rest is discarded unread.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Stored excerpts of bodies and errors are cut to this many characters.
const EXCERPT_CHARS: usize = 1000;

/// The body of the call for execution `e` of `job`.
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
    fn excerpts_are_bounded() {
        assert_eq!(
            excerpt(&"x".repeat(5000)).chars().count(),
            EXCERPT_CHARS + 1
        );
        assert_eq!(excerpt("  short "), "short");
    }
}
