//! The executor's endpoints and the life of one execution: admitted once per trace id, run in
//! its own task, stopped at its timeout or on cancellation, recorded in the ledger, answered
//! to its caller or reported to the scheduler.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinError;
use tracing::Instrument;

use crate::ledger::{Admission, Cancellation};
use crate::logs;
use crate::protocol::{self, ExecutionState, ExecutorRequest, JobResult, StatusAnswer, headers};
use crate::{JobContext, JobExecutor, Registered};

/// How long a cancel request waits for the handler to stop before answering `RUNNING`.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

fn reply(status: StatusCode, result: JobResult) -> Response {
    (status, axum::Json(result)).into_response()
}

/// A result with the rest of its execution's log (docs/executor-protocol.md, "Shipping
/// logs"): the answer to a call, or a result report.
#[derive(serde::Serialize)]
struct WithLog<'a> {
    #[serde(flatten)]
    result: &'a JobResult,
    #[serde(skip_serializing_if = "Option::is_none")]
    logs: Option<&'a logs::Carried>,
}

fn answer(result: &JobResult, log: Option<&logs::Carried>) -> Response {
    let body = WithLog { result, logs: log };
    (StatusCode::OK, axum::Json(body)).into_response()
}

impl JobExecutor {
    /// Checks the signature of a request whose canonical trace id is `trace_id`.
    fn check_signature(
        &self,
        method: &str,
        uri: &Uri,
        headers: &HeaderMap,
        trace_id: &str,
        body: &[u8],
    ) -> Result<(), &'static str> {
        let Some(secret) = &self.secret else {
            return Ok(());
        };
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let ts = header(headers::TIMESTAMP)
            .ok_or("unsigned request refused")?
            .parse::<i64>()
            .map_err(|_| "bad signature timestamp")?;
        let sig = header(headers::SIGNATURE).ok_or("unsigned request refused")?;
        if protocol::verify_signature(
            secret,
            method,
            uri.path(),
            ts,
            trace_id,
            body,
            sig,
            Utc::now(),
        ) {
            Ok(())
        } else {
            Err("signature wrong or stale")
        }
    }

    fn status_answer(&self, trace_id: &str) -> (StatusCode, StatusAnswer) {
        let ledger = self.ledger.lock().expect("ledger lock");
        let (state, remembered_since) = (ledger.state(trace_id), ledger.remembered_since());
        drop(ledger);
        let (code, (status, message)) = match state {
            Some(s) => (StatusCode::OK, s),
            None => (StatusCode::NOT_FOUND, (ExecutionState::Unknown, None)),
        };
        (
            code,
            StatusAnswer {
                trace_id: trace_id.to_string(),
                status,
                message,
                started_at: self.started_at,
                remembered_since: Some(remembered_since),
            },
        )
    }

    /// Posts a result (with the rest of its log) to the scheduler, signed, retrying a few
    /// times.
    async fn report(
        &self,
        url: &str,
        trace_id: &str,
        result: &JobResult,
        log: Option<&logs::Carried>,
    ) {
        let body = serde_json::to_vec(&WithLog { result, logs: log }).expect("result serialises");
        let Ok(parsed) = reqwest::Url::parse(url) else {
            return tracing::warn!(url, "report URL is not a URL");
        };
        for attempt in 0..5u32 {
            let secret = self.secret.as_deref().map(Vec::as_slice);
            let req = signed_post(&self.http, secret, &parsed, trace_id, body.clone());
            match req.send().await {
                // 409: the scheduler settled the execution already (compensation); done.
                Ok(r) if r.status().is_success() || r.status() == StatusCode::CONFLICT => return,
                Ok(r) => tracing::warn!(
                    status = r.status().as_u16(),
                    attempt,
                    "result report refused"
                ),
                Err(e) => tracing::warn!(error = %e, attempt, "result report failed"),
            }
            tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
        }
        tracing::error!(
            "result could not be reported; the scheduler's compensation will ask the status endpoint"
        );
    }
}

/// A POST of `body` to `url` for the execution `trace_id`, signed over the URL's path when
/// there is a secret: result reports and log batches alike.
pub(crate) fn signed_post(
    http: &reqwest::Client,
    secret: Option<&[u8]>,
    url: &reqwest::Url,
    trace_id: &str,
    body: Vec<u8>,
) -> reqwest::RequestBuilder {
    let mut req = http
        .post(url.clone())
        .header("content-type", "application/json")
        .header(headers::TRACE_ID, trace_id);
    if let Some(secret) = secret {
        let ts = Utc::now().timestamp();
        req = req.header(headers::TIMESTAMP, ts).header(
            headers::SIGNATURE,
            protocol::signature(secret, "POST", url.path(), ts, trace_id, &body),
        );
    }
    req.body(body)
}

/// `POST {prefix}/{handler}`: a call.
pub(crate) async fn execute(
    State(ex): State<Arc<JobExecutor>>,
    Path(handler): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header_trace = headers
        .get(headers::TRACE_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if let Err(why) = ex.check_signature("POST", &uri, &headers, header_trace, &body) {
        tracing::warn!(handler, why, "call refused");
        return reply(StatusCode::UNAUTHORIZED, JobResult::failure(why));
    }
    let Some(registered) = ex.handlers.get(&handler).cloned() else {
        return reply(
            StatusCode::NOT_FOUND,
            JobResult::failure(format!("no handler `{handler}`")),
        );
    };
    let request: ExecutorRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return reply(
                StatusCode::BAD_REQUEST,
                JobResult::failure(format!("not a JobFlow call: {e}")),
            );
        }
    };
    let admission = ex.ledger.lock().expect("ledger lock").admit(
        &request.trace_id,
        &request.report_url,
        registered.background,
    );
    let (cancel, done) = match admission {
        Admission::Run { cancel, done } => (cancel, done),
        Admission::StillRunning => {
            tracing::info!(trace_id = %request.trace_id, "repeated call while running: 202, result will be reported");
            return StatusCode::ACCEPTED.into_response();
        }
        Admission::Finished(result) => {
            tracing::info!(trace_id = %request.trace_id, "repeated call after the end: the remembered result");
            let carried = ex
                .carried
                .lock()
                .expect("carried lock")
                .get(&request.trace_id);
            return answer(&result, carried.as_ref());
        }
    };
    let background = registered.background;
    let (answer_tx, answer_rx) = oneshot::channel();
    let capture = logs::Capture::new(ex.log_bound);
    let log_url = logs::log_url(&request.report_url).filter(|_| ex.log_bound > 0);
    let ships = log_url.is_some();
    if let Some(url) = log_url {
        tokio::spawn(logs::ship(
            ex.http.clone(),
            ex.secret.as_ref().map(|s| s.to_vec()),
            url,
            request.trace_id.clone(),
            capture.clone(),
        ));
    }
    let run = Run {
        ex: ex.clone(),
        registered,
        capture,
        ctx: JobContext::from_request(request),
        cancel,
        done,
        caller: (!background).then_some(answer_tx),
        ships,
    };
    tokio::spawn(run.supervise());
    if background {
        return StatusCode::ACCEPTED.into_response();
    }
    // If the scheduler goes away, this future is dropped; the run goes on and reports.
    match answer_rx.await {
        Ok((result, log)) => answer(&result, log.as_ref()),
        Err(_) => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            JobResult::failure("the execution ended without a result"),
        ),
    }
}

/// One admitted execution.
struct Run {
    ex: Arc<JobExecutor>,
    registered: Registered,
    /// What the handler logs.
    capture: Arc<logs::Capture>,
    ctx: JobContext,
    cancel: oneshot::Receiver<()>,
    done: watch::Sender<bool>,
    /// The synchronous caller waiting for the answer, and the rest of the log.
    caller: Option<oneshot::Sender<(JobResult, Option<logs::Carried>)>>,
    /// Whether the log is shipped (the call named where): its rest then goes with the result.
    ships: bool,
}

impl Run {
    async fn supervise(self) {
        let Run {
            ex,
            registered,
            capture,
            ctx,
            cancel,
            done,
            caller,
            ships,
        } = self;
        let span = tracing::info_span!("job", trace_id = %ctx.trace_id, job = %ctx.job_name, execution_id = %ctx.execution_id);
        let trace_id = ctx.trace_id.clone();
        let timeout = ctx.timeout_seconds;
        let mut task = tokio::spawn(
            logs::capturing(capture.clone(), (registered.run)(ctx)).instrument(span.clone()),
        );
        let limit = async {
            match timeout {
                0 => std::future::pending().await,
                s => tokio::time::sleep(Duration::from_secs(s.into())).await,
            }
        };
        let result = tokio::select! {
            joined = &mut task => settle(joined),
            () = limit => {
                task.abort();
                stopped(task.await, JobResult::timed_out(timeout))
            }
            Ok(()) = cancel => {
                task.abort();
                stopped(task.await, JobResult::cancelled())
            }
        };
        capture.end();
        let recorded = ex
            .ledger
            .lock()
            .expect("ledger lock")
            .finish(&trace_id, result, Utc::now());
        let _ = done.send(true);
        let result = recorded.result;
        span.in_scope(|| tracing::info!(status = result.final_status().as_str(), "job finished"));
        // The rest of the log goes with the result, and is remembered a while for a repeated
        // call (a scheduler that stopped before storing the answer calls again).
        let room = logs::carry_room(serde_json::to_vec(&result).map_or(usize::MAX, |b| b.len()));
        let log = ships.then(|| capture.take_rest(room)).flatten();
        if let Some(log) = &log {
            ex.carried
                .lock()
                .expect("carried lock")
                .keep(&trace_id, log);
        }
        let mut report = recorded.report_requested;
        if let Some(caller) = caller
            && caller.send((result.clone(), log.clone())).is_err()
        {
            span.in_scope(|| tracing::warn!("the caller went away; reporting the result"));
            report = true;
        }
        if report {
            ex.report(&recorded.report_url, &trace_id, &result, log.as_ref())
                .instrument(span)
                .await;
        }
    }
}

/// The handler's own result, or its panic as a failure.
fn settle(joined: Result<JobResult, JoinError>) -> JobResult {
    match joined {
        Ok(r) => r,
        Err(e) if e.is_panic() => {
            let payload = e.into_panic();
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned());
            tracing::error!(panic = msg.as_deref().unwrap_or("?"), "handler panicked");
            JobResult::failure(format!(
                "handler panicked: {}",
                msg.unwrap_or_else(|| "unknown cause".into())
            ))
        }
        Err(_) => JobResult::failure("handler was aborted"),
    }
}

/// After an abort: `why` unless the handler had finished (or panicked) first.
fn stopped(joined: Result<JobResult, JoinError>, why: JobResult) -> JobResult {
    match joined {
        Err(e) if e.is_cancelled() => why,
        other => settle(other),
    }
}

fn status_reply(code: StatusCode, answer: StatusAnswer) -> Response {
    (code, axum::Json(answer)).into_response()
}

/// `GET {prefix}/status/{traceId}`.
pub(crate) async fn status(
    State(ex): State<Arc<JobExecutor>>,
    Path(trace_id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(why) = ex.check_signature("GET", &uri, &headers, &trace_id, b"") {
        tracing::warn!(trace_id, why, "status request refused");
        return reply(StatusCode::UNAUTHORIZED, JobResult::failure(why));
    }
    let (code, answer) = ex.status_answer(&trace_id);
    status_reply(code, answer)
}

/// `POST {prefix}/cancel/{traceId}`.
pub(crate) async fn cancel(
    State(ex): State<Arc<JobExecutor>>,
    Path(trace_id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(why) = ex.check_signature("POST", &uri, &headers, &trace_id, &body) {
        tracing::warn!(trace_id, why, "cancel request refused");
        return reply(StatusCode::UNAUTHORIZED, JobResult::failure(why));
    }
    let cancellation = ex
        .ledger
        .lock()
        .expect("ledger lock")
        .cancel(&trace_id, Utc::now());
    if let Cancellation::Stopping(mut done) = cancellation {
        tracing::info!(trace_id, "cancelling");
        // Answered once the handler has stopped (or finished first), or RUNNING if it does
        // not stop in time (a handler that blocks its thread cannot be aborted).
        let _ = tokio::time::timeout(CANCEL_WAIT, done.wait_for(|d| *d)).await;
    }
    let (code, answer) = ex.status_answer(&trace_id);
    status_reply(code, answer)
}
