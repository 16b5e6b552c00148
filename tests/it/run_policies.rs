//! The job's run policies on the fire path, with real executors (recorders): routing,
//! overlap SKIP and COVER across two instances on one database, for cron fires, manual
//! triggers and child triggers, child jobs triggered once across two instances, a manual
//! trigger's body, and alerts raised by the dispatcher.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

use crate::helpers::{
    Backend, TestApp, TestDb, backend_tests, eventually, params_of_len, problem_fields,
    static_executors,
};
use crate::recorder::{Recorder, Reply};

backend_tests!(
    round_robin_spreads_unsharded_fires_over_the_executors,
    overlap_skip_records_the_fire_uncalled_across_instances,
    overlap_cover_cancels_the_running_execution_then_runs,
    a_manual_trigger_of_a_skip_job_that_still_runs_is_recorded_skipped,
    a_manual_trigger_of_a_cover_job_cancels_the_running_run_then_runs,
    a_child_trigger_of_a_skip_job_that_still_runs_is_recorded_skipped,
    child_jobs_run_once_after_every_range_succeeded,
    a_trigger_body_sets_params_and_executor,
    a_final_failure_raises_an_alert
);

async fn pair(backend: Backend, executors: Vec<String>) -> (TestApp, TestApp) {
    let db = Arc::new(TestDb::create(backend).await);
    let e = executors.clone();
    let a = TestApp::spawn_with(db.clone(), move |s| {
        s.executors.static_ = static_executors("svc", &e);
    })
    .await;
    let b = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &executors);
    })
    .await;
    (a, b)
}

async fn trigger(app: &TestApp, job: &str, body: Option<Value>) -> Vec<Value> {
    let (status, rows) = app
        .post(
            &format!("/api/v1/jobs/{job}/trigger"),
            &body.unwrap_or(json!({})),
        )
        .await;
    assert_eq!(status, 200, "{rows}");
    rows.as_array().unwrap().clone()
}

async fn round_robin_spreads_unsharded_fires_over_the_executors(backend: Backend) {
    let (r1, r2) = (Recorder::start().await, Recorder::start().await);
    let db = Arc::new(TestDb::create(backend).await);
    let addrs = vec![r1.addr.clone(), r2.addr.clone()];
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &addrs);
    })
    .await;
    app.create_job(
        &json!({"name": "spread", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?"}),
    )
    .await;
    for _ in 0..4 {
        trigger(&app, "spread", None).await;
    }
    eventually(Duration::from_secs(10), "four calls", || async {
        (r1.calls().len() + r2.calls().len() == 4).then_some(())
    })
    .await;
    assert_eq!(
        (r1.calls().len(), r2.calls().len()),
        (2, 2),
        "ROUND_ROBIN alternates"
    );
}

/// Instance `a` owns nothing of the job's schedule here: both instances fire it through the
/// trigger of a cron job at the next second; the SKIP decision reads the database.
async fn overlap_skip_records_the_fire_uncalled_across_instances(backend: Backend) {
    let slow = Recorder::with(|_| Reply::slow(Duration::from_secs(4))).await;
    let (a, b) = pair(backend, vec![slow.addr.clone()]).await;
    a.create_job(
        &json!({"name": "single", "serviceName": "svc", "handler": "h",
        "cron": "* * * * * ?", "overlapPolicy": "SKIP", "timeoutSeconds": 30, "maxRetry": 0}),
    )
    .await;
    let rows = eventually(
        Duration::from_secs(10),
        "a fire recorded SKIPPED",
        || async {
            let rows = b.executions("single").await;
            rows.iter()
                .any(|r| r["status"] == "SKIPPED")
                .then_some(rows)
        },
    )
    .await;
    let skipped = rows.iter().find(|r| r["status"] == "SKIPPED").unwrap();
    assert!(
        skipped["errorMessage"]
            .as_str()
            .unwrap()
            .contains("overlapPolicy SKIP"),
        "{skipped}"
    );
    let calls = slow.calls();
    assert!(
        calls
            .iter()
            .all(|c| c.trace_id() != skipped["traceId"].as_str().unwrap()),
        "a SKIPPED fire is not called"
    );
    // While the first run lasts, no second call starts.
    let first = calls[0].received_at;
    assert!(
        calls
            .iter()
            .skip(1)
            .all(|c| c.received_at - first >= chrono::Duration::seconds(3))
    );
}

async fn overlap_cover_cancels_the_running_execution_then_runs(backend: Backend) {
    let slow = Recorder::with(|_| Reply::slow(Duration::from_secs(30))).await;
    let (a, b) = pair(backend, vec![slow.addr.clone()]).await;
    a.create_job(
        &json!({"name": "newest", "serviceName": "svc", "handler": "h",
        "cron": "* * * * * ?", "overlapPolicy": "COVER", "timeoutSeconds": 60, "maxRetry": 0}),
    )
    .await;
    let rows = eventually(Duration::from_secs(15), "a covered execution", || async {
        let rows = b.executions("newest").await;
        rows.iter()
            .any(|r| r["status"] == "CANCELLED")
            .then_some(rows)
    })
    .await;
    let cancelled = rows.iter().find(|r| r["status"] == "CANCELLED").unwrap();
    assert!(
        cancelled["errorMessage"]
            .as_str()
            .unwrap()
            .contains("overlapPolicy COVER"),
        "{cancelled}"
    );
    // The row is CANCELLED before the executor is asked to stop it.
    let trace = cancelled["traceId"].as_str().unwrap().to_string();
    eventually(
        Duration::from_secs(5),
        "the cancel at the executor",
        || async { slow.cancels().contains(&trace).then_some(()) },
    )
    .await;
    a.patch("/api/v1/jobs/newest/enabled?enabled=false").await;
}

fn traces(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| r["traceId"].as_str().unwrap().to_string())
        .collect()
}

/// A manual trigger is held to SKIP like a cron fire: while the job runs (on the other
/// instance), the trigger answers its rows SKIPPED and calls nothing; once the run ended, the
/// next trigger runs.
async fn a_manual_trigger_of_a_skip_job_that_still_runs_is_recorded_skipped(backend: Backend) {
    let (r1, r2) = (
        Recorder::with(|_| Reply::slow(Duration::from_secs(4))).await,
        Recorder::with(|_| Reply::slow(Duration::from_secs(4))).await,
    );
    let (a, b) = pair(backend, vec![r1.addr.clone(), r2.addr.clone()]).await;
    a.create_job(
        &json!({"name": "non-reentrant", "serviceName": "svc", "handler": "h",
        "cron": "0 0 3 1 1 ?", "shardCount": 2, "overlapPolicy": "SKIP",
        "timeoutSeconds": 30, "maxRetry": 0}),
    )
    .await;
    let running = trigger(&a, "non-reentrant", None).await;
    eventually(Duration::from_secs(10), "both ranges called", || async {
        (r1.calls().len() + r2.calls().len() == 2).then_some(())
    })
    .await;
    let body = json!({"jobParams": {"again": true}});
    let skipped = trigger(&b, "non-reentrant", Some(body)).await;
    assert_eq!(skipped.len(), 2, "one row per range: {skipped:?}");
    for row in &skipped {
        assert_eq!(row["status"], "SKIPPED", "{row}");
        assert_eq!(row["triggerType"], "MANUAL", "{row}");
        let why = row["errorMessage"].as_str().unwrap();
        assert!(why.contains("overlapPolicy SKIP"), "{why}");
        for t in traces(&running) {
            assert!(why.contains(&t), "names the running {t}: {why}");
        }
    }
    // The running run ends on its own; nothing else was called meanwhile.
    for t in traces(&running) {
        a.execution_in(&t, "SUCCESS", Duration::from_secs(15)).await;
    }
    for t in traces(&skipped) {
        b.execution_in(&t, "SKIPPED", Duration::ZERO).await;
    }
    assert_eq!(
        r1.calls().len() + r2.calls().len(),
        2,
        "the SKIPPED rows were not called"
    );
    let called: Vec<String> = r1
        .calls()
        .iter()
        .chain(&r2.calls())
        .map(|c| c.trace_id().to_string())
        .collect();
    assert!(traces(&skipped).iter().all(|t| !called.contains(t)));
    // Nothing runs any more: the next trigger runs.
    let next = trigger(&b, "non-reentrant", None).await;
    assert!(next.iter().all(|r| r["status"] == "PENDING"), "{next:?}");
    eventually(Duration::from_secs(10), "the next run's calls", || async {
        (r1.calls().len() + r2.calls().len() == 4).then_some(())
    })
    .await;
}

/// A manual trigger of a COVER job cancels the running execution (the executor is asked to
/// stop it) before it answers, then runs.
async fn a_manual_trigger_of_a_cover_job_cancels_the_running_run_then_runs(backend: Backend) {
    let slow = Recorder::with(|_| Reply::slow(Duration::from_secs(30))).await;
    let (a, b) = pair(backend, vec![slow.addr.clone()]).await;
    a.create_job(
        &json!({"name": "latest-wins", "serviceName": "svc", "handler": "h",
        "cron": "0 0 3 1 1 ?", "overlapPolicy": "COVER", "timeoutSeconds": 60, "maxRetry": 0}),
    )
    .await;
    let first = trigger(&a, "latest-wins", None).await;
    let first = first[0]["traceId"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(10), "the first call", || async {
        (slow.calls().len() == 1).then_some(())
    })
    .await;
    let second = trigger(&b, "latest-wins", None).await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0]["status"], "PENDING", "{}", second[0]);
    assert_eq!(second[0]["triggerType"], "MANUAL");
    // Cancelled, and asked to stop, before the trigger answered.
    let covered = b.execution_in(&first, "CANCELLED", Duration::ZERO).await;
    assert!(
        covered["errorMessage"]
            .as_str()
            .unwrap()
            .contains("overlapPolicy COVER"),
        "{covered}"
    );
    assert_eq!(slow.cancels(), vec![first.clone()]);
    let second = second[0]["traceId"].as_str().unwrap().to_string();
    let call = eventually(Duration::from_secs(10), "the second call", || async {
        slow.calls().get(1).cloned()
    })
    .await;
    assert_eq!(call.trace_id(), second);
    assert_eq!(slow.calls().len(), 2);
    a.execution_in(&second, "RUNNING", Duration::from_secs(5))
        .await;
}

/// A child job with SKIP that still runs: the parent's success records the child's trigger
/// SKIPPED (trigger type CHILD) and does not call it.
async fn a_child_trigger_of_a_skip_job_that_still_runs_is_recorded_skipped(backend: Backend) {
    let rec = Recorder::slow_for("slow-child", Duration::from_secs(30)).await;
    let (a, b) = pair(backend, vec![rec.addr.clone()]).await;
    a.create_job(
        &json!({"name": "report", "serviceName": "svc", "handler": "slow-child",
        "cron": "0 0 3 1 1 ?", "overlapPolicy": "SKIP", "timeoutSeconds": 60, "maxRetry": 0}),
    )
    .await;
    a.create_job(
        &json!({"name": "import", "serviceName": "svc", "handler": "p", "cron": "0 0 3 1 1 ?",
        "childJobs": ["report"]}),
    )
    .await;
    let running = trigger(&a, "report", None).await;
    let running = running[0]["traceId"].as_str().unwrap().to_string();
    eventually(
        Duration::from_secs(10),
        "the child's own run called",
        || async { (rec.calls().len() == 1).then_some(()) },
    )
    .await;
    let parent = trigger(&b, "import", None).await;
    let parent = parent[0]["traceId"].as_str().unwrap().to_string();
    let child = eventually(Duration::from_secs(10), "the child trigger", || async {
        a.executions("report")
            .await
            .into_iter()
            .find(|r| r["triggerType"] == "CHILD")
    })
    .await;
    assert_eq!(child["status"], "SKIPPED", "{child}");
    assert_eq!(child["parentTraceId"], parent.as_str());
    let why = child["errorMessage"].as_str().unwrap();
    assert!(
        why.contains("overlapPolicy SKIP") && why.contains(&running),
        "{why}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let calls: Vec<String> = rec.calls().iter().map(|c| c.handler.clone()).collect();
    assert_eq!(
        calls,
        vec!["slow-child", "p"],
        "the SKIPPED child is not called"
    );
    assert_eq!(a.executions("report").await.len(), 2);
}

async fn child_jobs_run_once_after_every_range_succeeded(backend: Backend) {
    let (r1, r2) = (Recorder::start().await, Recorder::start().await);
    let (a, b) = pair(backend, vec![r1.addr.clone(), r2.addr.clone()]).await;
    a.create_job(
        &json!({"name": "child", "serviceName": "svc", "handler": "c", "cron": "0 0 3 1 1 ?"}),
    )
    .await;
    a.create_job(
        &json!({"name": "parent", "serviceName": "svc", "handler": "p", "cron": "0 0 3 1 1 ?",
        "shardCount": 2, "childJobs": ["child"]}),
    )
    .await;
    let parents = trigger(&b, "parent", None).await;
    assert_eq!(parents.len(), 2, "two ranges");
    let child = eventually(Duration::from_secs(10), "the child run", || async {
        let rows = a.executions("child").await;
        (rows.len() == 1 && rows[0]["status"] == "SUCCESS").then(|| rows[0].clone())
    })
    .await;
    assert_eq!(child["triggerType"], "CHILD");
    let parent_traces: Vec<&str> = parents
        .iter()
        .map(|p| p["traceId"].as_str().unwrap())
        .collect();
    assert!(parent_traces.contains(&child["parentTraceId"].as_str().unwrap()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(a.executions("child").await.len(), 1, "triggered once");
}

async fn a_trigger_body_sets_params_and_executor(backend: Backend) {
    let (r1, r2) = (Recorder::start().await, Recorder::start().await);
    let db = Arc::new(TestDb::create(backend).await);
    let addrs = vec![r1.addr.clone(), r2.addr.clone()];
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &addrs);
    })
    .await;
    app.create_job(
        &json!({"name": "by-hand", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?",
        "shardCount": 4, "jobParams": {"day": "monday"}}),
    )
    .await;
    let rows = trigger(
        &app,
        "by-hand",
        Some(json!({"jobParams": {"day": "friday"}, "executor": r2.addr})),
    )
    .await;
    assert_eq!(rows.len(), 1, "one range: one executor chosen");
    let call = eventually(Duration::from_secs(10), "the call", || async {
        r2.calls().first().cloned()
    })
    .await;
    assert_eq!(call.body["jobParams"], json!({"day": "friday"}));
    assert_eq!(call.range(), (0, 3));
    assert!(r1.calls().is_empty());
    let (status, problem) = app
        .post(
            "/api/v1/jobs/by-hand/trigger",
            &json!({"executor": "127.0.0.1:1"}),
        )
        .await;
    assert_eq!(status, 409, "{problem}");
    let (status, problem) = app
        .post(
            "/api/v1/jobs/by-hand/trigger",
            &json!({"executor": "not an address"}),
        )
        .await;
    assert_eq!(status, 400, "{problem}");
    assert!(problem.to_string().contains("executor"), "{problem}");
    // The run's params are stored on its rows: they must fit the column, as a job's.
    let (status, problem) = app
        .post(
            "/api/v1/jobs/by-hand/trigger",
            &json!({"jobParams": params_of_len(65_536)}),
        )
        .await;
    assert_eq!(status, 400, "{problem}");
    assert_eq!(problem_fields(&problem), vec!["jobParams"]);
    let rows = trigger(
        &app,
        "by-hand",
        Some(json!({"jobParams": params_of_len(65_535)})),
    )
    .await;
    assert_eq!(rows.len(), 2, "{rows:?}");
}

#[derive(Clone, Default)]
struct Inbox(Arc<Mutex<Vec<Value>>>);

async fn receive(State(inbox): State<Inbox>, body: axum::body::Bytes) -> &'static str {
    inbox
        .0
        .lock()
        .unwrap()
        .push(serde_json::from_slice(&body).unwrap());
    "ok"
}

async fn a_final_failure_raises_an_alert(backend: Backend) {
    let failing = Recorder::with(|_| Reply::status(500, "broken")).await;
    let inbox = Inbox::default();
    let app_router = Router::new()
        .route("/hook", post(receive))
        .with_state(inbox.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app_router).await.unwrap() });
    let db = Arc::new(TestDb::create(backend).await);
    let addr = vec![failing.addr.clone()];
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &addr);
        s.alerts.default_channels = vec!["ops".into()];
        s.alerts.channels = vec![jobflow::alerts::ChannelSettings {
            name: "ops".into(),
            kind: jobflow::alerts::ChannelKind::Webhook,
            url: jobflow::config::Secret::new(hook),
            secret: None,
        }];
    })
    .await;
    app.create_job(&json!({"name": "breaks", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?", "maxRetry": 1}))
        .await;
    trigger(&app, "breaks", None).await;
    let alert = eventually(Duration::from_secs(15), "the alert", || async {
        inbox.0.lock().unwrap().first().cloned()
    })
    .await;
    assert_eq!(alert["event"], "EXECUTION_FAILED");
    assert_eq!(alert["jobName"], "breaks");
    assert_eq!(alert["retryCount"], 1, "only after the last retry");
    assert_eq!(alert["status"], "FAILED");
}
