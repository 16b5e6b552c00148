//! The life of an execution in the SDK: timeouts, cancellation, repeated calls, the status
//! endpoint and callers that go away. Logic that needs no network runs on a paused clock
//! through the router directly; reports to a scheduler go over real sockets.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Request, Uri};
use axum::routing::post;
use chrono::{DateTime, Utc};
use jobflow_executor::protocol::{self, ExecutorRequest, headers};
use jobflow_executor::{JobContext, JobExecutor, JobResult};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tower::ServiceExt;

const SECRET: &str = "lifecycle-secret";

fn request(handler: &str, trace: &str, timeout_seconds: u32, report_url: &str) -> ExecutorRequest {
    serde_json::from_value(json!({
        "traceId": trace, "executionId": format!("job:20240101020000:0-0:{trace}"),
        "jobName": "job", "handler": handler, "triggerType": "CRON", "fireTime": "2024-01-01T02:00:00Z",
        "shardStart": 0, "shardEnd": 0, "shardCount": 1, "shardStrategy": "MOD_HASH", "retryCount": 0,
        "timeoutSeconds": timeout_seconds, "jobParams": null, "reportUrl": report_url
    }))
    .unwrap()
}

/// A request as the scheduler sends it, signed with `secret` when given.
fn http_request(
    method: &str,
    path: &str,
    trace: &str,
    body: Vec<u8>,
    secret: Option<&str>,
) -> Request<Body> {
    let mut b = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .header(headers::TRACE_ID, trace);
    if let Some(secret) = secret {
        let ts = Utc::now().timestamp();
        b = b.header(headers::TIMESTAMP, ts).header(
            headers::SIGNATURE,
            protocol::signature(secret.as_bytes(), method, path, ts, trace, &body),
        );
    }
    b.body(Body::from(body)).unwrap()
}

/// Sends `req` through the router itself (no sockets: works on a paused clock).
async fn send(router: &Router, req: Request<Body>) -> (u16, Value) {
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

async fn call(router: &Router, req: &ExecutorRequest) -> (u16, Value) {
    let path = format!("/internal/job/{}", req.handler);
    send(
        router,
        http_request(
            "POST",
            &path,
            &req.trace_id,
            serde_json::to_vec(req).unwrap(),
            None,
        ),
    )
    .await
}

async fn status(router: &Router, trace: &str) -> (u16, Value) {
    let path = protocol::status_path("/internal/job", trace);
    send(router, http_request("GET", &path, trace, vec![], None)).await
}

async fn cancel(router: &Router, trace: &str) -> (u16, Value) {
    let path = protocol::cancel_path("/internal/job", trace);
    send(router, http_request("POST", &path, trace, vec![], None)).await
}

/// Counts how often a handler started and how often its future was dropped unfinished.
#[derive(Default)]
struct Probe {
    started: AtomicUsize,
    dropped: AtomicUsize,
    release: Notify,
}

struct DropGuard(Arc<Probe>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// A handler that waits for `probe.release` (or forever), counting starts and drops.
fn gated(
    probe: &Arc<Probe>,
) -> impl Fn(JobContext) -> std::pin::Pin<Box<dyn Future<Output = JobResult> + Send>>
+ Send
+ Sync
+ 'static {
    let probe = probe.clone();
    move |ctx: JobContext| {
        let probe = probe.clone();
        Box::pin(async move {
            probe.started.fetch_add(1, Ordering::SeqCst);
            let guard = DropGuard(probe.clone());
            probe.release.notified().await;
            std::mem::forget(guard);
            JobResult::success(format!("done {}", ctx.trace_id))
        })
    }
}

fn started_at(answer: &Value) -> DateTime<Utc> {
    answer["startedAt"].as_str().unwrap().parse().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_handler_slower_than_its_timeout_is_aborted_and_answered_timeout() {
    let probe = Arc::<Probe>::default();
    let router = JobExecutor::without_signatures()
        .handler("stuck", gated(&probe))
        .router();
    let (code, body) = call(&router, &request("stuck", "t-timeout", 300, "x")).await;
    assert_eq!(code, 200);
    assert_eq!(
        body,
        json!({"success": false, "status": "TIMEOUT", "message": "aborted after 300s (timeoutSeconds)"})
    );
    // The handler's future was dropped, not left running.
    assert_eq!(probe.dropped.load(Ordering::SeqCst), 1);
    let (code, body) = status(&router, "t-timeout").await;
    assert_eq!(code, 200);
    assert_eq!(body["status"], "TIMEOUT");
    assert_eq!(body["message"], "aborted after 300s (timeoutSeconds)");
}

#[tokio::test(start_paused = true)]
async fn synchronous_executions_are_remembered_and_never_run_twice() {
    let before = Utc::now();
    let probe = Arc::<Probe>::default();
    let router = JobExecutor::without_signatures()
        .handler("gated", gated(&probe))
        .router();
    let (code, unknown) = status(&router, "t-sync").await;
    assert_eq!(code, 404);
    assert_eq!(unknown["traceId"], "t-sync");
    assert_eq!(unknown["status"], "UNKNOWN");
    // Nothing forgotten yet: every execution since the start is remembered.
    assert_eq!(unknown["rememberedSince"], unknown["startedAt"]);
    let started = started_at(&unknown);
    assert!(started >= before - chrono::Duration::seconds(1) && started <= Utc::now());

    let first = tokio::spawn({
        let router = router.clone();
        async move {
            call(
                &router,
                &request("gated", "t-sync", 60, "http://127.0.0.1:1/r"),
            )
            .await
        }
    });
    while probe.started.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        status(&router, "t-sync").await,
        (
            200,
            json!({"traceId": "t-sync", "status": "RUNNING", "startedAt": unknown["startedAt"],
                "rememberedSince": unknown["startedAt"]})
        )
    );
    // Repeated while running: accepted, not run again.
    let (code, _) = call(
        &router,
        &request("gated", "t-sync", 60, "http://127.0.0.1:1/r"),
    )
    .await;
    assert_eq!(code, 202);
    probe.release.notify_one();
    assert_eq!(
        first.await.unwrap(),
        (200, json!({"success": true, "message": "done t-sync"}))
    );
    // Repeated after the end: the remembered result.
    assert_eq!(
        call(&router, &request("gated", "t-sync", 60, "x")).await,
        (200, json!({"success": true, "message": "done t-sync"}))
    );
    assert_eq!(probe.started.load(Ordering::SeqCst), 1);
    assert_eq!(
        status(&router, "t-sync").await,
        (
            200,
            json!({"traceId": "t-sync", "status": "SUCCESS", "message": "done t-sync",
                "startedAt": unknown["startedAt"], "rememberedSince": unknown["startedAt"]})
        )
    );
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_synchronous_call_stops_it_and_answers_the_caller() {
    let probe = Arc::<Probe>::default();
    let router = JobExecutor::without_signatures()
        .handler("gated", gated(&probe))
        .handler("quick", |_ctx: JobContext| async {
            JobResult::success("quick")
        })
        .router();
    // A cancel that overtakes its call: remembered, and the call never runs.
    let (code, body) = cancel(&router, "t-early").await;
    assert_eq!((code, &body["status"]), (200, &json!("CANCELLED")));
    assert_eq!(
        call(&router, &request("gated", "t-early", 60, "x")).await,
        (200, json!({"success": false, "status": "CANCELLED"}))
    );
    assert_eq!(probe.started.load(Ordering::SeqCst), 0);

    let caller = tokio::spawn({
        let router = router.clone();
        async move { call(&router, &request("gated", "t-cancel", 3600, "x")).await }
    });
    while probe.started.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    let (code, body) = cancel(&router, "t-cancel").await;
    assert_eq!(code, 200);
    assert_eq!(body["traceId"], "t-cancel");
    assert_eq!(body["status"], "CANCELLED");
    assert!(body["startedAt"].is_string());
    assert_eq!(probe.dropped.load(Ordering::SeqCst), 1);
    assert_eq!(
        caller.await.unwrap(),
        (200, json!({"success": false, "status": "CANCELLED"}))
    );
    // Cancelling again, or something already finished, answers the final status.
    assert_eq!(cancel(&router, "t-cancel").await.1["status"], "CANCELLED");
    assert_eq!(
        call(&router, &request("quick", "t-quick", 60, "x")).await.0,
        200
    );
    let (code, body) = cancel(&router, "t-quick").await;
    assert_eq!(
        (code, &body["status"], &body["message"]),
        (200, &json!("SUCCESS"), &json!("quick"))
    );
}

#[tokio::test(start_paused = true)]
async fn finished_executions_are_forgotten_oldest_first_running_never() {
    let probe = Arc::<Probe>::default();
    let router = JobExecutor::without_signatures()
        .keep_finished(jobflow_executor::Keep {
            at_least: 2,
            for_at_least: Duration::ZERO,
            at_most: 1_000,
        })
        .handler("gated", gated(&probe))
        .handler("quick", |ctx: JobContext| async move {
            JobResult::success(ctx.trace_id)
        })
        .router();
    let running = tokio::spawn({
        let router = router.clone();
        async move { call(&router, &request("gated", "t-long", 3600, "x")).await }
    });
    while probe.started.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    for t in ["q1", "q2", "q3", "q4"] {
        assert_eq!(call(&router, &request("quick", t, 60, "x")).await.0, 200);
    }
    assert_eq!(status(&router, "q1").await.0, 404);
    assert_eq!(status(&router, "q2").await.0, 404);
    assert_eq!(status(&router, "q3").await.1["status"], "SUCCESS");
    assert_eq!(status(&router, "q4").await.1["status"], "SUCCESS");
    assert_eq!(status(&router, "t-long").await.1["status"], "RUNNING");
    probe.release.notify_one();
    assert_eq!(running.await.unwrap().0, 200);
}

/// A stand-in for the scheduler's report endpoint: checks the signature, records the body.
async fn scheduler() -> (String, mpsc::UnboundedReceiver<(bool, String, Value)>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = Router::new().route(
        "/api/v1/jobs/executions/{trace}/result",
        post(move |uri: Uri, headers: HeaderMap, body: Bytes| {
            let tx = tx.clone();
            async move {
                let h = |n: &str| headers.get(n).unwrap().to_str().unwrap().to_string();
                let ok = protocol::verify_signature(
                    SECRET.as_bytes(),
                    "POST",
                    uri.path(),
                    h(headers::TIMESTAMP).parse().unwrap(),
                    &h(headers::TRACE_ID),
                    &body,
                    &h(headers::SIGNATURE),
                    Utc::now(),
                );
                let trace = uri.path().split('/').nth(5).unwrap().to_string();
                tx.send((ok, trace, serde_json::from_slice(&body).unwrap()))
                    .unwrap();
                "{}"
            }
        }),
    );
    (serve(app).await, rx)
}

async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

fn report_url(sched: &str, trace: &str) -> String {
    format!("http://{sched}/api/v1/jobs/executions/{trace}/result")
}

/// Calls over the network, signed; `timeout` bounds how long the caller waits.
async fn call_over_http(
    addr: &str,
    req: &ExecutorRequest,
    timeout: Duration,
) -> Result<(u16, Value), reqwest::Error> {
    let path = format!("/internal/job/{}", req.handler);
    let body = serde_json::to_vec(req).unwrap();
    let ts = Utc::now().timestamp();
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}{path}"))
        .timeout(timeout)
        .header("content-type", "application/json")
        .header(headers::TRACE_ID, &req.trace_id)
        .header(headers::TIMESTAMP, ts)
        .header(
            headers::SIGNATURE,
            protocol::signature(SECRET.as_bytes(), "POST", &path, ts, &req.trace_id, &body),
        )
        .body(body)
        .send()
        .await?;
    let code = resp.status().as_u16();
    Ok((code, resp.json().await.unwrap_or(Value::Null)))
}

/// The next report, or a failed test if none comes within 30 s.
async fn next_report(
    reports: &mut mpsc::UnboundedReceiver<(bool, String, Value)>,
) -> (bool, String, Value) {
    tokio::time::timeout(Duration::from_secs(30), reports.recv())
        .await
        .expect("a report within 30 s")
        .unwrap()
}

#[tokio::test]
async fn a_call_whose_caller_went_away_runs_on_and_reports() {
    let (sched, mut reports) = scheduler().await;
    let probe = Arc::<Probe>::default();
    let addr = serve(
        JobExecutor::with_secret(SECRET)
            .handler("gated", gated(&probe))
            .router(),
    )
    .await;
    let req = request("gated", "t-gone", 60, &report_url(&sched, "t-gone"));
    // The scheduler sends the call and dies: its socket is closed under the call.
    let path = "/internal/job/gated";
    let body = serde_json::to_vec(&req).unwrap();
    let ts = Utc::now().timestamp();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n{}: t-gone\r\n{}: {ts}\r\n{}: {}\r\n\r\n",
        body.len(),
        headers::TRACE_ID,
        headers::TIMESTAMP,
        headers::SIGNATURE,
        protocol::signature(SECRET.as_bytes(), "POST", path, ts, "t-gone", &body),
    );
    let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut socket, head.as_bytes())
        .await
        .unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut socket, &body)
        .await
        .unwrap();
    while probe.started.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(socket);
    // The executor notices the closed connection as soon as it reads the EOF; give it ample
    // time before the handler ends (a result it could still send would be answered, not
    // reported).
    tokio::time::sleep(Duration::from_millis(500)).await;
    probe.release.notify_one();
    let (signed, trace, result) = next_report(&mut reports).await;
    assert!(signed);
    assert_eq!(trace, "t-gone");
    assert_eq!(result, json!({"success": true, "message": "done t-gone"}));
    assert_eq!(probe.dropped.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_call_repeated_while_running_is_accepted_and_reported_to_the_new_url() {
    let (first_sched, mut first_reports) = scheduler().await;
    let (second_sched, mut second_reports) = scheduler().await;
    let probe = Arc::<Probe>::default();
    let addr = serve(
        JobExecutor::with_secret(SECRET)
            .handler("gated", gated(&probe))
            .router(),
    )
    .await;
    let first = tokio::spawn({
        let addr = addr.clone();
        let req = request("gated", "t-dup", 60, &report_url(&first_sched, "t-dup"));
        async move { call_over_http(&addr, &req, Duration::from_secs(30)).await }
    });
    while probe.started.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Another scheduler instance (after a failover) sends the same execution again.
    let again = request("gated", "t-dup", 60, &report_url(&second_sched, "t-dup"));
    assert_eq!(
        call_over_http(&addr, &again, Duration::from_secs(30))
            .await
            .unwrap()
            .0,
        202
    );
    probe.release.notify_one();
    assert_eq!(
        first.await.unwrap().unwrap(),
        (200, json!({"success": true, "message": "done t-dup"}))
    );
    let (signed, _, result) = next_report(&mut second_reports).await;
    assert!(signed);
    assert_eq!(result, json!({"success": true, "message": "done t-dup"}));
    assert_eq!(probe.started.load(Ordering::SeqCst), 1);
    assert!(first_reports.try_recv().is_err());
}

#[tokio::test]
async fn a_background_handler_past_its_timeout_reports_timeout() {
    let (sched, mut reports) = scheduler().await;
    let probe = Arc::<Probe>::default();
    let gate = gated(&probe);
    let addr = serve(
        JobExecutor::with_secret(SECRET)
            .background_handler("stuck", gate)
            .router(),
    )
    .await;
    let req = request("stuck", "t-bg", 1, &report_url(&sched, "t-bg"));
    assert_eq!(
        call_over_http(&addr, &req, Duration::from_secs(30))
            .await
            .unwrap()
            .0,
        202
    );
    let (signed, _, result) = next_report(&mut reports).await;
    assert!(signed);
    assert_eq!(
        result,
        json!({"success": false, "status": "TIMEOUT", "message": "aborted after 1s (timeoutSeconds)"})
    );
    assert_eq!(probe.dropped.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn status_and_cancel_requests_must_be_signed() {
    let probe = Arc::<Probe>::default();
    let router = JobExecutor::with_secret(SECRET)
        .handler("gated", gated(&probe))
        .router();
    let addr = serve(router).await;
    let client = reqwest::Client::new();
    let signed = |method: &str, path: &str, secret: &str, ts: i64| {
        let builder = match method {
            "GET" => client.get(format!("http://{addr}{path}")),
            _ => client.post(format!("http://{addr}{path}")),
        };
        builder
            .header(headers::TRACE_ID, "t-sig")
            .header(headers::TIMESTAMP, ts)
            .header(
                headers::SIGNATURE,
                protocol::signature(secret.as_bytes(), method, path, ts, "t-sig", b""),
            )
    };
    let now = Utc::now().timestamp();
    let status_path = protocol::status_path("/internal/job", "t-sig");
    let cancel_path = protocol::cancel_path("/internal/job", "t-sig");
    for (method, path) in [("GET", &status_path), ("POST", &cancel_path)] {
        let code = |r: reqwest::RequestBuilder| async move { r.send().await.unwrap().status() };
        let unsigned = match method {
            "GET" => client.get(format!("http://{addr}{path}")),
            _ => client.post(format!("http://{addr}{path}")),
        };
        assert_eq!(code(unsigned).await, 401, "{method} unsigned");
        assert_eq!(
            code(signed(method, path, "wrong", now)).await,
            401,
            "{method} wrong secret"
        );
        assert_eq!(
            code(signed(method, path, SECRET, now - 301)).await,
            401,
            "{method} stale"
        );
        // Signed for the other endpoint's path: refused.
        let other = if path == &status_path {
            &cancel_path
        } else {
            &status_path
        };
        let crossed = match method {
            "GET" => client.get(format!("http://{addr}{path}")),
            _ => client.post(format!("http://{addr}{path}")),
        }
        .header(headers::TRACE_ID, "t-sig")
        .header(headers::TIMESTAMP, now)
        .header(
            headers::SIGNATURE,
            protocol::signature(SECRET.as_bytes(), method, other, now, "t-sig", b""),
        );
        assert_eq!(code(crossed).await, 401, "{method} signed for another path");
        let resp = signed(method, path, SECRET, now).send().await.unwrap();
        // A status answer for an unknown execution is 404 UNKNOWN; a cancel of one is
        // remembered (200 CANCELLED).
        let (want_code, want_status) = match method {
            "GET" => (404, "UNKNOWN"),
            _ => (200, "CANCELLED"),
        };
        assert_eq!(resp.status(), want_code, "{method} signed");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["status"], want_status);
    }
}

#[tokio::test]
async fn a_panicking_handler_is_remembered_as_failed() {
    let calls = Arc::new(Mutex::new(0));
    let seen = calls.clone();
    let router = JobExecutor::without_signatures()
        .handler("panics", move |_ctx: JobContext| {
            *seen.lock().unwrap() += 1;
            async {
                if true {
                    panic!("boom");
                }
                JobResult::success("unreachable")
            }
        })
        .router();
    let (code, body) = call(&router, &request("panics", "t-panic", 60, "x")).await;
    assert_eq!((code, &body["success"]), (200, &json!(false)));
    let (code, body) = status(&router, "t-panic").await;
    assert_eq!((code, &body["status"]), (200, &json!("FAILED")));
    assert!(body["message"].as_str().unwrap().contains("boom"));
    assert_eq!(
        call(&router, &request("panics", "t-panic", 60, "x"))
            .await
            .0,
        200
    );
    assert_eq!(*calls.lock().unwrap(), 1);
}
