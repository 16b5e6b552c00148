//! Schedule types (job field `scheduleType`): `FIXED_RATE` fires every `intervalSeconds` from
//! `startAt`, `FIXED_DELAY` `intervalSeconds` after the previous fire ended, `ONCE` at `startAt` only, `NONE` only when triggered; each type takes exactly
//! its own fields; fires of every type have execution ids derived from their instant; a patch
//! switches types; the previews answer for every type.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::{Value, json};

use crate::helpers::{
    Backend, TestApp, TestDb, backend_tests, eventually, problem_fields, sleep_until,
    static_executors,
};
use crate::recorder::Recorder;

backend_tests!(
    a_fixed_rate_job_fires_every_interval_from_its_start,
    a_fixed_delay_job_fires_its_interval_after_each_fire_ends,
    instances_that_both_own_a_fixed_delay_job_fire_each_instant_once,
    a_once_job_fires_once_at_its_instant,
    a_none_job_fires_only_when_triggered,
    each_schedule_type_takes_exactly_its_own_fields,
    a_patch_switches_the_schedule_type_and_keeps_the_grid,
    previews_answer_for_every_schedule_type,
);

async fn app(backend: Backend) -> (TestApp, Recorder) {
    let recorder = Recorder::start().await;
    let db = Arc::new(TestDb::create(backend).await);
    let addr = recorder.addr.clone();
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("billing", &[addr]);
    })
    .await;
    (app, recorder)
}

fn body(name: &str, schedule: Value) -> Value {
    let mut b = json!({"name": name, "serviceName": "billing", "handler": "tick"});
    b.as_object_mut()
        .unwrap()
        .extend(schedule.as_object().unwrap().clone());
    b
}

/// The instants the executor was called for, from the execution ids
/// (`{job}:{yyyyMMddHHmmss}:0-0`), in call order.
fn called_instants(recorder: &Recorder, job: &str) -> Vec<String> {
    recorder
        .calls()
        .iter()
        .filter(|c| c.body["jobName"] == job)
        .map(|c| {
            let id = c.header("X-Execution-Id");
            id.strip_prefix(&format!("{job}:"))
                .and_then(|rest| rest.strip_suffix(":0-0"))
                .unwrap_or_else(|| panic!("a scheduled fire's id, found {id}"))
                .to_string()
        })
        .collect()
}

fn id_time(t: DateTime<Utc>) -> String {
    t.format("%Y%m%d%H%M%S").to_string()
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Every 2 s from a start 2 s ahead: called at the start, +2 s, +4 s and no other instant, each
/// with trigger type CRON and the instant in its id.
async fn a_fixed_rate_job_fires_every_interval_from_its_start(backend: Backend) {
    let (app, recorder) = app(backend).await;
    let start = Utc::now().trunc_subsecs(0) + chrono::Duration::seconds(2);
    let job = app
        .create_job(&body(
            "every-2s",
            json!({"scheduleType": "FIXED_RATE", "intervalSeconds": 2,
                "startAt": start.to_rfc3339()}),
        ))
        .await;
    assert_eq!(job["scheduleType"], "FIXED_RATE");
    assert_eq!(job["cron"], Value::Null);
    assert_eq!(job["intervalSeconds"], 2);
    assert_eq!(
        job["startAt"]
            .as_str()
            .unwrap()
            .parse::<DateTime<Utc>>()
            .unwrap(),
        start
    );
    let expected: Vec<String> = (0..3)
        .map(|k| id_time(start + chrono::Duration::seconds(2 * k)))
        .collect();
    eventually(
        Duration::from_secs(15),
        "three fixed-rate fires",
        || async { (called_instants(&recorder, "every-2s").len() >= 3).then_some(()) },
    )
    .await;
    disable(&app, "every-2s").await;
    assert_eq!(called_instants(&recorder, "every-2s")[..3], expected[..]);
    let rows = app.executions("every-2s").await;
    assert!(rows.iter().all(|r| r["triggerType"] == "CRON"), "{rows:?}");
}

/// A handler that runs 2.5 s, a delay of 1 s: each fire's instant is the previous fire's
/// finish, rounded up to the second, plus 1 s (never beside it, as a 1 s rate would be).
async fn a_fixed_delay_job_fires_its_interval_after_each_fire_ends(backend: Backend) {
    let recorder = Recorder::slow_for("tick", Duration::from_millis(2500)).await;
    let db = Arc::new(TestDb::create(backend).await);
    let addr = recorder.addr.clone();
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("billing", &[addr]);
    })
    .await;
    let start = Utc::now().trunc_subsecs(0) + chrono::Duration::seconds(2);
    let job = app.create_job(&delay_body("after-each", start)).await;
    assert_eq!(
        (&job["scheduleType"], &job["intervalSeconds"]),
        (&json!("FIXED_DELAY"), &json!(1))
    );
    fires_follow_the_ends(&app, &recorder, "after-each", start, 3, 2500).await;
}

/// Two instances that both own the job (each standalone, the sharpest disagreement about
/// ownership): each derives the next instant from the same rows, so every fire is called once
/// and still only after the previous one ended.
async fn instances_that_both_own_a_fixed_delay_job_fire_each_instant_once(backend: Backend) {
    let recorder = Recorder::slow_for("tick", Duration::from_millis(1500)).await;
    let db = Arc::new(TestDb::create(backend).await);
    let (one, two) = (recorder.addr.clone(), recorder.addr.clone());
    let a = TestApp::spawn_with(db.clone(), move |s| {
        s.executors.static_ = static_executors("billing", &[one]);
    })
    .await;
    let _b = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("billing", &[two]);
    })
    .await;
    // Ahead far enough for the second instance to see the job through the revision counter.
    let start = Utc::now().trunc_subsecs(0) + chrono::Duration::seconds(3);
    a.create_job(&delay_body("both-own", start)).await;
    fires_follow_the_ends(&a, &recorder, "both-own", start, 4, 1500).await;
    let ids: Vec<String> = recorder
        .calls()
        .iter()
        .map(|c| c.header("X-Execution-Id").to_string())
        .collect();
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "each fire called once: {ids:?}");
}

fn delay_body(name: &str, start: DateTime<Utc>) -> Value {
    body(
        name,
        json!({"scheduleType": "FIXED_DELAY", "intervalSeconds": 1, "startAt": rfc3339(start)}),
    )
}

/// Waits for `count` fires of `job` (a 1 s delay from `start`, whose handler runs `run_ms`)
/// to end, disables it, and checks that the first fired at `start` and each later one at the
/// previous one's finish rounded up to the second plus 1 s, the calls `run_ms` apart at least.
async fn fires_follow_the_ends(
    app: &TestApp,
    recorder: &Recorder,
    job: &str,
    start: DateTime<Utc>,
    count: usize,
    run_ms: i64,
) {
    let finished = |row: &Value| -> Option<DateTime<Utc>> {
        row["finishTime"].as_str().map(|t| t.parse().unwrap())
    };
    let mut rows = eventually(
        Duration::from_secs(40),
        "fixed-delay fires ended",
        || async {
            let mut rows = app.executions(job).await;
            rows.retain(|r| finished(r).is_some());
            (rows.len() >= count).then_some(rows)
        },
    )
    .await;
    disable(app, job).await;
    rows.sort_by_key(|r| r["executionId"].as_str().unwrap().to_string());
    let instant = |row: &Value| {
        let id = row["executionId"].as_str().unwrap();
        let stamp = id
            .strip_prefix(&format!("{job}:"))
            .and_then(|rest| rest.strip_suffix(":0-0"))
            .unwrap_or_else(|| panic!("a scheduled fire's id, found {id}"));
        chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%d%H%M%S")
            .unwrap()
            .and_utc()
    };
    assert_eq!(instant(&rows[0]), start, "{rows:?}");
    for pair in rows.windows(2) {
        let end = finished(&pair[0]).unwrap();
        let whole = end.trunc_subsecs(0);
        let up = if whole < end {
            whole + chrono::Duration::seconds(1)
        } else {
            whole
        };
        assert_eq!(
            instant(&pair[1]),
            up + chrono::Duration::seconds(1),
            "the next fire follows the end of the last: {rows:?}"
        );
        assert_eq!(pair[0]["status"], "SUCCESS", "{rows:?}");
    }
    let calls = recorder.calls();
    for pair in calls.windows(2) {
        assert!(
            pair[1].received_at - pair[0].received_at >= chrono::Duration::milliseconds(run_ms),
            "one fire at a time: {:?}",
            calls.iter().map(|c| c.received_at).collect::<Vec<_>>()
        );
    }
}

/// `ONCE` two seconds ahead: one call, for that instant; nothing after; the preview is
/// then empty.
async fn a_once_job_fires_once_at_its_instant(backend: Backend) {
    let (app, recorder) = app(backend).await;
    let at = Utc::now().trunc_subsecs(0) + chrono::Duration::seconds(2);
    let job = app
        .create_job(&body(
            "once",
            json!({"scheduleType": "ONCE", "startAt": rfc3339(at)}),
        ))
        .await;
    assert_eq!(
        (&job["scheduleType"], &job["intervalSeconds"]),
        (&json!("ONCE"), &Value::Null)
    );
    let (_, preview) = app.get("/api/v1/jobs/once/next-fire-times").await;
    assert_eq!(preview["fireTimes"], json!([rfc3339(at)]), "{preview}");
    assert_eq!(preview["scheduleType"], "ONCE");
    sleep_until(at + chrono::Duration::seconds(4)).await;
    assert_eq!(called_instants(&recorder, "once"), [id_time(at)]);
    let (_, preview) = app.get("/api/v1/jobs/once/next-fire-times").await;
    assert_eq!(preview["fireTimes"], json!([]), "{preview}");
}

/// `NONE`: no call by itself; a trigger runs it.
async fn a_none_job_fires_only_when_triggered(backend: Backend) {
    let (app, recorder) = app(backend).await;
    let job = app
        .create_job(&body("on-demand", json!({"scheduleType": "NONE"})))
        .await;
    assert_eq!(
        [&job["cron"], &job["intervalSeconds"], &job["startAt"]],
        [&Value::Null, &Value::Null, &Value::Null]
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(recorder.calls().is_empty(), "{:?}", recorder.calls());
    let (status, fired) = app.post("/api/v1/jobs/on-demand/trigger", &json!({})).await;
    assert_eq!(status, 200, "{fired}");
    eventually(Duration::from_secs(10), "the triggered call", || async {
        (!recorder.calls().is_empty()).then_some(())
    })
    .await;
    let rows = app.executions("on-demand").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["triggerType"], "MANUAL");
    let (_, preview) = app.get("/api/v1/jobs/on-demand/next-fire-times").await;
    assert_eq!(
        (&preview["fireTimes"], &preview["cron"]),
        (&json!([]), &Value::Null)
    );
}

/// Each type refuses the fields of the others and requires its own, naming them.
async fn each_schedule_type_takes_exactly_its_own_fields(backend: Backend) {
    let (app, _) = app(backend).await;
    for (schedule, fields) in [
        (json!({"scheduleType": "HOURLY"}), vec!["scheduleType"]),
        (json!({}), vec!["cron"]),
        (
            json!({"cron": "0 * * * * ?", "intervalSeconds": 5}),
            vec!["intervalSeconds"],
        ),
        (
            json!({"scheduleType": "FIXED_RATE"}),
            vec!["intervalSeconds"],
        ),
        (
            json!({"scheduleType": "FIXED_RATE", "intervalSeconds": 0}),
            vec!["intervalSeconds"],
        ),
        (
            json!({"scheduleType": "FIXED_RATE", "intervalSeconds": 31_622_401}),
            vec!["intervalSeconds"],
        ),
        (
            json!({"scheduleType": "FIXED_RATE", "intervalSeconds": 5, "cron": "0 * * * * ?"}),
            vec!["cron"],
        ),
        (
            json!({"scheduleType": "FIXED_RATE", "intervalSeconds": 5, "startAt": "tomorrow"}),
            vec!["startAt"],
        ),
        (
            json!({"scheduleType": "FIXED_RATE", "startAt": "2026-12-24 18:00"}),
            vec!["startAt", "intervalSeconds"],
        ),
        (
            json!({"scheduleType": "FIXED_DELAY"}),
            vec!["intervalSeconds"],
        ),
        (
            json!({"scheduleType": "FIXED_DELAY", "intervalSeconds": 5, "cron": "0 * * * * ?"}),
            vec!["cron"],
        ),
        (json!({"scheduleType": "ONCE"}), vec!["startAt"]),
        (
            json!({"scheduleType": "ONCE", "startAt": "2030-01-01T00:00:00Z", "intervalSeconds": 5}),
            vec!["intervalSeconds"],
        ),
        (
            json!({"scheduleType": "NONE", "cron": "0 * * * * ?"}),
            vec!["cron"],
        ),
    ] {
        let (status, problem) = app
            .post("/api/v1/jobs", &body("bad", schedule.clone()))
            .await;
        assert_eq!(status, 400, "{schedule}: {problem}");
        assert_eq!(problem_fields(&problem), fields, "{schedule}: {problem}");
    }
}

/// A cron job patched to `FIXED_RATE` with only `scheduleType` and `intervalSeconds` drops its
/// cron and starts its grid at its creation; a `PUT` without `startAt` keeps that grid; a patch
/// back to `CRON` drops the interval and the start.
async fn a_patch_switches_the_schedule_type_and_keeps_the_grid(backend: Backend) {
    let (app, _) = app(backend).await;
    let created = app
        .create_job(&body("switch", json!({"cron": "0 0 2 * * ?"})))
        .await;
    let creation = created["createdAt"]
        .as_str()
        .unwrap()
        .parse::<DateTime<Utc>>()
        .unwrap()
        .trunc_subsecs(0);
    let (status, job) = app
        .patch_json(
            "/api/v1/jobs/switch",
            &json!({"scheduleType": "FIXED_RATE", "intervalSeconds": 3600}),
        )
        .await;
    assert_eq!(status, 200, "{job}");
    assert_eq!(job["cron"], Value::Null);
    assert_eq!(job["intervalSeconds"], 3600);
    let start_of = |job: &Value| {
        job["startAt"]
            .as_str()
            .unwrap()
            .parse::<DateTime<Utc>>()
            .unwrap()
    };
    assert_eq!(start_of(&job), creation, "{job}");
    let (status, job) = app
        .put(
            "/api/v1/jobs/switch",
            &body(
                "switch",
                json!({"scheduleType": "FIXED_RATE", "intervalSeconds": 60}),
            ),
        )
        .await;
    assert_eq!(status, 200, "{job}");
    assert_eq!(start_of(&job), creation, "{job}");
    let (_, preview) = app.get("/api/v1/jobs/switch/next-fire-times?count=2").await;
    let times: Vec<DateTime<Utc>> = preview["fireTimes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(times[1] - times[0], chrono::Duration::seconds(60));
    assert_eq!((times[0] - creation).num_seconds() % 60, 0, "{preview}");
    let (status, job) = app
        .patch_json(
            "/api/v1/jobs/switch",
            &json!({"scheduleType": "CRON", "cron": "0 30 * * * ?"}),
        )
        .await;
    assert_eq!(status, 200, "{job}");
    assert_eq!(
        [&job["cron"], &job["intervalSeconds"], &job["startAt"]],
        [&json!("0 30 * * * ?"), &Value::Null, &Value::Null]
    );
}

/// The schedule preview takes every type's fields: a fixed rate from a start, a once, none.
async fn previews_answer_for_every_schedule_type(backend: Backend) {
    let (app, _) = app(backend).await;
    let (status, rate) = app
        .get("/api/v1/cron/next-fire-times?scheduleType=FIXED_RATE&intervalSeconds=90&startAt=2099-01-01T00%3A00%3A00Z&count=3")
        .await;
    assert_eq!(status, 200, "{rate}");
    assert_eq!(
        rate["fireTimes"],
        json!([
            "2099-01-01T00:00:00Z",
            "2099-01-01T00:01:30Z",
            "2099-01-01T00:03:00Z"
        ])
    );
    assert_eq!(
        (&rate["scheduleType"], &rate["cron"]),
        (&json!("FIXED_RATE"), &Value::Null)
    );
    let (status, delay) = app
        .get("/api/v1/cron/next-fire-times?scheduleType=FIXED_DELAY&intervalSeconds=90&startAt=2099-01-01T00%3A00%3A00Z&count=3")
        .await;
    assert_eq!(status, 200, "{delay}");
    assert_eq!(
        delay["fireTimes"],
        json!(["2099-01-01T00:00:00Z"]),
        "only the first: the others follow the ends of fires"
    );
    let (_, once) = app
        .get("/api/v1/cron/next-fire-times?scheduleType=ONCE&startAt=2099-01-01T08%3A00%3A00%2B08%3A00")
        .await;
    assert_eq!(once["fireTimes"], json!(["2099-01-01T00:00:00Z"]), "{once}");
    let (status, none) = app
        .get("/api/v1/cron/next-fire-times?scheduleType=NONE")
        .await;
    assert_eq!((status, &none["fireTimes"]), (200, &json!([])), "{none}");
    let (status, problem) = app
        .get("/api/v1/cron/next-fire-times?scheduleType=FIXED_RATE")
        .await;
    assert_eq!(status, 400, "{problem}");
    assert_eq!(problem_fields(&problem), ["intervalSeconds"]);
}

async fn disable(app: &TestApp, job: &str) {
    let (status, body) = app
        .patch(&format!("/api/v1/jobs/{job}/enabled?enabled=false"))
        .await;
    assert_eq!(status, 200, "{body}");
}
