//! Execution logs through the API: lines shipped in batches come back in order with their
//! levels, page forward by cursor, are stored once however often a batch is shipped, say
//! `complete` only once the execution is final and its end read, and go with their execution
//! when retention purges it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{
    Backend, TestApp, TestDb, backend_tests, eventually, migrate_until, static_executors,
};
use crate::recorder::{Recorder, Reply};

backend_tests!(
    a_handlers_lines_reach_the_api_in_order_with_levels,
    a_batch_shipped_again_writes_nothing_twice_and_complete_needs_the_end,
    batches_arriving_together_are_each_answered_for_their_own_execution,
    what_cannot_be_shipped_or_read_is_refused_naming_the_field,
    retention_removes_logs_with_their_executions,
    a_rust_handlers_log_reaches_the_api_in_order_and_complete,
    the_log_links_to_the_log_system_when_one_is_configured,
    an_executor_killed_mid_run_keeps_what_it_had_shipped,
    lines_stored_one_to_a_row_read_back_after_the_upgrade,
    a_batch_out_of_order_stores_only_the_lines_not_held,
    a_log_carried_in_the_answer_is_whole_once_the_execution_reads_final,
    a_rust_handlers_log_goes_with_its_answer,
    a_report_carries_the_rest_of_the_log_even_when_it_comes_too_late,
);

/// An app calling the executors at `addrs` (signing its calls with `secret`), a job `name`
/// of their handler `handler` (with `fields` added) that fires only when triggered, and the
/// trace id of one trigger.
async fn triggered(
    backend: Backend,
    addrs: Vec<String>,
    secret: Option<&'static str>,
    job: Value,
) -> (TestApp, String) {
    let db = Arc::new(TestDb::create(backend).await);
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &addrs);
        s.executor.signing_secret = secret.map(jobflow::config::Secret::new);
    })
    .await;
    let mut body = json!({"serviceName": "svc", "cron": "0 0 0 1 1 ? 2099"});
    body.as_object_mut()
        .unwrap()
        .extend(job.as_object().unwrap().clone());
    app.create_job(&body).await;
    let name = job["name"].as_str().unwrap();
    let (status, fired) = app
        .post(&format!("/api/v1/jobs/{name}/trigger"), &json!({}))
        .await;
    assert_eq!(status, 200, "{fired}");
    let trace = fired[0]["traceId"].as_str().unwrap().to_string();
    (app, trace)
}

/// The address of an SDK executor serving `router`.
async fn serve(router: axum::Router) -> Vec<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = vec![listener.local_addr().unwrap().to_string()];
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// Waits until the execution reads `status`.
async fn until_status(app: &TestApp, trace: &str, status: &str) {
    eventually(Duration::from_secs(10), status, || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        (e["status"] == status).then_some(())
    })
    .await;
}

/// An app whose executor holds every call (the execution stays RUNNING until reported), and
/// the trace id of one triggered execution.
async fn running(backend: Backend) -> (TestApp, Recorder, String) {
    let rec = Recorder::with(|_| Reply::slow(Duration::from_secs(120))).await;
    let job = json!({"name": "logged", "handler": "h"});
    let (app, trace) = triggered(backend, vec![rec.addr.clone()], None, job).await;
    until_status(&app, &trace, "RUNNING").await;
    (app, rec, trace)
}

fn line(seq: i64, level: &str, message: &str) -> Value {
    let at = format!("2026-12-04T01:{:02}:{:02}.250Z", seq / 60 % 60, seq % 60);
    json!({"seq": seq, "at": at, "level": level, "message": message})
}

async fn ship(app: &TestApp, trace: &str, batch: Value) -> (u16, Value) {
    app.post(&format!("/api/v1/jobs/executions/{trace}/logs"), &batch)
        .await
}

async fn read(app: &TestApp, trace: &str, query: &str) -> Value {
    let (status, page) = app
        .get(&format!("/api/v1/jobs/executions/{trace}/logs{query}"))
        .await;
    assert_eq!(status, 200, "{page}");
    page
}

fn messages(page: &Value) -> Vec<(String, String)> {
    page["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["level"].as_str().unwrap().to_string(),
                l["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

async fn a_handlers_lines_reach_the_api_in_order_with_levels(backend: Backend) {
    let (app, _rec, trace) = running(backend).await;
    assert_eq!(
        read(&app, &trace, "").await,
        json!({"lines": [], "next": "0", "complete": false}),
        "nothing shipped yet"
    );
    let (status, ack) = ship(
        &app,
        &trace,
        json!({"lines": [line(1, "INFO", "loading 300 orders"), line(2, "WARN", "order 17: 订单 skipped")]}),
    )
    .await;
    assert_eq!((status, ack), (200, json!({"written": 2})));
    ship(
        &app,
        &trace,
        json!({"lines": [line(3, "ERROR", "order 42 failed")]}),
    )
    .await;
    let page = read(&app, &trace, "").await;
    assert_eq!(
        messages(&page),
        [
            ("INFO".into(), "loading 300 orders".into()),
            ("WARN".into(), "order 17: 订单 skipped".into()),
            ("ERROR".into(), "order 42 failed".into())
        ]
    );
    assert_eq!(page["lines"][0]["at"], "2026-12-04T01:00:01.250Z");
    assert_eq!(
        (&page["next"], &page["complete"]),
        (&json!("3"), &json!(false))
    );
    // Forward from a cursor, a page at a time.
    let page = read(&app, &trace, "?after=1&limit=1").await;
    assert_eq!(
        messages(&page),
        [("WARN".into(), "order 17: 订单 skipped".into())]
    );
    assert_eq!(page["next"], "2");
    let page = read(&app, &trace, "?after=3").await;
    assert_eq!((messages(&page), &page["next"]), (vec![], &json!("3")));
}

async fn a_batch_shipped_again_writes_nothing_twice_and_complete_needs_the_end(backend: Backend) {
    let (app, _rec, trace) = running(backend).await;
    let batch = json!({"lines": [line(1, "INFO", "one"), line(2, "INFO", "two")]});
    assert_eq!(
        ship(&app, &trace, batch.clone()).await.1,
        json!({"written": 2})
    );
    assert_eq!(
        ship(&app, &trace, batch).await.1,
        json!({"written": 0}),
        "a batch whose answer was lost, shipped again"
    );
    let (status, e) = app
        .post(
            &format!("/api/v1/jobs/executions/{trace}/result"),
            &json!({"success": true, "message": "done"}),
        )
        .await;
    assert_eq!(status, 200, "{e}");
    // Final, but the executor has not said the log ended: more may come.
    assert_eq!(read(&app, &trace, "").await["complete"], false);
    let (status, _) = ship(
        &app,
        &trace,
        // Whole numbers as a client whose numbers are doubles writes them.
        json!({"lines": [line(3, "DEBUG", "three")], "end": {"lines": 3.0, "droppedBytes": 0.0}}),
    )
    .await;
    assert_eq!(status, 200);
    let whole = read(&app, &trace, "").await;
    assert_eq!(
        (whole["lines"].as_array().unwrap().len(), &whole["complete"]),
        (3, &json!(true))
    );
    // A reader a page at a time is told complete only on the page that reaches the end.
    let first = read(&app, &trace, "?limit=2").await;
    assert_eq!(
        (&first["next"], &first["complete"]),
        (&json!("2"), &json!(false))
    );
    let last = read(&app, &trace, "?after=2&limit=2").await;
    assert_eq!(
        (messages(&last), &last["next"], &last["complete"]),
        (
            vec![("DEBUG".into(), "three".into())],
            &json!("3"),
            &json!(true)
        )
    );
}

/// Executors ship in order, but a batch may still come late (a retry racing a newer one):
/// the lines no stored batch holds are stored, the rest counted as held.
async fn a_batch_out_of_order_stores_only_the_lines_not_held(backend: Backend) {
    let (app, _rec, trace) = running(backend).await;
    let batch = |seqs: std::ops::RangeInclusive<i64>| {
        let lines: Vec<Value> = seqs
            .map(|s| line(s, "INFO", &format!("line {s}")))
            .collect();
        json!({ "lines": lines })
    };
    let mut written = Vec::new();
    for seqs in [6..=8, 12..=13, 1..=15, 3..=16] {
        let (status, ack) = ship(&app, &trace, batch(seqs)).await;
        assert_eq!(status, 200, "{ack}");
        written.push(ack["written"].as_u64().unwrap());
    }
    assert_eq!(written, [3, 2, 10, 1]);
    let page = read(&app, &trace, "?limit=1000").await;
    let expected: Vec<(String, String)> = (1..=16)
        .map(|s| ("INFO".to_string(), format!("line {s}")))
        .collect();
    assert_eq!(messages(&page), expected);
    // Pages cut inside a stored batch and across them.
    let mut seen = Vec::new();
    let mut after = "0".to_string();
    loop {
        let page = read(&app, &trace, &format!("?after={after}&limit=4")).await;
        if page["lines"].as_array().unwrap().is_empty() {
            break;
        }
        seen.extend(messages(&page));
        after = page["next"].as_str().unwrap().to_string();
    }
    assert_eq!(seen, expected);
}

/// Batches that arrive together are committed together; each answer still counts its own
/// new lines, and a batch for an execution that does not exist fails alone.
async fn batches_arriving_together_are_each_answered_for_their_own_execution(backend: Backend) {
    let (app, _rec, trace) = running(backend).await;
    // Ten batches of lines 1..=10, 6..=15, …, 46..=55 (each overlapping the next by five),
    // and ten batches for executions that do not exist, all at once.
    let known = (0..10).map(|i| {
        let lines: Vec<Value> = (i * 5 + 1..=i * 5 + 10)
            .map(|s| line(s, "INFO", &format!("line {s}")))
            .collect();
        let (app, trace) = (&app, trace.clone());
        async move { ship(app, &trace, json!({ "lines": lines })).await }
    });
    let unknown = (0..10).map(|i| {
        let app = &app;
        async move {
            ship(
                app,
                &format!("no-such-trace-{i}"),
                json!({"lines": [line(1, "INFO", "x")]}),
            )
            .await
        }
    });
    let (known, unknown) = tokio::join!(
        futures::future::join_all(known),
        futures::future::join_all(unknown)
    );
    assert!(
        unknown.iter().all(|(status, _)| *status == 404),
        "{unknown:?}"
    );
    assert!(known.iter().all(|(status, _)| *status == 200), "{known:?}");
    let written: u64 = known
        .iter()
        .map(|(_, ack)| ack["written"].as_u64().unwrap())
        .sum();
    assert_eq!(
        written, 55,
        "each line counted once, by the batch that stored it"
    );
    let page = read(&app, &trace, "?limit=1000").await;
    let seqs: Vec<String> = messages(&page).into_iter().map(|(_, m)| m).collect();
    let expected: Vec<String> = (1..=55).map(|s| format!("line {s}")).collect();
    assert_eq!(seqs, expected);
}

async fn what_cannot_be_shipped_or_read_is_refused_naming_the_field(backend: Backend) {
    let (app, _rec, trace) = running(backend).await;
    let field = |problem: &Value| problem["errors"][0]["field"].clone();
    let (status, p) = ship(&app, &trace, json!({"lines": [line(0, "INFO", "x")]})).await;
    assert_eq!((status, field(&p)), (400, json!("lines[0].seq")), "{p}");
    // Beyond 2^53 - 1 a JSON client may not read a number exactly.
    let (status, p) = ship(&app, &trace, json!({"lines": [line(1 << 53, "INFO", "x")]})).await;
    assert_eq!((status, field(&p)), (400, json!("lines[0].seq")), "{p}");
    let (status, p) = ship(&app, &trace, json!({"lines": [line(1, "LOUD", "x")]})).await;
    assert_eq!((status, field(&p)), (400, json!("lines[0].level")), "{p}");
    let long = "x".repeat(16 * 1024 + 1);
    let (status, p) = ship(&app, &trace, json!({"lines": [line(1, "INFO", &long)]})).await;
    assert_eq!((status, field(&p)), (400, json!("lines[0].message")), "{p}");
    let many: Vec<Value> = (1..=1001).map(|i| line(i, "INFO", "x")).collect();
    let (status, p) = ship(&app, &trace, json!({ "lines": many })).await;
    assert_eq!((status, field(&p)), (400, json!("lines")), "{p}");
    // Over the body limit: the same problem+json 413 as every other body of the API.
    let huge: Vec<Value> = (1..=80).map(|i| line(i, "INFO", &long[1..])).collect();
    let (status, p) = ship(&app, &trace, json!({ "lines": huge })).await;
    assert_eq!((status, &p["status"]), (413, &json!(413)), "{p}");
    let (status, _) = ship(
        &app,
        "no-such-trace",
        json!({"lines": [line(1, "INFO", "x")]}),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(
        read(&app, &trace, "").await["lines"],
        json!([]),
        "nothing refused was stored"
    );
    let (status, p) = app
        .get(&format!("/api/v1/jobs/executions/{trace}/logs?after=abc"))
        .await;
    assert_eq!((status, field(&p)), (400, json!("after")), "{p}");
    let (status, p) = app
        .get(&format!("/api/v1/jobs/executions/{trace}/logs?limit=0"))
        .await;
    assert_eq!((status, field(&p)), (400, json!("limit")), "{p}");
    let (status, _) = app.get("/api/v1/jobs/executions/no-such-trace/logs").await;
    assert_eq!(status, 404);
}

async fn retention_removes_logs_with_their_executions(backend: Backend) {
    let (app, _rec, trace) = running(backend).await;
    ship(
        &app,
        &trace,
        json!({"lines": [line(1, "INFO", "kept until purged")], "end": {"lines": 1}}),
    )
    .await;
    let purge = || {
        app.store.purge_executions_before(
            chrono::Utc::now() + chrono::Duration::hours(1),
            jobflow::store::PurgePace::unpaused(10),
        )
    };
    assert_eq!(purge().await.unwrap(), 0, "a RUNNING execution stays");
    assert_eq!(
        app.store.read_log(&trace, 0, 10).await.unwrap().lines.len(),
        1
    );
    app.post(
        &format!("/api/v1/jobs/executions/{trace}/result"),
        &json!({"success": true}),
    )
    .await;
    assert_eq!(purge().await.unwrap(), 1);
    let page = app.store.read_log(&trace, 0, 10).await.unwrap();
    assert_eq!((page.lines.len(), page.end), (0, None));
}

/// The Rust SDK end to end (calls and log batches signed): what the handler logs comes back
/// through the API in order with its levels, and the log is complete once the run ended.
async fn a_rust_handlers_log_reaches_the_api_in_order_and_complete(backend: Backend) {
    use jobflow_executor::{JobContext, JobExecutor, JobResult, logs};
    const SECRET: &str = "log-secret";
    let router = JobExecutor::with_secret(SECRET)
        .handler("logged", |ctx: JobContext| async move {
            logs::log(
                tracing::Level::INFO,
                format!("shards {}-{}", ctx.shard_start, ctx.shard_end),
            );
            for i in 1..=3 {
                logs::log(tracing::Level::DEBUG, format!("batch {i}"));
            }
            logs::log(tracing::Level::WARN, "order 17 skipped");
            JobResult::success("done")
        })
        .router();
    let job = json!({"name": "sdk-logged", "handler": "logged"});
    let (app, trace) = triggered(backend, serve(router).await, Some(SECRET), job).await;
    let page = eventually(Duration::from_secs(20), "the whole log", || async {
        let page = read(&app, &trace, "").await;
        (page["complete"] == true).then_some(page)
    })
    .await;
    assert_eq!(
        messages(&page),
        [
            ("INFO".into(), "shards 0-0".into()),
            ("DEBUG".into(), "batch 1".into()),
            ("DEBUG".into(), "batch 2".into()),
            ("DEBUG".into(), "batch 3".into()),
            ("WARN".into(), "order 17 skipped".into())
        ]
    );
    assert_eq!(page["next"], "5");
}

async fn the_log_links_to_the_log_system_when_one_is_configured(backend: Backend) {
    let (plain, _rec, trace) = running(backend).await;
    let link = |app: &TestApp, trace: &str| {
        let url = app.url(&format!("/api/v1/jobs/executions/{trace}/logs"));
        let client = app.client.clone();
        async move {
            let resp = client.get(url).send().await.unwrap();
            assert_eq!(resp.status(), 200);
            resp.headers()
                .get("link")
                .map(|v| v.to_str().unwrap().to_string())
        }
    };
    assert_eq!(link(&plain, &trace).await, None, "none configured");
    let db = Arc::new(TestDb::create(backend).await);
    let app = TestApp::spawn_with(db, |s| {
        s.log.execution_link = Some("https://logs.example/explore?q=trace_id%3D{traceId}".into());
    })
    .await;
    let (status, fired) = {
        app.create_job(
            &json!({"name": "linked", "serviceName": "nowhere", "handler": "h",
            "cron": "0 0 0 1 1 ? 2099"}),
        )
        .await;
        app.post("/api/v1/jobs/linked/trigger", &json!({})).await
    };
    assert_eq!(status, 200, "{fired}");
    let trace = fired[0]["traceId"].as_str().unwrap();
    assert_eq!(
        link(&app, trace).await.as_deref(),
        Some(
            format!("<https://logs.example/explore?q=trace_id%3D{trace}>; rel=\"related\"")
                .as_str()
        )
    );
}

/// An executor whose process dies mid-run (here its whole runtime, dropped at once: the
/// handler and the shipper end where they are): every line it shipped stays readable, in
/// order, and the log is not called complete while the execution is not final.
async fn an_executor_killed_mid_run_keeps_what_it_had_shipped(backend: Backend) {
    use jobflow_executor::{JobContext, JobExecutor, JobResult, logs};
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (kill_tx, kill_rx) = std::sync::mpsc::channel::<()>();
    let executor = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let router = JobExecutor::without_signatures()
            .handler("long", |_: JobContext| async {
                for i in 1..=600 {
                    logs::log(tracing::Level::INFO, format!("step {i}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                JobResult::success("never")
            })
            .router();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        addr_tx
            .send(listener.local_addr().unwrap().to_string())
            .unwrap();
        rt.spawn(async move { axum::serve(listener, router).await });
        let _ = kill_rx.recv();
        rt.shutdown_background();
    });
    let addr = vec![addr_rx.recv().unwrap()];
    let db = Arc::new(TestDb::create(backend).await);
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &addr);
    })
    .await;
    app.create_job(
        &json!({"name": "killed", "serviceName": "svc", "handler": "long",
        "cron": "0 0 0 1 1 ? 2099"}),
    )
    .await;
    let (_, fired) = app.post("/api/v1/jobs/killed/trigger", &json!({})).await;
    let trace = fired[0]["traceId"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(10), "two batches shipped", || async {
        (read(&app, &trace, "").await["lines"].as_array()?.len() > 10).then_some(())
    })
    .await;
    kill_tx.send(()).unwrap();
    executor.join().unwrap();
    let shipped = read(&app, &trace, "").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = read(&app, &trace, "").await;
    assert_eq!(
        after, shipped,
        "nothing more arrives, nothing shipped is lost"
    );
    let steps: Vec<String> = messages(&after).into_iter().map(|(_, m)| m).collect();
    let expected: Vec<String> = (1..=steps.len()).map(|i| format!("step {i}")).collect();
    assert_eq!(steps, expected, "in order, without a gap");
    assert_eq!(after["complete"], false, "the execution is not final");
}

/// The release before stored a line to a row; its lines are carried over, in order, with
/// their levels and times, and a batch shipped after the upgrade continues them.
async fn lines_stored_one_to_a_row_read_back_after_the_upgrade(backend: Backend) {
    let db = TestDb::create(backend).await;
    // The migration of the release that stored a line to a row.
    migrate_until(&db, backend, 20261204000001).await;
    let at = match backend {
        Backend::Sqlite => [
            "'2026-12-04T01:00:01.250+00:00'",
            "'2026-12-04T01:00:02.005+00:00'",
        ],
        Backend::MySql => ["'2026-12-04 01:00:01.250'", "'2026-12-04 01:00:02.005'"],
    };
    db.execute(&format!(
        "INSERT INTO job_execution_log (trace_id, seq, at, level, message) VALUES \
         ('t-old', 2, {}, 'WARN', 'order \"17\" skipped'), ('t-old', 1, {}, 'INFO', '订单 one')",
        at[1], at[0]
    ))
    .await;
    let store = jobflow::store::connect(&crate::helpers::base_settings(&db.url).database)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let page = store.read_log("t-old", 0, 10).await.unwrap();
    let read: Vec<(i64, String, String, String)> = page
        .lines
        .iter()
        .map(|l| {
            (
                l.seq,
                l.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                l.level.clone(),
                l.message.clone(),
            )
        })
        .collect();
    assert_eq!(
        read,
        [
            (
                1,
                "2026-12-04T01:00:01.250Z".into(),
                "INFO".into(),
                "订单 one".into()
            ),
            (
                2,
                "2026-12-04T01:00:02.005Z".into(),
                "WARN".into(),
                "order \"17\" skipped".into()
            ),
        ]
    );
    let page = store.read_log("t-old", 1, 10).await.unwrap();
    assert_eq!(page.lines.iter().map(|l| l.seq).collect::<Vec<_>>(), [2]);
}

/// An answer may carry the rest of the log (the SDKs' way for a handler that ends within its
/// call): it is stored before the verdict, so the execution never reads final with its log
/// still on the way. A batch shipped while the handler ran and overlapping the carried rest
/// writes nothing twice.
async fn a_log_carried_in_the_answer_is_whole_once_the_execution_reads_final(backend: Backend) {
    let answer = json!({"success": true, "message": "done", "logs": {
        "lines": [line(2, "WARN", "order 17 skipped"), line(3, "INFO", "done")],
        "end": {"lines": 3, "droppedBytes": 0}}});
    let rec = Recorder::with(move |_| Reply {
        delay: Duration::from_millis(300),
        ..Reply::status(200, &answer.to_string())
    })
    .await;
    let job = json!({"name": "carried", "handler": "h"});
    let (app, trace) = triggered(backend, vec![rec.addr.clone()], None, job).await;
    // Shipped while the handler ran: lines 1 and 2.
    let (status, _) = ship(
        &app,
        &trace,
        json!({"lines": [line(1, "INFO", "loading"), line(2, "WARN", "order 17 skipped")]}),
    )
    .await;
    assert_eq!(status, 200);
    until_status(&app, &trace, "SUCCESS").await;
    let page = read(&app, &trace, "").await;
    assert_eq!(
        (messages(&page), &page["complete"]),
        (
            vec![
                ("INFO".into(), "loading".into()),
                ("WARN".into(), "order 17 skipped".into()),
                ("INFO".into(), "done".into())
            ],
            &json!(true)
        )
    );
}

/// The Rust SDK carries what its handler logged in the answer: the log is complete the moment
/// the execution reads final (a last batch shipped on its own would come up to a second
/// later).
async fn a_rust_handlers_log_goes_with_its_answer(backend: Backend) {
    use jobflow_executor::{JobContext, JobExecutor, JobResult, logs};
    let router = JobExecutor::without_signatures()
        .handler("logged", |_: JobContext| async move {
            logs::log(tracing::Level::INFO, "loading");
            logs::log(tracing::Level::ERROR, "order 42 failed");
            JobResult::failure("one order failed")
        })
        .router();
    let job = json!({"name": "sdk-carried", "handler": "logged", "maxRetry": 0});
    let (app, trace) = triggered(backend, serve(router).await, None, job).await;
    let page = eventually(Duration::from_secs(10), "FAILED", || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        // Read right after the final status was seen.
        if e["status"] == "FAILED" {
            Some(read(&app, &trace, "").await)
        } else {
            None
        }
    })
    .await;
    assert_eq!(
        (messages(&page), &page["complete"]),
        (
            vec![
                ("INFO".into(), "loading".into()),
                ("ERROR".into(), "order 42 failed".into())
            ],
            &json!(true)
        )
    );
}

/// A background run's report carries the rest of its log: stored first, even when the report
/// itself comes too late (the execution was cancelled meanwhile, answered 409); a carried log
/// that breaks a rule fails the report with 400 naming the field under `logs`.
async fn a_report_carries_the_rest_of_the_log_even_when_it_comes_too_late(backend: Backend) {
    let (app, _rec, trace) = running(backend).await;
    let result = format!("/api/v1/jobs/executions/{trace}/result");
    let (status, body) = app
        .post(
            &result,
            &json!({"success": true, "logs": {"lines": [line(1, "NOTICE", "x")]}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("logs.lines[0].level"), "{body}");
    let (status, _) = app
        .post(
            &format!("/api/v1/jobs/executions/{trace}/cancel"),
            &json!({}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, body) = app
        .post(
            &result,
            &json!({"success": false, "status": "CANCELLED", "logs": {
                "lines": [line(1, "INFO", "loading"), line(2, "WARN", "stopped")],
                "end": {"lines": 2}}}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let page = read(&app, &trace, "").await;
    assert_eq!(
        (messages(&page), &page["complete"]),
        (
            vec![
                ("INFO".into(), "loading".into()),
                ("WARN".into(), "stopped".into())
            ],
            &json!(true)
        )
    );
}
