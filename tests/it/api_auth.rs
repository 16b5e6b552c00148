//! API authentication: every endpoint against every role, and signed result reports.

use std::sync::Arc;

use jobflow::config::{Role, Secret, TokenSettings};
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestDb, backend_tests, job};

backend_tests!(
    every_endpoint_checks_its_role,
    result_reports_need_a_signature_or_operator,
    metrics_can_be_protected
);

const VIEWER: &str = "viewer-token-aaaaaaaaaaaa";
const OPERATOR: &str = "operator-token-bbbbbbbbbb";
const ADMIN: &str = "admin-token-cccccccccccccc";
const SECRET: &str = "executor-signing-secret";

async fn secured(backend: Backend, protect_metrics: bool) -> TestApp {
    let db = Arc::new(TestDb::create(backend).await);
    TestApp::spawn_with(db, move |s| {
        s.auth.tokens = vec![
            TokenSettings {
                name: "vera".into(),
                role: Role::Viewer,
                token: Some(Secret::new(VIEWER)),
                token_sha256: None,
                ..Default::default()
            },
            TokenSettings {
                name: "otto".into(),
                role: Role::Operator,
                token: Some(Secret::new(OPERATOR)),
                token_sha256: None,
                ..Default::default()
            },
            // Hashed form: sha256 of ADMIN.
            TokenSettings {
                name: "ada".into(),
                role: Role::Admin,
                token: None,
                token_sha256: Some(
                    "f9ee720f6920f9afedc03593953670745df8e9121da62bc42cc09daaab63a4e3".into(),
                ),
                ..Default::default()
            },
        ];
        s.auth.protect_metrics = protect_metrics;
        s.executor.signing_secret = Some(Secret::new(SECRET));
    })
    .await
}

async fn call(
    app: &TestApp,
    method: &Method,
    path: &str,
    body: Option<&Value>,
    token: Option<&str>,
) -> (u16, Value) {
    let mut req = app.client.request(method.clone(), app.url(path));
    if let Some(b) = body {
        req = req.json(b);
    }
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn every_endpoint_checks_its_role(backend: Backend) {
    let db = Arc::new(TestDb::create(backend).await);
    let app = TestApp::spawn_with(db, |s| {
        s.auth.tokens = [
            ("vera", Role::Viewer, VIEWER),
            ("otto", Role::Operator, OPERATOR),
            ("ada", Role::Admin, ADMIN),
        ]
        .into_iter()
        .map(|(n, r, t)| TokenSettings {
            name: n.into(),
            role: r,
            token: Some(Secret::new(t)),
            token_sha256: None,
            ..Default::default()
        })
        .collect();
    })
    .await;
    let (status, created) = call(
        &app,
        &Method::POST,
        "/api/v1/jobs",
        Some(&job("guarded")),
        Some(ADMIN),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["createdBy"], "ada");
    let (_, triggered) = call(
        &app,
        &Method::POST,
        "/api/v1/jobs/guarded/trigger",
        None,
        Some(OPERATOR),
    )
    .await;
    let trace = triggered[0]["traceId"].as_str().unwrap().to_string();

    let update =
        json!({"serviceName": "order-service", "handler": "syncOrders", "cron": "0 0 4 * * ?"});
    let table: Vec<(Method, String, Option<Value>, Role)> = vec![
        (Method::GET, "/api/v1/jobs".into(), None, Role::Viewer),
        (
            Method::GET,
            "/api/v1/jobs/guarded".into(),
            None,
            Role::Viewer,
        ),
        (
            Method::GET,
            "/api/v1/jobs/guarded/executions".into(),
            None,
            Role::Viewer,
        ),
        (
            Method::GET,
            format!("/api/v1/jobs/executions/{trace}"),
            None,
            Role::Viewer,
        ),
        (
            Method::GET,
            "/api/v1/jobs/guarded/next-fire-times".into(),
            None,
            Role::Viewer,
        ),
        (
            Method::GET,
            "/api/v1/cron/next-fire-times?cron=0+0+*+*+*+%3F".into(),
            None,
            Role::Viewer,
        ),
        (Method::GET, "/api/v1/cluster".into(), None, Role::Viewer),
        (
            Method::GET,
            "/api/v1/executions?jobName=guarded".into(),
            None,
            Role::Viewer,
        ),
        (
            Method::PATCH,
            "/api/v1/jobs/guarded/enabled?enabled=false".into(),
            None,
            Role::Operator,
        ),
        (
            Method::POST,
            "/api/v1/jobs/guarded/trigger".into(),
            None,
            Role::Operator,
        ),
        (
            Method::POST,
            format!("/api/v1/jobs/executions/{trace}/retry"),
            None,
            Role::Operator,
        ),
        (
            Method::POST,
            "/api/v1/jobs".into(),
            Some(job("guarded-2")),
            Role::Admin,
        ),
        (
            Method::PUT,
            "/api/v1/jobs/guarded".into(),
            Some(update),
            Role::Admin,
        ),
        (
            Method::DELETE,
            "/api/v1/jobs/guarded-2".into(),
            None,
            Role::Admin,
        ),
    ];
    let tokens = [
        (Role::Viewer, VIEWER),
        (Role::Operator, OPERATOR),
        (Role::Admin, ADMIN),
    ];
    for (method, path, body, needed) in &table {
        let (status, problem) = call(&app, method, path, body.as_ref(), None).await;
        assert_eq!(status, 401, "{method} {path} without a token: {problem}");
        assert_eq!(problem["status"], 401);
        let (status, _) = call(
            &app,
            method,
            path,
            body.as_ref(),
            Some("not-a-real-token-at-all"),
        )
        .await;
        assert_eq!(status, 401, "{method} {path} with a wrong token");
        for (role, token) in tokens {
            let (status, answer) = call(&app, method, path, body.as_ref(), Some(token)).await;
            if role < *needed {
                assert_eq!(status, 403, "{method} {path} as {role:?}: {answer}");
            } else {
                assert!(
                    ![401, 403].contains(&status),
                    "{method} {path} as {role:?} got {status}: {answer}"
                );
            }
        }
    }
    let (_, j) = call(
        &app,
        &Method::GET,
        "/api/v1/jobs/guarded",
        None,
        Some(VIEWER),
    )
    .await;
    assert_eq!(j["updatedBy"], "ada");
    // Health stays open.
    assert_eq!(
        call(&app, &Method::GET, "/health/ready", None, None)
            .await
            .0,
        200
    );
    assert_eq!(
        call(&app, &Method::GET, "/health/live", None, None).await.0,
        200
    );
    // Swagger UI offers the bearer scheme.
    let (_, doc) = call(&app, &Method::GET, "/api-docs/openapi.json", None, None).await;
    assert_eq!(
        doc["components"]["securitySchemes"]["bearerAuth"]["scheme"],
        "bearer"
    );
}

async fn result_reports_need_a_signature_or_operator(backend: Backend) {
    let app = secured(backend, false).await;
    // A RUNNING execution, as an executor that answered 202 leaves it.
    let trace = {
        use jobflow::jobs::{ExecutionStatus, NewExecution, TriggerType, new_trace_id};
        use jobflow::store::Transition;
        let now = chrono::Utc::now();
        let t = new_trace_id();
        let row = NewExecution {
            execution_id: format!("signed:{t}"),
            trace_id: t.clone(),
            job_name: "signed".into(),
            trigger_type: TriggerType::Manual,
            fire_time: now,
            scheduler_instance: "x:1".into(),
            executor_instance: None,
            shard_start: 0,
            shard_end: 0,
            shard_count: 1,
            trigger_time: now,
            due_time: now,
            status: ExecutionStatus::Pending,
            retry_count: 0,
            parent_trace_id: None,
            error_message: None,
            job_params: None,
        };
        app.store.record_fire(None, &[row]).await.unwrap();
        let start = Transition {
            start_time: Some(now),
            ..Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Running)
        };
        assert!(app.store.transition(&t, &start).await.unwrap().applied());
        t
    };
    let path = format!("/api/v1/jobs/executions/{trace}/result");
    let body = br#"{"success": true, "message": "signed result"}"#.to_vec();
    let send = |ts: i64, sig: String| {
        app.client
            .post(app.url(&path))
            .header("content-type", "application/json")
            .header("X-JobFlow-Timestamp", ts.to_string())
            .header("X-JobFlow-Signature", sig)
            .body(body.clone())
            .send()
    };
    let now = chrono::Utc::now().timestamp();
    let sign = |secret: &str, ts: i64| {
        jobflow_executor::protocol::signature(secret.as_bytes(), "POST", &path, ts, &trace, &body)
    };
    assert_eq!(
        send(now, sign("wrong-secret", now)).await.unwrap().status(),
        401
    );
    assert_eq!(
        send(now - 301, sign(SECRET, now - 301))
            .await
            .unwrap()
            .status(),
        401,
        "stale"
    );
    let (status, _) = call(
        &app,
        &Method::POST,
        &path,
        Some(&json!({"success": true})),
        Some(VIEWER),
    )
    .await;
    assert_eq!(status, 403, "a viewer may not report");
    let resp = send(now, sign(SECRET, now)).await.unwrap();
    assert_eq!(resp.status(), 200);
    let e: Value = resp.json().await.unwrap();
    assert_eq!(e["status"], "SUCCESS");
    assert_eq!(e["resultMessage"], "signed result");
}

async fn metrics_can_be_protected(backend: Backend) {
    let app = secured(backend, true).await;
    assert_eq!(
        call(&app, &Method::GET, "/metrics", None, None).await.0,
        401
    );
    let resp = app
        .client
        .get(app.url("/metrics"))
        .bearer_auth(VIEWER)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}
