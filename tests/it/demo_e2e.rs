//! The demo executor (built on the SDK) and the scheduler end to end, standalone mode, with
//! signed calls: a sharded job, a failing job with retries, a long job via 202 + report, and
//! calls signed with the wrong secret refused by the SDK.

use std::sync::Arc;
use std::time::Duration;

use jobflow::config::Secret;
use jobflow_executor::JobExecutor;
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestDb, backend_tests, eventually, static_executors};

backend_tests!(demo_executor_end_to_end);

const SECRET: &str = "demo-shared-secret";

async fn serve_demo(secret: &str) -> String {
    let router = jobflow_demo_executor::handlers(JobExecutor::with_secret(secret)).router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

async fn settled(app: &TestApp, job: &str, n: usize) -> Vec<Value> {
    let mut rows = eventually(
        Duration::from_secs(20),
        &format!("{n} settled executions of {job}"),
        || async {
            let rows = app.executions(job).await;
            (rows.len() == n
                && rows.iter().all(|r| {
                    ["SUCCESS", "FAILED", "TIMEOUT"].contains(&r["status"].as_str().unwrap())
                }))
            .then_some(rows)
        },
    )
    .await;
    rows.sort_by_key(|r| r["id"].as_i64());
    rows
}

async fn demo_executor_end_to_end(backend: Backend) {
    let demos = vec![serve_demo(SECRET).await, serve_demo(SECRET).await];
    let impostor = vec![serve_demo("another-secret").await];
    let db = Arc::new(TestDb::create(backend).await);
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("demo", &demos);
        s.executors
            .static_
            .append(&mut static_executors("impostor", &impostor));
        s.executor.signing_secret = Some(Secret::new(SECRET));
        s.scheduler.retry_backoff_millis = 50u64.try_into().unwrap();
        s.scheduler.retry_backoff_max_millis = 100u64.try_into().unwrap();
    })
    .await;
    let job = |name: &str, service: &str, handler: &str, extra: Value| {
        let mut j = json!({"name": name, "serviceName": service, "handler": handler, "cron": "0 0 3 1 1 ?"});
        for (k, v) in extra.as_object().unwrap() {
            j[k] = v.clone();
        }
        j
    };

    // A sharded MOD_HASH job over two demo instances: each lists the ids it owns.
    app.create_job(&job(
        "demo-sharded",
        "demo",
        "shardedSync",
        json!({"shardCount": 4, "jobParams": {"total": 8}}),
    ))
    .await;
    app.post("/api/v1/jobs/demo-sharded/trigger", &json!({}))
        .await;
    let rows = settled(&app, "demo-sharded", 2).await;
    let mut messages: Vec<String> = rows
        .iter()
        .map(|r| r["resultMessage"].as_str().unwrap().to_string())
        .collect();
    messages.sort();
    assert_eq!(
        messages,
        [
            "MOD_HASH shards 0-1 of 4: 4 ids [1, 4, 5, 8]",
            "MOD_HASH shards 2-3 of 4: 4 ids [2, 3, 6, 7]"
        ]
    );

    // A RANGE job: each execution gets its slice of the data range.
    app.create_job(&job(
        "demo-range",
        "demo",
        "shardedSync",
        json!({"shardCount": 2, "shardStrategy": "RANGE", "shardParams": {"start": 1, "end": 100}}),
    ))
    .await;
    app.post("/api/v1/jobs/demo-range/trigger", &json!({}))
        .await;
    let mut messages: Vec<String> = settled(&app, "demo-range", 2)
        .await
        .iter()
        .map(|r| r["resultMessage"].as_str().unwrap().to_string())
        .collect();
    messages.sort();
    assert_eq!(
        messages,
        [
            "RANGE shards 0-0 of 2: ids 1..=50",
            "RANGE shards 1-1 of 2: ids 51..=100"
        ]
    );

    // A failing job with retries.
    app.create_job(&job("demo-fail", "demo", "fail", json!({"maxRetry": 2})))
        .await;
    app.post("/api/v1/jobs/demo-fail/trigger", &json!({})).await;
    let rows = settled(&app, "demo-fail", 3).await;
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["status"], "FAILED");
        assert_eq!(
            r["errorMessage"],
            format!("demo-fail failed on purpose (attempt {})", i + 1)
        );
    }

    // A long job: 202 at once, the signed report settles it.
    app.create_job(&job(
        "demo-slow",
        "demo",
        "slow",
        json!({"jobParams": {"seconds": 1}}),
    ))
    .await;
    let (_, created) = app.post("/api/v1/jobs/demo-slow/trigger", &json!({})).await;
    let trace = created[0]["traceId"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(5), "RUNNING after the 202", || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        (e["status"] == "RUNNING").then_some(())
    })
    .await;
    let rows = settled(&app, "demo-slow", 1).await;
    assert_eq!(rows[0]["status"], "SUCCESS");
    assert_eq!(rows[0]["resultMessage"], "worked 1s");

    // An executor with another secret refuses the scheduler's calls.
    app.create_job(&job(
        "demo-impostor",
        "impostor",
        "succeed",
        json!({"maxRetry": 0}),
    ))
    .await;
    app.post("/api/v1/jobs/demo-impostor/trigger", &json!({}))
        .await;
    let rows = settled(&app, "demo-impostor", 1).await;
    assert_eq!(rows[0]["status"], "FAILED");
    assert!(
        rows[0]["errorMessage"]
            .as_str()
            .unwrap()
            .starts_with("HTTP 401"),
        "{}",
        rows[0]
    );
}
