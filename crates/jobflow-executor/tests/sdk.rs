//! The SDK as the scheduler sees it: signed calls in, JobResult JSON out, 202 + signed report.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::routing::post;
use chrono::Utc;
use jobflow_executor::protocol::{self, ExecutorRequest, headers};
use jobflow_executor::{JobContext, JobExecutor, JobResult};
use serde_json::{Value, json};

const SECRET: &str = "test-signing-secret";

async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

fn request(handler: &str, report_url: &str) -> ExecutorRequest {
    serde_json::from_value(json!({
        "traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "executionId": "city-report:20240101020000:1-2",
        "jobName": "city-report", "handler": handler, "triggerType": "CRON", "fireTime": "2024-01-01T02:00:00Z",
        "shardStart": 1, "shardEnd": 2, "shardCount": 4, "shardStrategy": "CUSTOM", "retryCount": 0,
        "timeoutSeconds": 60, "jobParams": {"limit": 5}, "shardItems": {"1": "Shanghai", "2": "Guangzhou"},
        "reportUrl": report_url
    }))
    .unwrap()
}

/// Sends `req` as the scheduler would, signed with `secret` at `ts` (or unsigned).
async fn call(addr: &str, req: &ExecutorRequest, signing: Option<(&str, i64)>) -> (u16, Value) {
    let path = format!("/internal/job/{}", req.handler);
    let body = serde_json::to_vec(req).unwrap();
    let mut r = reqwest::Client::new()
        .post(format!("http://{addr}{path}"))
        .header("content-type", "application/json")
        .header(headers::TRACE_ID, &req.trace_id);
    if let Some((secret, ts)) = signing {
        r = r.header(headers::TIMESTAMP, ts).header(
            headers::SIGNATURE,
            protocol::signature(secret.as_bytes(), "POST", &path, ts, &req.trace_id, &body),
        );
    }
    let resp = r.body(body).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn signed_calls_reach_a_typed_context() {
    let seen: Arc<Mutex<Option<JobContext>>> = Arc::default();
    let sink = seen.clone();
    let ex = JobExecutor::with_secret(SECRET).handler("cities", move |ctx: JobContext| {
        let sink = sink.clone();
        async move {
            let cities: Vec<String> = ctx.shard_items.values().cloned().collect();
            *sink.lock().unwrap() = Some(ctx);
            JobResult::success(cities.join(","))
        }
    });
    let addr = serve(ex.router()).await;
    let now = Utc::now().timestamp();
    let (status, body) = call(
        &addr,
        &request("cities", "http://127.0.0.1:1/r"),
        Some((SECRET, now)),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"success": true, "message": "Shanghai,Guangzhou"})
    );
    let ctx = seen.lock().unwrap().clone().unwrap();
    assert_eq!(ctx.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!((ctx.shard_start, ctx.shard_end, ctx.shard_count), (1, 2, 4));
    assert!(ctx.owns_id(5) && ctx.owns_id(6) && !ctx.owns_id(4) && !ctx.owns_id(7));
    #[derive(serde::Deserialize)]
    struct P {
        limit: u32,
    }
    assert_eq!(ctx.params::<P>().unwrap().limit, 5);

    // Refused: unsigned, wrong secret, stale, tampered body.
    assert_eq!(call(&addr, &request("cities", "x"), None).await.0, 401);
    assert_eq!(
        call(&addr, &request("cities", "x"), Some(("wrong", now)))
            .await
            .0,
        401
    );
    assert_eq!(
        call(&addr, &request("cities", "x"), Some((SECRET, now - 301)))
            .await
            .0,
        401
    );
    let (status, body) = call(&addr, &request("nope", "x"), Some((SECRET, now))).await;
    assert_eq!(status, 404, "{body}");
}

#[tokio::test]
async fn results_errors_and_panics_become_job_results() {
    let ex = JobExecutor::without_signatures()
        .handler("fails", |_ctx: JobContext| async {
            Err::<(), _>("upstream said no")
        })
        .handler("panics", |_ctx: JobContext| async {
            if true {
                panic!("boom");
            }
            JobResult::success("unreachable")
        })
        .handler("range", |ctx: JobContext| async move {
            Ok::<_, String>(format!("{:?}", ctx.data_range.map(|r| (r.start, r.end))))
        });
    let addr = serve(ex.router()).await;
    assert_eq!(
        call(&addr, &request("fails", "x"), None).await.1,
        json!({"success": false, "message": "upstream said no"})
    );
    // Each call is a new execution: the SDK answers a known trace id from memory.
    let mut panics = request("panics", "x");
    panics.trace_id = "trace-of-the-panic".into();
    let (status, body) = call(&addr, &panics, None).await;
    assert_eq!(status, 200);
    assert_eq!(body["success"], false);
    assert!(body["message"].as_str().unwrap().contains("boom"));
    let mut r = request("range", "x");
    r.trace_id = "trace-of-the-range".into();
    r.shard_strategy = "RANGE".into();
    r.data_range = Some(jobflow_executor::DataRange {
        start: 101,
        end: 300,
    });
    assert_eq!(call(&addr, &r, None).await.1["message"], "Some((101, 300))");
}

#[tokio::test]
async fn background_handlers_answer_202_then_report_signed() {
    // A stand-in for the scheduler's report endpoint that checks the signature.
    let reports: Arc<Mutex<Vec<(bool, Value)>>> = Arc::default();
    let sink = reports.clone();
    let scheduler = Router::new().route(
        "/api/v1/jobs/executions/{trace}/result",
        post(
            move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
                let sink = sink.clone();
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
                    sink.lock()
                        .unwrap()
                        .push((ok, serde_json::from_slice(&body).unwrap()));
                    "{}"
                }
            },
        ),
    );
    let sched = serve(scheduler).await;
    let ex =
        JobExecutor::with_secret(SECRET).background_handler("slow", |ctx: JobContext| async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            JobResult::success(format!("done {}", ctx.job_name))
        });
    let addr = serve(ex.router()).await;
    let req = request(
        "slow",
        &format!("http://{sched}/api/v1/jobs/executions/4bf92f3577b34da6a3ce929d0e0e4736/result"),
    );
    let (status, _) = call(&addr, &req, Some((SECRET, Utc::now().timestamp()))).await;
    assert_eq!(status, 202);
    let status_path = protocol::status_path("/internal/job", &req.trace_id);
    let status = || async {
        let ts = Utc::now().timestamp();
        let resp = reqwest::Client::new()
            .get(format!("http://{addr}{status_path}"))
            .header(headers::TRACE_ID, &req.trace_id)
            .header(headers::TIMESTAMP, ts)
            .header(
                headers::SIGNATURE,
                protocol::signature(
                    SECRET.as_bytes(),
                    "GET",
                    &status_path,
                    ts,
                    &req.trace_id,
                    b"",
                ),
            )
            .send()
            .await
            .unwrap();
        let mut body: Value = resp.json().await.unwrap();
        assert!(body["startedAt"].is_string());
        assert!(body["rememberedSince"].is_string());
        body.as_object_mut().unwrap().remove("startedAt");
        body.as_object_mut().unwrap().remove("rememberedSince");
        body
    };
    assert_eq!(
        status().await,
        json!({"traceId": req.trace_id, "status": "RUNNING"})
    );
    for _ in 0..50 {
        if !reports.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let got = reports.lock().unwrap().clone();
    assert_eq!(
        got,
        vec![(
            true,
            json!({"success": true, "message": "done city-report"})
        )]
    );
    assert_eq!(
        status().await,
        json!({"traceId": req.trace_id, "status": "SUCCESS", "message": "done city-report"})
    );
}
