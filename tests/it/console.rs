//! The console's server side: files served from the binary (redirect, caching, gzip as for
//! every answer, security headers), `GET /api/v1/auth/me` and `GET /api/v1/overview`. The pages themselves are tested
//! in a real browser by scripts/console-test.sh.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use jobflow::config::{Role, Secret, TokenSettings};
use jobflow::jobs::{ExecutionStatus, NewExecution, TriggerType, new_trace_id};
use jobflow::store::Transition;
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestDb, backend_tests, eventually, job, static_executors};
use crate::recorder::{Recorder, Reply};

backend_tests!(
    overview_counts_the_last_hour,
    executors_show_their_calls_in_flight_and_last_call
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_is_served_from_the_binary() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for from in ["/", "/ui"] {
        let resp = plain.get(app.url(from)).send().await.unwrap();
        assert_eq!(resp.status(), 307, "{from}");
        assert_eq!(resp.headers()["location"], "/ui/", "{from}");
    }

    let resp = plain.get(app.url("/ui/")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/html; charset=utf-8");
    assert_eq!(resp.headers()["cache-control"], "no-cache");
    assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
    let csp = resp.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    let etag = resp.headers()["etag"].clone();
    let html = resp.text().await.unwrap();
    assert!(html.contains(r#"<script type="module" src="./app.js"></script>"#));

    // Revalidation: the same ETag gets 304 without a body.
    let resp = plain
        .get(app.url("/ui/"))
        .header("if-none-match", etag.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 304);
    assert_eq!(resp.headers()["etag"], etag);
    assert!(resp.bytes().await.unwrap().is_empty());

    // gzip when accepted (the gzip magic number), identity otherwise.
    let identity = plain.get(app.url("/ui/app.js")).send().await.unwrap();
    assert_eq!(
        identity.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert!(identity.headers().get("content-encoding").is_none());
    let identity = identity.bytes().await.unwrap();
    assert!(std::str::from_utf8(&identity).unwrap().contains("import"));
    let gz = plain
        .get(app.url("/ui/app.js"))
        .header("accept-encoding", "gzip, br")
        .send()
        .await
        .unwrap();
    assert_eq!(gz.headers()["content-encoding"], "gzip");
    assert!(
        gz.headers()["vary"]
            .to_str()
            .unwrap()
            .eq_ignore_ascii_case("accept-encoding")
    );
    let gz = gz.bytes().await.unwrap();
    assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    assert!(gz.len() < identity.len());

    // The API's JSON too, for a client that accepts it.
    let doc = plain
        .get(app.url("/api-docs/openapi.json"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(doc.headers()["content-encoding"], "gzip");
    assert_eq!(&doc.bytes().await.unwrap()[..2], &[0x1f, 0x8b]);

    let resp = plain.get(app.url("/ui/missing.js")).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(resp.headers()["content-type"], "application/problem+json");
    let resp = plain.get(app.url("/ui/..%2Fapp.js")).send().await.unwrap();
    assert_eq!(resp.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn who_am_i() {
    let open = TestApp::spawn(Backend::Sqlite).await;
    let (status, me) = open.get("/api/v1/auth/me").await;
    assert_eq!(status, 200);
    assert_eq!(
        me,
        json!({"authEnabled": false, "name": null, "role": "admin"})
    );

    let db = Arc::new(TestDb::create(Backend::Sqlite).await);
    let app = TestApp::spawn_with(db, |s| {
        s.auth.tokens = [
            ("vera", Role::Viewer, "viewer-token-for-console"),
            ("otto", Role::Operator, "operator-token-for-console"),
        ]
        .into_iter()
        .map(|(n, r, t)| TokenSettings {
            name: n.into(),
            role: r,
            token: Some(Secret::new(t)),
            ..Default::default()
        })
        .collect();
    })
    .await;
    let (status, problem) = app.get("/api/v1/auth/me").await;
    assert_eq!(status, 401, "{problem}");
    assert_eq!(problem["status"], 401);
    let me = |token: &'static str| {
        app.client
            .get(app.url("/api/v1/auth/me"))
            .bearer_auth(token)
            .send()
    };
    let resp = me("not-a-token").await.unwrap();
    assert_eq!(resp.status(), 401);
    let resp = me("viewer-token-for-console").await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.json::<Value>().await.unwrap(),
        json!({"authEnabled": true, "name": "vera", "role": "viewer"})
    );
    let resp = me("operator-token-for-console").await.unwrap();
    assert_eq!(
        resp.json::<Value>().await.unwrap(),
        json!({"authEnabled": true, "name": "otto", "role": "operator"})
    );
}

async fn overview_counts_the_last_hour(backend: Backend) {
    let recorder = Recorder::with(|call| {
        if call.handler == "fail" {
            Reply::status(500, "boom")
        } else {
            Reply::ok()
        }
    })
    .await;
    let db = Arc::new(TestDb::create(backend).await);
    let executors = vec![recorder.addr.clone()];
    let app = TestApp::spawn_with(db, |s| {
        s.executors.static_ = static_executors("svc", &executors);
    })
    .await;
    let mut ok = job("ok-job");
    ok["serviceName"] = json!("svc");
    ok["handler"] = json!("succeed");
    app.create_job(&ok).await;
    let mut bad = job("bad-job");
    bad["serviceName"] = json!("svc");
    bad["handler"] = json!("fail");
    bad["maxRetry"] = json!(0);
    app.create_job(&bad).await;
    let mut idle = job("idle-job");
    idle["serviceName"] = json!("nobody-serves-this");
    idle["enabled"] = json!(false);
    app.create_job(&idle).await;

    for name in ["ok-job", "bad-job"] {
        let (status, created) = app
            .post(&format!("/api/v1/jobs/{name}/trigger"), &json!(null))
            .await;
        assert_eq!(status, 200, "{created}");
    }
    for (name, want) in [("ok-job", "SUCCESS"), ("bad-job", "FAILED")] {
        eventually(
            Duration::from_secs(10),
            "the triggered executions to settle",
            || async {
                let rows = app.executions(name).await;
                (rows.len() == 1 && rows[0]["status"] == want).then_some(())
            },
        )
        .await;
    }

    // A cron fire that started 250 ms late, and one from two hours ago that is out of the window.
    let now = Utc::now();
    for (age, start_delay_ms) in [
        (chrono::Duration::seconds(5), 250),
        (chrono::Duration::hours(2), 900),
    ] {
        let fire_time = now - age;
        let trace_id = new_trace_id();
        let row = NewExecution {
            execution_id: format!("cron-job:{}:0-0", fire_time.timestamp()),
            trace_id: trace_id.clone(),
            job_name: "cron-job".into(),
            trigger_type: TriggerType::Cron,
            fire_time,
            scheduler_instance: "127.0.0.1:1".into(),
            executor_instance: None,
            shard_start: 0,
            shard_end: 0,
            shard_count: 1,
            trigger_time: fire_time,
            due_time: fire_time,
            status: ExecutionStatus::Pending,
            retry_count: 0,
            parent_trace_id: None,
            error_message: None,
            job_params: None,
        };
        app.store.record_fire(None, &[row]).await.unwrap();
        let start = Transition {
            start_time: Some(fire_time + chrono::Duration::milliseconds(start_delay_ms)),
            ..Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Running)
        };
        assert!(
            app.store
                .transition(&trace_id, &start)
                .await
                .unwrap()
                .applied()
        );
    }

    let (status, o) = app.get("/api/v1/overview").await;
    assert_eq!(status, 200, "{o}");
    let me = o["selfInstance"].as_str().unwrap().to_string();
    assert_eq!(o["compensationLeader"], me.as_str());
    assert_eq!(o["instances"], json!([{"instance": me, "ownedJobs": 2}]));
    assert_eq!(o["jobs"], json!({"total": 3, "enabled": 2}));
    assert_eq!(o["lastHour"]["fires"], 3);
    assert_eq!(o["lastHour"]["executions"], 3);
    assert_eq!(o["lastHour"]["failures"], 1);
    assert_eq!(
        o["lastHour"]["byStatus"],
        json!({"SUCCESS": 1, "FAILED": 1, "RUNNING": 1})
    );
    assert_eq!(
        o["fireDelay"],
        json!({"samples": 1, "latestMs": 250, "averageMs": 250, "maxMs": 250})
    );
    assert_eq!(
        o["executors"],
        json!([
            {"serviceName": "nobody-serves-this", "serviceGroup": null, "jobs": 1, "instances": []},
            {"serviceName": "svc", "serviceGroup": null, "jobs": 2, "instances": [recorder.addr]},
        ])
    );
}

/// `GET /api/v1/executors`: each service the jobs name with its live instances; a call in
/// flight counts while its row is RUNNING, and the last call this instance made is named
/// with its outcome; a service without instances is listed empty.
async fn executors_show_their_calls_in_flight_and_last_call(backend: Backend) {
    let rec = Recorder::with(|c| {
        if c.handler == "slow" {
            Reply::slow(Duration::from_secs(30))
        } else {
            Reply::ok()
        }
    })
    .await;
    let db = Arc::new(TestDb::create(backend).await);
    let addr = vec![rec.addr.clone()];
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &addr);
    })
    .await;
    for (name, handler, service) in [
        ("quick", "fast", "svc"),
        ("long", "slow", "svc"),
        ("orphan", "h", "nowhere"),
    ] {
        app.create_job(
            &json!({"name": name, "serviceName": service, "handler": handler,
            "cron": "0 0 3 1 1 ?", "maxRetry": 0}),
        )
        .await;
    }
    let (_, before) = app.get("/api/v1/executors").await;
    assert_eq!(
        before["services"],
        json!([
            {"serviceName": "nowhere", "serviceGroup": null, "jobs": 1, "instances": []},
            {"serviceName": "svc", "serviceGroup": null, "jobs": 2, "instances": [
                {"address": rec.addr, "pathPrefix": null, "callsInFlight": 0, "lastCall": null}]}
        ])
    );
    let (_, quick) = app.post("/api/v1/jobs/quick/trigger", &json!({})).await;
    let trace = quick[0]["traceId"].as_str().unwrap().to_string();
    app.execution_in(&trace, "SUCCESS", Duration::from_secs(10))
        .await;
    let (_, after) = app.get("/api/v1/executors").await;
    let call = &after["services"][1]["instances"][0]["lastCall"];
    assert_eq!(
        (&call["traceId"], &call["jobName"], &call["outcome"]),
        (&json!(trace), &json!("quick"), &json!("SUCCESS"))
    );
    app.post("/api/v1/jobs/long/trigger", &json!({})).await;
    eventually(Duration::from_secs(10), "a call in flight", || async {
        let (_, v) = app.get("/api/v1/executors").await;
        (v["services"][1]["instances"][0]["callsInFlight"] == 1).then_some(())
    })
    .await;
}
