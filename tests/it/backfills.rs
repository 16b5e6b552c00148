//! Backfills through the API with a recording executor: each past instant once, named by the
//! backfill, at its pace, cancellable, and a backfill sent again runs nothing twice.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, DurationRound, Utc};
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestDb, backend_tests, eventually, static_executors};
use crate::recorder::{Recorder, Reply};

backend_tests!(
    a_backfill_runs_each_past_instant_once_and_its_id_again_runs_nothing,
    a_backfill_keeps_its_pace_and_stops_when_cancelled,
    a_guarded_jobs_backfill_follows_its_overlap_policy,
    what_cannot_be_backfilled_is_refused_naming_the_field,
);

async fn app_with(backend: Backend, rec: &Recorder) -> TestApp {
    let db = Arc::new(TestDb::create(backend).await);
    let addr = vec![rec.addr.clone()];
    TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &addr);
    })
    .await
}

fn minute_ago(minutes: i64) -> DateTime<Utc> {
    Utc::now()
        .duration_trunc(chrono::Duration::minutes(1))
        .unwrap()
        - chrono::Duration::minutes(minutes)
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

async fn backfill(app: &TestApp, job: &str, body: Value) -> (u16, Value) {
    app.post(&format!("/api/v1/jobs/{job}/backfill"), &body)
        .await
}

async fn until_status(app: &TestApp, job: &str, id: &str, status: &str) -> Value {
    eventually(Duration::from_secs(20), status, || async {
        let (_, b) = app.get(&format!("/api/v1/jobs/{job}/backfills/{id}")).await;
        (b["status"] == status).then_some(b)
    })
    .await
}

async fn a_backfill_runs_each_past_instant_once_and_its_id_again_runs_nothing(backend: Backend) {
    let rec = Recorder::start().await;
    let app = app_with(backend, &rec).await;
    app.create_job(
        &json!({"name": "minutely", "serviceName": "svc", "handler": "h",
        "cron": "0 * * * * ?", "shardCount": 2, "enabled": false}),
    )
    .await;
    let (from, to) = (minute_ago(10), minute_ago(5));
    let body = json!({"from": rfc3339(from), "to": rfc3339(to), "backfillId": "fix-1", "maxPerSecond": 100});
    let (status, started) = backfill(&app, "minutely", body.clone()).await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(
        (
            &started["backfillId"],
            &started["fires"],
            &started["status"]
        ),
        (&json!("fix-1"), &json!(5), &json!("RUNNING"))
    );
    let done = until_status(&app, "minutely", "fix-1", "DONE").await;
    assert_eq!(done["done"], 5);
    let calls = eventually(Duration::from_secs(20), "5 calls", || async {
        let calls = rec.calls();
        (calls.len() >= 5).then_some(calls)
    })
    .await;
    // Every instant once, named by the backfill and the instant; both shards on the one
    // executor, in one range.
    let mut seen: Vec<(String, (u32, u32))> = calls
        .iter()
        .map(|c| {
            assert_eq!(c.body["triggerType"], "BACKFILL");
            let id = c.body["executionId"].as_str().unwrap();
            let fire: DateTime<Utc> = c.body["fireTime"].as_str().unwrap().parse().unwrap();
            let stamp = fire.format("%Y%m%d%H%M%S").to_string();
            assert!(
                id.starts_with("minutely:BACKFILL:") && id.contains(&format!("-{stamp}:")),
                "{id}"
            );
            (rfc3339(fire), c.range())
        })
        .collect();
    seen.sort();
    let expected: Vec<(String, (u32, u32))> = (0..5)
        .map(|m| (rfc3339(from + chrono::Duration::minutes(m)), (0, 1)))
        .collect();
    assert_eq!(seen, expected);
    // The same id again answers the backfill there is and starts nothing.
    let (status, again) = backfill(&app, "minutely", body).await;
    assert_eq!(status, 202);
    assert_eq!(
        (&again["status"], &again["done"]),
        (&json!("DONE"), &json!(5))
    );
    let (_, all) = app.get("/api/v1/jobs/minutely/backfills").await;
    assert_eq!(all.as_array().unwrap().len(), 1, "{all}");
    let rows = app.executions("minutely").await;
    assert_eq!(rows.len(), 5, "one row per range and instant");
    assert!(rows.iter().all(|r| r["triggerType"] == "BACKFILL"));
}

async fn a_backfill_keeps_its_pace_and_stops_when_cancelled(backend: Backend) {
    let rec = Recorder::start().await;
    let app = app_with(backend, &rec).await;
    app.create_job(
        &json!({"name": "secondly", "serviceName": "svc", "handler": "h",
        "cron": "* * * * * ?", "enabled": false}),
    )
    .await;
    let (from, to) = (minute_ago(30), minute_ago(28));
    let (status, started) = backfill(
        &app,
        "secondly",
        json!({"from": rfc3339(from), "to": rfc3339(to), "maxPerSecond": 2}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["fires"], 120);
    let id = started["backfillId"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(20), "a few instants", || async {
        let (_, b) = app
            .get(&format!("/api/v1/jobs/secondly/backfills/{id}"))
            .await;
        (b["done"].as_u64().unwrap() >= 4).then_some(())
    })
    .await;
    let (status, cancelled) = app
        .post(
            &format!("/api/v1/jobs/secondly/backfills/{id}/cancel"),
            &json!({}),
        )
        .await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "CANCELLED");
    let done = cancelled["done"].as_u64().unwrap();
    // At most two instants a second: nowhere near the 120.
    assert!(done < 20 && done % 2 == 0, "{cancelled}");
    // Exactly the instants recorded before the cancel have rows, the first `done` of them.
    let rows = app.executions("secondly").await;
    assert_eq!(rows.len() as u64, done);
    let mut fires: Vec<String> = rows
        .iter()
        .map(|r| r["fireTime"].as_str().unwrap().to_string())
        .collect();
    fires.sort();
    let first: DateTime<Utc> = fires[0].parse().unwrap();
    assert_eq!(first, from);
    // A cancelled backfill stays cancelled.
    let (_, again) = app
        .post(
            &format!("/api/v1/jobs/secondly/backfills/{id}/cancel"),
            &json!({}),
        )
        .await;
    assert_eq!(
        (&again["status"], &again["done"]),
        (&json!("CANCELLED"), &cancelled["done"])
    );
}

async fn a_guarded_jobs_backfill_follows_its_overlap_policy(backend: Backend) {
    // The first run outlasts the test: it must still be RUNNING when its rows are read, even
    // on a machine loaded by the rest of the suite.
    let rec = Recorder::with(|_| Reply::slow(Duration::from_secs(120))).await;
    let app = app_with(backend, &rec).await;
    app.create_job(
        &json!({"name": "one-at-a-time", "serviceName": "svc", "handler": "h",
        "cron": "0 * * * * ?", "overlapPolicy": "SKIP", "enabled": false}),
    )
    .await;
    let (from, to) = (minute_ago(10), minute_ago(7));
    let (status, started) = backfill(
        &app,
        "one-at-a-time",
        json!({"from": rfc3339(from), "to": rfc3339(to), "maxPerSecond": 10}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    // The three instants are recorded together; the first runs and the others find it
    // running.
    let rows = eventually(Duration::from_secs(60), "three rows settled", || async {
        let rows = app.executions("one-at-a-time").await;
        (rows.len() == 3 && rows.iter().all(|r| r["status"] != "PENDING")).then_some(rows)
    })
    .await;
    let mut statuses: Vec<&str> = rows.iter().map(|r| r["status"].as_str().unwrap()).collect();
    statuses.sort();
    assert_eq!(statuses, ["RUNNING", "SKIPPED", "SKIPPED"], "{rows:?}");
    assert_eq!(rec.calls().len(), 1);
}

async fn what_cannot_be_backfilled_is_refused_naming_the_field(backend: Backend) {
    let rec = Recorder::start().await;
    let app = app_with(backend, &rec).await;
    app.create_job(
        &json!({"name": "daily", "serviceName": "svc", "handler": "h",
        "cron": "0 0 2 * * ?"}),
    )
    .await;
    app.create_job(
        &json!({"name": "manual", "serviceName": "svc", "handler": "h",
        "scheduleType": "NONE"}),
    )
    .await;
    let past = rfc3339(minute_ago(60 * 24 * 3));
    let later = rfc3339(minute_ago(60 * 24));
    let future = rfc3339(Utc::now() + chrono::Duration::hours(1));
    for (job, body, field) in [
        ("daily", json!({"from": past, "to": future}), "to"),
        ("daily", json!({"from": later, "to": past}), "to"),
        ("daily", json!({"from": "yesterday", "to": later}), "from"),
        (
            "daily",
            json!({"from": past, "to": later, "backfillId": "a b"}),
            "backfillId",
        ),
        (
            "daily",
            json!({"from": past, "to": later, "maxPerSecond": 0}),
            "maxPerSecond",
        ),
        ("manual", json!({"from": past, "to": later}), "from"),
        (
            "daily",
            json!({"from": rfc3339(minute_ago(60 * 24 * 365 * 30)), "to": later}),
            "to",
        ),
    ] {
        let (status, problem) = backfill(&app, job, body.clone()).await;
        assert_eq!(status, 400, "{body}: {problem}");
        assert_eq!(problem["errors"][0]["field"], field, "{body}: {problem}");
    }
    let (status, _) = backfill(&app, "nowhere", json!({"from": past, "to": later})).await;
    assert_eq!(status, 404);
    let (status, _) = app.get("/api/v1/jobs/daily/backfills/none").await;
    assert_eq!(status, 404);
    let (status, _) = app
        .post("/api/v1/jobs/daily/backfills/none/cancel", &json!({}))
        .await;
    assert_eq!(status, 404);
    // Two days of a daily job: two instants.
    let (status, ok) = backfill(&app, "daily", json!({"from": past, "to": later})).await;
    assert_eq!(status, 202, "{ok}");
    assert_eq!(ok["fires"], 2, "{ok}");
}
