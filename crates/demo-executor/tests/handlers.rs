//! The demo's `sleep` handler through the SDK, on a paused clock: it finishes when it is
//! faster than the job's timeout and is stopped (TIMEOUT) when it is slower.

use axum::body::Body;
use axum::http::Request;
use jobflow_executor::JobExecutor;
use serde_json::{Value, json};
use tower::ServiceExt;

async fn call_sleep(trace: &str, sleep_millis: u64, timeout_seconds: u32) -> (u16, Value) {
    let router = jobflow_demo_executor::handlers(JobExecutor::without_signatures()).router();
    let body = json!({
        "traceId": trace, "executionId": format!("demo:20240101020000:0-0:{trace}"),
        "jobName": "demo", "handler": "sleep", "triggerType": "MANUAL",
        "fireTime": "2024-01-01T02:00:00Z", "shardStart": 0, "shardEnd": 0, "shardCount": 1,
        "shardStrategy": "MOD_HASH", "retryCount": 0, "timeoutSeconds": timeout_seconds,
        "jobParams": {"sleepMillis": sleep_millis}, "reportUrl": "http://127.0.0.1:1/r"
    });
    let req = Request::post("/internal/job/sleep")
        .header("content-type", "application/json")
        .header("X-Trace-Id", trace)
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = router.oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test(start_paused = true)]
async fn sleep_finishes_within_its_timeout() {
    assert_eq!(
        call_sleep("t-fast", 1500, 2).await,
        (200, json!({"success": true, "message": "slept 1500ms"}))
    );
}

#[tokio::test(start_paused = true)]
async fn sleep_longer_than_the_timeout_is_stopped() {
    assert_eq!(
        call_sleep("t-slow", 10_000, 2).await,
        (
            200,
            json!({"success": false, "status": "TIMEOUT", "message": "aborted after 2s (timeoutSeconds)"})
        )
    );
}
