//! Dependency outages: the database cut for 30 s, an executor that answers 100 MiB.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::routing::post;
use chrono::{DateTime, Utc};
use serde_json::json;

use crate::helpers::{Backend, TestApp, TestDb, eventually, static_executors};
use crate::proxy::CutProxy;
use crate::recorder::Recorder;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_down_for_30_seconds_then_back() {
    let rec = Recorder::start().await;
    let db = Arc::new(TestDb::create(Backend::MySql).await);
    // The instance reaches its database through a proxy this test can cut.
    let (proxy, via_proxy) = CutProxy::in_front_of(&db.url).await;
    let addr = vec![rec.addr.clone()];
    let app = TestApp::spawn_with(db.clone(), move |s| {
        s.database.url = jobflow::config::Secret::new(via_proxy);
        s.executors.static_ = static_executors("svc", &addr);
        s.scheduler.misfire_tolerance_millis = 1000;
    })
    .await;
    app.create_job(&json!({"name": "through-outage", "serviceName": "svc", "handler": "h", "cron": "* * * * * ?", "maxRetry": 0})).await;
    eventually(
        Duration::from_secs(10),
        "fires before the outage",
        || async { (rec.calls().len() >= 2).then_some(()) },
    )
    .await;

    proxy.cut();
    let down_at = Utc::now();
    eventually(Duration::from_secs(10), "readiness 503", || async {
        (app.get("/health/ready").await.0 == 503).then_some(())
    })
    .await;
    let (_, ready) = app.get("/health/ready").await;
    assert!(
        ready["checks"]["database"]
            .as_str()
            .unwrap()
            .starts_with("DOWN"),
        "{ready}"
    );
    // The API answers (with 503 problems, not hangs or 500s) while the database is away.
    let started = Instant::now();
    let (status, problem) = app.get("/api/v1/jobs/through-outage").await;
    assert!(status == 503 || status == 500, "{status} {problem}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(app.get("/health/live").await.0, 200);
    tokio::time::sleep(
        Duration::from_secs(30).saturating_sub((Utc::now() - down_at).to_std().unwrap()),
    )
    .await;
    let calls_during = rec.calls().len();
    proxy.restore();
    let up_at = Utc::now();

    eventually(Duration::from_secs(20), "readiness 200", || async {
        (app.get("/health/ready").await.0 == 200).then_some(())
    })
    .await;
    eventually(
        Duration::from_secs(10),
        "fires after the outage",
        || async {
            rec.calls()
                .iter()
                .any(|c| c.received_at > up_at + chrono::Duration::seconds(3))
                .then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    let calls = rec.calls();
    let mut per_fire: HashMap<String, usize> = HashMap::new();
    for c in &calls {
        *per_fire
            .entry(c.header("x-fire-time").to_string())
            .or_default() += 1;
    }
    assert!(
        per_fire.values().all(|n| *n == 1),
        "a fire was dispatched twice: {per_fire:?}"
    );
    // FIRE_ONCE_NOW: the fires scheduled during the outage are caught up once after it, as
    // their latest instant (one misfire fired); instants at the very end of the outage may
    // also go out normally once the database answers.
    let after_outage: Vec<_> = calls
        .iter()
        .filter(|c| {
            let fire: DateTime<Utc> = c.header("x-fire-time").parse().unwrap();
            fire > down_at + chrono::Duration::seconds(1) && fire < up_at && c.received_at >= up_at
        })
        .collect();
    assert!(
        (1..=3).contains(&after_outage.len()),
        "outage fires dispatched after it: {}",
        after_outage.len()
    );
    let metrics = app.metrics().await;
    assert!(
        metrics
            .contains("scheduler_misfires_total{job_name=\"through-outage\",action=\"fired\"} 1"),
        "exactly one catch-up fire: {metrics}"
    );
    assert!(calls_during <= calls.len());
    // Every call the executor received has its row, settled.
    let rows = app.executions("through-outage").await;
    let by_trace: HashMap<String, String> = rows
        .iter()
        .map(|r| {
            (
                r["traceId"].as_str().unwrap().to_string(),
                r["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for c in calls.iter().filter(|c| c.received_at > up_at) {
        let status = eventually(Duration::from_secs(5), "the row of a call", || async {
            let (_, e) = app
                .get(&format!("/api/v1/jobs/executions/{}", c.trace_id()))
                .await;
            (e["status"] == "SUCCESS").then_some(e["status"].clone())
        })
        .await;
        assert_eq!(status, "SUCCESS");
    }
    assert!(!by_trace.is_empty());
}

/// A parent whose run succeeds while the database is cut still triggers its child: the
/// SUCCESS is written with the child's rows once the database answers, the child planned
/// from the engine's definitions when it cannot be read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_during_a_database_cut_triggers_its_children() {
    let rec = Recorder::slow_for("parent", Duration::from_secs(3)).await;
    let db = Arc::new(TestDb::create(Backend::MySql).await);
    let (proxy, via_proxy) = CutProxy::in_front_of(&db.url).await;
    let addr = vec![rec.addr.clone()];
    let app = TestApp::spawn_with(db.clone(), move |s| {
        s.database.url = jobflow::config::Secret::new(via_proxy);
        s.executors.static_ = static_executors("svc", &addr);
    })
    .await;
    app.create_job(
        &json!({"name": "child", "serviceName": "svc", "handler": "child", "cron": "0 0 3 1 1 ?"}),
    )
    .await;
    app.create_job(
        &json!({"name": "parent", "serviceName": "svc", "handler": "parent",
        "cron": "0 0 3 1 1 ?", "childJobs": ["child"]}),
    )
    .await;
    // The engine has read both definitions (within 2 s of a change).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (status, rows) = app.post("/api/v1/jobs/parent/trigger", &json!({})).await;
    assert_eq!(status, 200, "{rows}");
    eventually(Duration::from_secs(10), "the parent's call", || async {
        (!rec.calls().is_empty()).then_some(())
    })
    .await;
    // Cut while the parent runs; it answers SUCCESS during the cut.
    proxy.cut();
    tokio::time::sleep(Duration::from_secs(5)).await;
    proxy.restore();
    let child = eventually(Duration::from_secs(30), "the child's call", || async {
        rec.calls().into_iter().find(|c| c.handler == "child")
    })
    .await;
    assert_eq!(child.body["triggerType"], "CHILD", "{}", child.body);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let children = rec.calls().iter().filter(|c| c.handler == "child").count();
    assert_eq!(children, 1, "triggered once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_answering_100_mib_cannot_exhaust_the_scheduler() {
    // 100 MiB of error page, streamed; the scheduler must stop reading after its limit.
    let app_exec = axum::Router::new().route(
        "/internal/job/{h}",
        post(|| async {
            let chunk = bytes_of(1024 * 1024);
            let stream = futures::stream::iter(
                (0..100).map(move |_| Ok::<_, std::io::Error>(chunk.clone())),
            );
            (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                Body::from_stream(stream),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app_exec).await.unwrap() });
    let db = Arc::new(TestDb::create(Backend::Sqlite).await);
    let list = vec![addr];
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("flood", &list)
    })
    .await;
    app.create_job(&json!({"name": "flooded", "serviceName": "flood", "handler": "h", "cron": "0 0 3 1 1 ?", "maxRetry": 0})).await;
    let started = Instant::now();
    let (_, created) = app.post("/api/v1/jobs/flooded/trigger", &json!({})).await;
    let trace = created[0]["traceId"].as_str().unwrap().to_string();
    let e = eventually(Duration::from_secs(20), "FAILED", || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        (e["status"] == "FAILED").then_some(e)
    })
    .await;
    let error = e["errorMessage"].as_str().unwrap();
    assert!(error.starts_with("HTTP 500: xxxx"), "{error}");
    assert!(
        error.chars().count() <= 1020,
        "the stored excerpt is bounded ({} chars)",
        error.chars().count()
    );
    assert!(started.elapsed() < Duration::from_secs(15));
}

fn bytes_of(n: usize) -> axum::body::Bytes {
    axum::body::Bytes::from(vec![b'x'; n])
}
