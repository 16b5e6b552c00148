//! Every failure path ends in the right status and row history.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestDb, backend_tests, eventually, static_executors};
use crate::recorder::{Recorder, Reply, dead_address};

backend_tests!(
    http_500_fails_and_retries_stop_at_max_retry,
    no_answer_within_the_timeout_is_timeout,
    refused_connection_fails_over_to_the_next_executor,
    accepted_then_reported,
    no_executor_is_a_clear_failure,
    manual_trigger_and_operator_retry,
    an_overloaded_scheduler_keeps_its_backlog_bounded,
);

async fn app_with(backend: Backend, service: &str, executors: Vec<String>) -> TestApp {
    let db = Arc::new(TestDb::create(backend).await);
    let service = service.to_string();
    TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors(&service, &executors);
        s.scheduler.retry_backoff_millis = 100u64.try_into().unwrap();
        s.scheduler.retry_backoff_max_millis = 200u64.try_into().unwrap();
    })
    .await
}

fn manual_job(name: &str, service: &str, extra: Value) -> Value {
    let mut j =
        json!({"name": name, "serviceName": service, "handler": "work", "cron": "0 0 3 1 1 ?"});
    for (k, v) in extra.as_object().unwrap() {
        j[k] = v.clone();
    }
    j
}

/// An operator's retry of execution `trace`: the answer's status and body.
async fn operator_retry(app: &TestApp, trace: &str) -> (u16, Value) {
    app.post(
        &format!("/api/v1/jobs/executions/{trace}/retry"),
        &json!({}),
    )
    .await
}

async fn trigger(app: &TestApp, job: &str) -> Vec<Value> {
    let (status, body) = app
        .post(&format!("/api/v1/jobs/{job}/trigger"), &json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    body.as_array().unwrap().clone()
}

/// Waits until `job` has `n` executions, all final, and returns them oldest first.
async fn settled(app: &TestApp, job: &str, n: usize) -> Vec<Value> {
    let mut rows = eventually(Duration::from_secs(15), "settled executions", || async {
        let rows = app.executions(job).await;
        let done = rows.len() == n
            && rows
                .iter()
                .all(|r| ["SUCCESS", "FAILED", "TIMEOUT"].contains(&r["status"].as_str().unwrap()));
        done.then_some(rows)
    })
    .await;
    rows.sort_by_key(|r| r["id"].as_i64());
    rows
}

async fn http_500_fails_and_retries_stop_at_max_retry(backend: Backend) {
    let rec = Recorder::with(|_| Reply::status(500, "database is on fire")).await;
    let app = app_with(backend, "svc", vec![rec.addr.clone()]).await;
    // Metrics are process-wide: the name is unique per backend variant of this test.
    let job = format!("breaks-{backend:?}").to_lowercase();
    app.create_job(&manual_job(&job, "svc", json!({"maxRetry": 2})))
        .await;
    let created = trigger(&app, &job).await;
    assert_eq!(created.len(), 1);
    assert_eq!(created[0]["triggerType"], "MANUAL");
    let rows = settled(&app, &job, 3).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        app.executions(&job).await.len(),
        3,
        "no retry past maxRetry"
    );
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["status"], "FAILED");
        assert_eq!(r["retryCount"], i);
        assert!(
            r["errorMessage"]
                .as_str()
                .unwrap()
                .contains("HTTP 500: database is on fire"),
            "{r}"
        );
        if i > 0 {
            assert_eq!(r["triggerType"], "RETRY");
            assert_eq!(r["parentTraceId"], rows[i - 1]["traceId"]);
            assert_eq!(
                r["executionId"],
                format!("{}#r{i}", rows[0]["executionId"].as_str().unwrap())
            );
            assert_eq!(r["fireTime"], rows[0]["fireTime"]);
        }
    }
    let calls = rec.calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(
        calls
            .iter()
            .map(|c| c.header("x-retry-count").to_string())
            .collect::<Vec<_>>(),
        ["0", "1", "2"]
    );
    let m = app.metrics().await;
    assert!(
        m.contains(&format!(
            "job_execution_failures_total{{job_name=\"{job}\"}} 3"
        )),
        "{m}"
    );
}

async fn no_answer_within_the_timeout_is_timeout(backend: Backend) {
    // The executor neither answers nor stops on its own (the SDK would stop it at the job's
    // timeout): the scheduler waits the timeout plus its grace, asks the executor to stop,
    // and only with the stop confirmed settles TIMEOUT.
    let rec = Recorder::with(|_| Reply::slow(Duration::from_secs(20))).await;
    let app = app_with(backend, "svc", vec![rec.addr.clone()]).await;
    app.create_job(&manual_job(
        "sleepy",
        "svc",
        json!({"timeoutSeconds": 1, "maxRetry": 0}),
    ))
    .await;
    let trace = trigger(&app, "sleepy").await[0]["traceId"]
        .as_str()
        .unwrap()
        .to_string();
    let rows = settled(&app, "sleepy", 1).await;
    assert_eq!(rows[0]["status"], "TIMEOUT");
    assert_eq!(
        rows[0]["errorMessage"],
        "no answer within 6s; the executor stopped it on request"
    );
    assert_eq!(rec.cancels(), [trace]);
}

async fn refused_connection_fails_over_to_the_next_executor(backend: Backend) {
    let rec = Recorder::start().await;
    let dead = dead_address().await;
    // Two ranges over two executors: whichever range the dead one gets fails over.
    let app = app_with(backend, "svc", vec![dead, rec.addr.clone()]).await;
    app.create_job(&manual_job("failover", "svc", json!({"shardCount": 2})))
        .await;
    let created = trigger(&app, "failover").await;
    assert_eq!(created.len(), 2, "two executors, two ranges");
    let rows = settled(&app, "failover", 2).await;
    for r in &rows {
        assert_eq!(r["status"], "SUCCESS", "{r}");
        assert_eq!(r["executorInstance"], rec.addr.as_str());
    }
    let mut ranges: Vec<(u32, u32)> = rec.calls().iter().map(|c| c.range()).collect();
    ranges.sort();
    assert_eq!(
        ranges,
        [(0, 0), (1, 1)],
        "the live executor ran the dead one's range too"
    );
}

async fn accepted_then_reported(backend: Backend) {
    let rec = Recorder::with(|_| Reply::status(202, "")).await;
    let app = app_with(backend, "svc", vec![rec.addr.clone()]).await;
    app.create_job(&manual_job("long-report", "svc", json!({"maxRetry": 0})))
        .await;
    let trace = trigger(&app, "long-report").await[0]["traceId"]
        .as_str()
        .unwrap()
        .to_string();
    let call = eventually(Duration::from_secs(5), "the call", || async {
        rec.calls().first().cloned()
    })
    .await;
    let report_url = call.body["reportUrl"].as_str().unwrap().to_string();
    assert_eq!(
        report_url,
        app.url(&format!("/api/v1/jobs/executions/{trace}/result"))
    );
    // RUNNING is written right after the call went out.
    eventually(Duration::from_secs(5), "RUNNING", || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        (e["status"] == "RUNNING").then_some(())
    })
    .await;

    let (status, problem) = app
        .post(
            &format!("/api/v1/jobs/executions/{trace}/result"),
            &json!({"success": "yes"}),
        )
        .await;
    assert_eq!(status, 400, "{problem}");
    let (status, e) = app
        .post(
            &format!("/api/v1/jobs/executions/{trace}/result"),
            &json!({"success": true, "message": "42 rows"}),
        )
        .await;
    assert_eq!(status, 200, "{e}");
    assert_eq!(e["status"], "SUCCESS");
    assert_eq!(e["resultMessage"], "42 rows");
    // A second (late, contradicting) report does not overwrite the first.
    let (status, _) = app
        .post(
            &format!("/api/v1/jobs/executions/{trace}/result"),
            &json!({"success": false, "message": "late"}),
        )
        .await;
    assert_eq!(status, 409);
    let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
    assert_eq!(e["status"], "SUCCESS");
    let (status, _) = app
        .post(
            "/api/v1/jobs/executions/0000/result",
            &json!({"success": true}),
        )
        .await;
    assert_eq!(status, 404);
}

async fn no_executor_is_a_clear_failure(backend: Backend) {
    let app = app_with(backend, "svc", vec![]).await;
    app.create_job(&manual_job(
        "orphan",
        "nobody-home",
        json!({"maxRetry": 1, "shardCount": 3}),
    ))
    .await;
    let created = trigger(&app, "orphan").await;
    assert_eq!(created.len(), 1);
    assert_eq!(created[0]["status"], "FAILED");
    assert_eq!(
        (
            created[0]["shardStart"].as_u64(),
            created[0]["shardEnd"].as_u64()
        ),
        (Some(0), Some(2))
    );
    let rows = settled(&app, "orphan", 2).await;
    for r in &rows {
        assert_eq!(r["status"], "FAILED");
        assert!(
            r["errorMessage"]
                .as_str()
                .unwrap()
                .contains("no executor instance available for service `nobody-home`"),
            "{r}"
        );
    }
    assert_eq!(rows[1]["triggerType"], "RETRY");
    // The instance is still healthy and answering.
    assert_eq!(app.get("/health/ready").await.0, 200);
}

async fn manual_trigger_and_operator_retry(backend: Backend) {
    let fail_first = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flag = fail_first.clone();
    let rec = Recorder::with(move |_| {
        if flag.swap(false, std::sync::atomic::Ordering::SeqCst) {
            Reply::status(503, "warming up")
        } else {
            Reply::ok()
        }
    })
    .await;
    let app = app_with(backend, "svc", vec![rec.addr.clone()]).await;
    app.create_job(&manual_job("by-hand", "svc", json!({"maxRetry": 0})))
        .await;
    let trace = trigger(&app, "by-hand").await[0]["traceId"]
        .as_str()
        .unwrap()
        .to_string();
    let rows = settled(&app, "by-hand", 1).await;
    assert_eq!(rows[0]["status"], "FAILED");

    let (status, retry) = operator_retry(&app, &trace).await;
    assert_eq!(status, 200, "{retry}");
    assert_eq!(retry["triggerType"], "RETRY");
    assert_eq!(retry["parentTraceId"], trace.as_str());
    assert_eq!(retry["retryCount"], 1);
    let rows = settled(&app, "by-hand", 2).await;
    assert_eq!(rows[1]["status"], "SUCCESS");
    assert_eq!(
        rec.calls()[1].trace_id(),
        retry["traceId"].as_str().unwrap()
    );
    // Deleted and created again under its name, it is another job: its earlier executions
    // are not re-run with the new definition (the fault campaign found one).
    assert_eq!(app.delete("/api/v1/jobs/by-hand").await.0, 204);
    app.create_job(&manual_job("by-hand", "svc", json!({"maxRetry": 0})))
        .await;
    let (status, problem) = operator_retry(&app, &trace).await;
    assert_eq!(status, 409, "{problem}");
    assert_eq!(rec.calls().len(), 2, "nothing called");

    // Retrying something still running is refused.
    let pending = Recorder::with(|_| Reply::status(202, "")).await;
    let app = app_with(backend, "async-svc", vec![pending.addr.clone()]).await;
    app.create_job(&manual_job("still-running", "async-svc", json!({})))
        .await;
    let trace = trigger(&app, "still-running").await[0]["traceId"]
        .as_str()
        .unwrap()
        .to_string();
    eventually(Duration::from_secs(5), "RUNNING", || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        (e["status"] == "RUNNING").then_some(())
    })
    .await;
    let (status, problem) = operator_retry(&app, &trace).await;
    assert_eq!(status, 409, "{problem}");
}

/// Executors slower than the schedule: calls stay within `executor.max_in_flight`, fires
/// waiting between hand-off and result stay within the backlog (`executor.max_backlog`), and
/// the instants that wait too long follow the misfire policy instead of piling up.
async fn an_overloaded_scheduler_keeps_its_backlog_bounded(backend: Backend) {
    let answer = Duration::from_millis(1500);
    let rec = Recorder::with(move |_| Reply::slow(answer)).await;
    let db = Arc::new(TestDb::create(backend).await);
    let url = db.url.clone();
    let addr = rec.addr.clone();
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &[addr]);
        s.executor.max_in_flight = 1usize.try_into().unwrap();
        s.executor.max_backlog = 8usize.try_into().unwrap();
    })
    .await;
    let jobs: Vec<String> = (0..6).map(|i| format!("busy-{i}")).collect();
    for j in &jobs {
        app.create_job(&json!({"name": j, "serviceName": "svc", "handler": "work",
            "cron": "* * * * * ?", "maxRetry": 0, "timeoutSeconds": 10}))
            .await;
    }
    // One statement counts the open rows, so the count is a snapshot (counting job by job
    // could see a fire finish in one job and its successor start in another).
    let mut most_open = 0;
    for _ in 0..24 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        most_open = most_open.max(open_rows(backend, &url).await);
    }
    assert!(
        most_open <= 8,
        "{most_open} fires open at once; the backlog is 8"
    );
    let mut calls = rec.calls();
    assert!(calls.len() >= 5, "only {} calls in 12 s", calls.len());
    calls.sort_by_key(|c| c.received_at);
    for pair in calls.windows(2) {
        let gap = pair[1].received_at - pair[0].received_at;
        assert!(
            gap >= chrono::Duration::milliseconds(1400),
            "two calls in flight at once ({gap} apart); the limit is 1"
        );
    }
    let mut fires: Vec<(String, String)> = calls
        .iter()
        .map(|c| {
            (
                c.header("x-job-name").into(),
                c.header("x-fire-time").into(),
            )
        })
        .collect();
    fires.sort();
    let n = fires.len();
    fires.dedup();
    assert_eq!(fires.len(), n, "a fire was called twice");
    let metrics = app.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("scheduler_misfires_total") && l.contains(r#"action="fired""#)),
        "instants that waited beyond the tolerance are caught up once, as misfires"
    );
}

/// PENDING and RUNNING rows, counted by one statement.
async fn open_rows(backend: Backend, url: &str) -> i64 {
    use sqlx::Connection;
    let sql = "SELECT COUNT(*) FROM job_execution WHERE status IN ('PENDING', 'RUNNING')";
    match backend {
        Backend::MySql => {
            let mut c = sqlx::MySqlConnection::connect(url).await.unwrap();
            sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap()
        }
        Backend::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
            sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap()
        }
    }
}
