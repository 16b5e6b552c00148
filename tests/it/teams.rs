//! Teams on one scheduler: namespaces kept apart on every route, tokens managed through the
//! API (created, used, rotated, revoked), the audit trail of every action, an authenticating
//! proxy believed only from its addresses, and a database of the release before namespaces
//! upgraded with every job keeping its key and owner.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jobflow::config::{ProxySettings, Role, Secret, TokenSettings};
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{
    Backend, TestApp, TestDb, backend_tests, job, migrate_until, static_executors,
};
use crate::recorder::Recorder;
use crate::wait::eventually;

backend_tests!(
    namespaces_keep_jobs_and_executions_apart,
    a_token_of_some_namespaces_sees_and_touches_nothing_else,
    tokens_are_created_used_rotated_and_revoked,
    every_action_is_in_the_audit_trail,
    the_proxy_is_believed_only_from_its_addresses,
    a_database_of_the_last_release_keeps_every_job_and_its_owner,
);

const ADMIN: &str = "admin-token-cccccccccccccc";

async fn with_admin(backend: Backend, executors: Vec<String>) -> TestApp {
    let db = Arc::new(TestDb::create(backend).await);
    TestApp::spawn_with(db, move |s| {
        s.auth.tokens = vec![TokenSettings {
            name: "ada".into(),
            role: Role::Admin,
            token: Some(Secret::new(ADMIN)),
            ..Default::default()
        }];
        s.executors.static_ = static_executors("order-service", &executors);
        s.auth.protect_metrics = true;
    })
    .await
}

async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    body: Option<&Value>,
    token: Option<&str>,
) -> (u16, Value) {
    let mut req = app.client.request(method, app.url(path));
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

fn names(page: &Value) -> Vec<(String, String)> {
    page["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["namespace"].as_str().unwrap().to_string(),
                j["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn traces(page: &Value) -> Vec<String> {
    page["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["traceId"].as_str().unwrap().to_string())
        .collect()
}

async fn namespaces_keep_jobs_and_executions_apart(backend: Backend) {
    let executor = Recorder::start().await;
    let app = with_admin(backend, vec![executor.addr.clone()]).await;
    let admin = Some(ADMIN);
    let (s, _) = call(
        &app,
        Method::POST,
        "/api/v1/jobs",
        Some(&job("sync")),
        admin,
    )
    .await;
    assert_eq!(s, 201);
    // The same name in another namespace, by the query and by the body.
    let resp = app
        .client
        .post(app.url("/api/v1/jobs?namespace=team-a"))
        .bearer_auth(ADMIN)
        .json(&job("sync"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(
        resp.headers()["location"],
        "/api/v1/jobs/sync?namespace=team-a"
    );
    let created: Value = resp.json().await.unwrap();
    assert_eq!(
        (&created["namespace"], &created["name"]),
        (&json!("team-a"), &json!("sync"))
    );
    let mut report = job("report");
    report["namespace"] = json!("team-a");
    let (s, _) = call(&app, Method::POST, "/api/v1/jobs", Some(&report), admin).await;
    assert_eq!(s, 201);
    let (s, p) = call(
        &app,
        Method::POST,
        "/api/v1/jobs?namespace=team-b",
        Some(&report),
        admin,
    )
    .await;
    assert_eq!(
        (s, p["errors"][0]["field"].as_str()),
        (400, Some("namespace")),
        "{p}"
    );
    let (s, p) = call(
        &app,
        Method::GET,
        "/api/v1/jobs?namespace=Team_A",
        None,
        admin,
    )
    .await;
    assert_eq!(
        (s, p["errors"][0]["field"].as_str()),
        (400, Some("namespace")),
        "{p}"
    );

    let (_, default) = call(&app, Method::GET, "/api/v1/jobs", None, admin).await;
    assert_eq!(names(&default), [("default".into(), "sync".into())]);
    let (_, team) = call(
        &app,
        Method::GET,
        "/api/v1/jobs?namespace=team-a",
        None,
        admin,
    )
    .await;
    assert_eq!(
        names(&team),
        [
            ("team-a".into(), "report".into()),
            ("team-a".into(), "sync".into())
        ]
    );
    let (_, team) = call(
        &app,
        Method::GET,
        "/api/v1/jobs?namespace=team-a&namePrefix=re",
        None,
        admin,
    )
    .await;
    assert_eq!(names(&team), [("team-a".into(), "report".into())]);
    assert_eq!(
        call(&app, Method::GET, "/api/v1/jobs/report", None, admin)
            .await
            .0,
        404
    );
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/v1/jobs/team-a%2Freport",
            None,
            admin
        )
        .await
        .0,
        404
    );
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/v1/jobs/report?namespace=team-a",
            None,
            admin
        )
        .await
        .0,
        200
    );
    // Children are jobs of the same namespace.
    let mut parent = job("parent");
    parent["childJobs"] = json!(["report"]);
    let (s, p) = call(&app, Method::POST, "/api/v1/jobs", Some(&parent), admin).await;
    assert_eq!(
        (s, p["errors"][0]["field"].as_str()),
        (400, Some("childJobs")),
        "{p}"
    );
    let (s, p) = call(
        &app,
        Method::POST,
        "/api/v1/jobs?namespace=team-a",
        Some(&parent),
        admin,
    )
    .await;
    assert_eq!((s, &p["childJobs"]), (201, &json!(["report"])), "{p}");

    // A trigger in team-a: the executor gets the name and the namespace apart.
    let (s, fired) = call(
        &app,
        Method::POST,
        "/api/v1/jobs/sync/trigger?namespace=team-a",
        None,
        Some(ADMIN),
    )
    .await;
    assert_eq!(s, 200, "{fired}");
    let e = &fired[0];
    assert_eq!(
        (&e["jobName"], &e["namespace"]),
        (&json!("sync"), &json!("team-a"))
    );
    assert!(
        e["executionId"]
            .as_str()
            .unwrap()
            .starts_with("team-a/sync:"),
        "{e}"
    );
    let trace = e["traceId"].as_str().unwrap().to_string();
    let called = eventually(Duration::from_secs(10), "the call", || async {
        executor.calls().into_iter().find(|c| c.trace_id() == trace)
    })
    .await;
    assert_eq!(called.header("x-job-name"), "sync");
    assert_eq!(called.header("x-job-namespace"), "team-a");
    assert_eq!(called.body["jobName"], "sync");
    let (_, d) = call(&app, Method::POST, "/api/v1/jobs/sync/trigger", None, admin).await;
    let default_trace = d[0]["traceId"].as_str().unwrap().to_string();
    let called = eventually(Duration::from_secs(10), "the default call", || async {
        executor
            .calls()
            .into_iter()
            .find(|c| c.trace_id() == default_trace)
    })
    .await;
    assert_eq!(
        called.header("x-job-namespace"),
        "",
        "not sent for `default`"
    );

    // Its execution is seen only in its namespace.
    for path in [
        format!("/api/v1/jobs/executions/{trace}"),
        format!("/api/v1/jobs/executions/{trace}/logs"),
    ] {
        assert_eq!(
            call(&app, Method::GET, &path, None, admin).await.0,
            404,
            "{path}"
        );
        let path = format!("{path}?namespace=team-a");
        assert_eq!(
            call(&app, Method::GET, &path, None, admin).await.0,
            200,
            "{path}"
        );
    }
    for verb in ["retry", "cancel"] {
        let path = format!("/api/v1/jobs/executions/{trace}/{verb}");
        assert_eq!(
            call(&app, Method::POST, &path, None, admin).await.0,
            404,
            "{path}"
        );
    }
    let (_, found) = call(&app, Method::GET, "/api/v1/executions", None, admin).await;
    assert_eq!(traces(&found), std::slice::from_ref(&default_trace));
    let (_, found) = call(
        &app,
        Method::GET,
        "/api/v1/executions?namespace=team-a&jobName=sync",
        None,
        admin,
    )
    .await;
    assert_eq!(traces(&found), std::slice::from_ref(&trace));
    let (_, found) = call(
        &app,
        Method::GET,
        "/api/v1/jobs/sync/executions?namespace=team-a",
        None,
        admin,
    )
    .await;
    assert_eq!(traces(&found), std::slice::from_ref(&trace));

    // Views of every namespace tell the two jobs of one name apart.
    let (_, cluster) = call(&app, Method::GET, "/api/v1/cluster", None, admin).await;
    let mut owned: Vec<(String, String)> = cluster["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["namespace"].as_str().unwrap().into(),
                j["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    owned.sort();
    assert_eq!(
        owned,
        [
            ("default".to_string(), "sync".to_string()),
            ("team-a".into(), "parent".into()),
            ("team-a".into(), "report".into()),
            ("team-a".into(), "sync".into())
        ]
    );

    // Deleting one leaves the other.
    assert_eq!(
        call(&app, Method::DELETE, "/api/v1/jobs/sync", None, admin)
            .await
            .0,
        204
    );
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/v1/jobs/sync?namespace=team-a",
            None,
            admin
        )
        .await
        .0,
        200
    );
    app.stop().await;
}

/// Every job and execution route, for a namespace: (method, path, body, the role it needs,
/// the status it answers with that role).
fn scoped_routes(ns: &str, trace: &str) -> Vec<(Method, String, Option<Value>, Role, u16)> {
    let q = format!("namespace={ns}");
    let mut body = job("made");
    body["namespace"] = json!(ns);
    let mut patch = json!({"description": "changed"});
    patch["namespace"] = json!(ns);
    vec![
        (
            Method::GET,
            format!("/api/v1/jobs?{q}"),
            None,
            Role::Viewer,
            200,
        ),
        (
            Method::GET,
            format!("/api/v1/jobs/sync?{q}"),
            None,
            Role::Viewer,
            200,
        ),
        (
            Method::GET,
            format!("/api/v1/jobs/sync/next-fire-times?{q}"),
            None,
            Role::Viewer,
            200,
        ),
        (
            Method::GET,
            format!("/api/v1/jobs/sync/executions?{q}"),
            None,
            Role::Viewer,
            200,
        ),
        (
            Method::GET,
            format!("/api/v1/jobs/sync/backfills?{q}"),
            None,
            Role::Viewer,
            200,
        ),
        (
            Method::GET,
            format!("/api/v1/jobs/sync/backfills/none?{q}"),
            None,
            Role::Viewer,
            404,
        ),
        (
            Method::GET,
            format!("/api/v1/jobs/executions/{trace}?{q}"),
            None,
            Role::Viewer,
            200,
        ),
        (
            Method::GET,
            format!("/api/v1/jobs/executions/{trace}/logs?{q}"),
            None,
            Role::Viewer,
            200,
        ),
        (
            Method::GET,
            format!("/api/v1/executions?{q}"),
            None,
            Role::Viewer,
            200,
        ),
        (
            Method::PATCH,
            format!("/api/v1/jobs/sync/enabled?enabled=true&{q}"),
            None,
            Role::Operator,
            200,
        ),
        (
            Method::POST,
            format!("/api/v1/jobs/sync/trigger?{q}"),
            None,
            Role::Operator,
            200,
        ),
        (
            Method::POST,
            format!("/api/v1/jobs/executions/{trace}/cancel?{q}"),
            None,
            Role::Operator,
            409,
        ),
        (
            Method::POST,
            format!("/api/v1/jobs/executions/{trace}/retry?{q}"),
            None,
            Role::Operator,
            200,
        ),
        (
            Method::POST,
            format!("/api/v1/jobs/sync/backfill?{q}"),
            Some(json!({"from": "2026-01-01T00:00:00Z", "to": "2026-01-03T00:00:00Z"})),
            Role::Operator,
            202,
        ),
        (
            Method::POST,
            format!("/api/v1/jobs/sync/backfills/none/cancel?{q}"),
            None,
            Role::Operator,
            404,
        ),
        (
            Method::POST,
            format!("/api/v1/jobs?{q}"),
            Some(body),
            Role::Admin,
            201,
        ),
        (
            Method::PATCH,
            format!("/api/v1/jobs/made?{q}"),
            Some(patch),
            Role::Admin,
            200,
        ),
        (
            Method::PUT,
            format!("/api/v1/jobs/made?{q}"),
            Some(job("made")),
            Role::Admin,
            200,
        ),
        (
            Method::DELETE,
            format!("/api/v1/jobs/made?{q}"),
            None,
            Role::Admin,
            204,
        ),
    ]
}

async fn a_token_of_some_namespaces_sees_and_touches_nothing_else(backend: Backend) {
    let executor = Recorder::start().await;
    let app = with_admin(backend, vec![executor.addr.clone()]).await;
    let mut traces = BTreeMap::new();
    for ns in ["default", "team-a"] {
        let q = format!("?namespace={ns}");
        let (s, _) = call(
            &app,
            Method::POST,
            &format!("/api/v1/jobs{q}"),
            Some(&job("sync")),
            Some(ADMIN),
        )
        .await;
        assert_eq!(s, 201);
        let (_, fired) = call(
            &app,
            Method::POST,
            &format!("/api/v1/jobs/sync/trigger{q}"),
            None,
            Some(ADMIN),
        )
        .await;
        let trace = fired[0]["traceId"].as_str().unwrap().to_string();
        let path = format!("/api/v1/jobs/executions/{trace}{q}");
        eventually(Duration::from_secs(10), "the run", || async {
            let (_, e) = call(&app, Method::GET, &path, None, Some(ADMIN)).await;
            (e["status"] == "SUCCESS").then_some(())
        })
        .await;
        traces.insert(ns, trace);
    }
    // One token per role, each of team-a only.
    let mut secrets = Vec::new();
    for role in ["viewer", "operator", "admin"] {
        let body =
            json!({"name": format!("team-a-{role}"), "role": role, "namespaces": ["team-a"]});
        let (s, t) = call(
            &app,
            Method::POST,
            "/api/v1/tokens",
            Some(&body),
            Some(ADMIN),
        )
        .await;
        assert_eq!(s, 201, "{t}");
        let r = match role {
            "viewer" => Role::Viewer,
            "operator" => Role::Operator,
            _ => Role::Admin,
        };
        secrets.push((r, t["token"].as_str().unwrap().to_string()));
    }
    for (role, secret) in &secrets {
        let (s, me) = call(&app, Method::GET, "/api/v1/auth/me", None, Some(secret)).await;
        assert_eq!((s, &me["namespaces"]), (200, &json!(["team-a"])));
        // Outside its namespace: refused whatever the role, before anything is done.
        for (method, path, body, _, _) in scoped_routes("default", &traces["default"]) {
            let (s, p) = call(&app, method.clone(), &path, body.as_ref(), Some(secret)).await;
            assert_eq!(s, 403, "{role:?} {method} {path}: {p}");
        }
        // A body naming another namespace than the query's is no way around it.
        let mut other = job("sneak");
        other["namespace"] = json!("default");
        let (s, _) = call(
            &app,
            Method::POST,
            "/api/v1/jobs",
            Some(&other),
            Some(secret),
        )
        .await;
        assert_eq!(s, 403, "{role:?} creating in default by the body");
        // What belongs to no namespace.
        for path in [
            "/api/v1/overview",
            "/api/v1/cluster",
            "/api/v1/executors",
            "/api/v1/tokens",
            "/api/v1/audit",
        ] {
            let (s, _) = call(&app, Method::GET, path, None, Some(secret)).await;
            assert_eq!(s, 403, "{role:?} GET {path}");
        }
        let (s, _) = call(
            &app,
            Method::GET,
            "/api/v1/cron/next-fire-times?cron=0+0+*+*+*+%3F",
            None,
            Some(secret),
        )
        .await;
        assert_eq!(s, 200);
        // The metrics label every namespace's jobs.
        let (s, _) = call(&app, Method::GET, "/metrics", None, Some(secret)).await;
        assert_eq!(s, 403, "{role:?} GET /metrics");
    }
    let (s, _) = call(&app, Method::GET, "/metrics", None, Some(ADMIN)).await;
    assert_eq!(s, 200);
    // Inside it, each route answers as to anyone with the role.
    for (role, secret) in &secrets {
        for (method, path, body, needed, ok) in scoped_routes("team-a", &traces["team-a"]) {
            let (s, p) = call(&app, method.clone(), &path, body.as_ref(), Some(secret)).await;
            if *role >= needed {
                assert_eq!(s, ok, "{role:?} {method} {path}: {p}");
            } else {
                assert_eq!(s, 403, "{role:?} {method} {path}: {p}");
            }
        }
    }
    // What it saw of team-a is all there is to see of it: its job list has no default job.
    let (_, list) = call(
        &app,
        Method::GET,
        "/api/v1/jobs?namespace=team-a",
        None,
        Some(&secrets[0].1),
    )
    .await;
    assert!(names(&list).iter().all(|(ns, _)| ns == "team-a"));
    app.stop().await;
}

async fn tokens_are_created_used_rotated_and_revoked(backend: Backend) {
    let app = with_admin(backend, Vec::new()).await;
    let admin = Some(ADMIN);
    let body = json!({"name": "ci", "role": "admin", "namespaces": null});
    let (s, created) = call(&app, Method::POST, "/api/v1/tokens", Some(&body), admin).await;
    assert_eq!(s, 201, "{created}");
    let secret = created["token"].as_str().unwrap().to_string();
    assert!(secret.starts_with("jf_") && secret.len() == 46, "{secret}");
    assert_eq!(
        (&created["name"], &created["role"], &created["namespaces"]),
        (&json!("ci"), &json!("admin"), &Value::Null)
    );
    // Used: the job records it as its author.
    let (s, j) = call(
        &app,
        Method::POST,
        "/api/v1/jobs",
        Some(&job("by-ci")),
        Some(&secret),
    )
    .await;
    assert_eq!((s, &j["createdBy"]), (201, &json!("ci")));
    // Listed without a secret.
    let (_, list) = call(&app, Method::GET, "/api/v1/tokens", None, admin).await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["name"], "ci");
    assert_eq!(list[0]["createdBy"], "ada");
    assert!(list[0].get("token").is_none() && !list.to_string().contains(&secret[3..]));
    // Names are unique, configured ones included; fields are checked.
    for (body, status, field) in [
        (json!({"name": "ci", "role": "viewer"}), 409, None),
        (json!({"name": "ada", "role": "viewer"}), 409, None),
        (
            json!({"name": "bad name", "role": "viewer"}),
            400,
            Some("name"),
        ),
        (json!({"name": "x", "role": "root"}), 400, Some("role")),
        (
            json!({"name": "x", "role": "viewer", "namespaces": ["ok", "Not_OK"]}),
            400,
            Some("namespaces[1]"),
        ),
    ] {
        let (s, p) = call(&app, Method::POST, "/api/v1/tokens", Some(&body), admin).await;
        assert_eq!(s, status, "{body}: {p}");
        if let Some(f) = field {
            assert_eq!(p["errors"][0]["field"], f, "{p}");
        }
    }
    // Rotated: the old secret is refused, the new one works.
    let (s, rotated) = call(&app, Method::POST, "/api/v1/tokens/ci/rotate", None, admin).await;
    assert_eq!(s, 200, "{rotated}");
    let new = rotated["token"].as_str().unwrap().to_string();
    assert_ne!(new, secret);
    assert_eq!(
        call(&app, Method::GET, "/api/v1/jobs", None, Some(&secret))
            .await
            .0,
        401
    );
    assert_eq!(
        call(&app, Method::GET, "/api/v1/jobs", None, Some(&new))
            .await
            .0,
        200
    );
    let (_, list) = call(&app, Method::GET, "/api/v1/tokens", None, admin).await;
    assert!(list[0]["rotatedAt"].is_string());
    // A token may manage tokens when it is an admin of every namespace.
    let viewer = json!({"name": "look", "role": "viewer"});
    let (_, v) = call(
        &app,
        Method::POST,
        "/api/v1/tokens",
        Some(&viewer),
        Some(&new),
    )
    .await;
    let look = v["token"].as_str().unwrap().to_string();
    assert_eq!(
        call(&app, Method::GET, "/api/v1/tokens", None, Some(&look))
            .await
            .0,
        403
    );
    // Revoked: refused from the next request on.
    assert_eq!(
        call(&app, Method::DELETE, "/api/v1/tokens/ci", None, admin)
            .await
            .0,
        204
    );
    assert_eq!(
        call(&app, Method::GET, "/api/v1/jobs", None, Some(&new))
            .await
            .0,
        401
    );
    assert_eq!(
        call(&app, Method::DELETE, "/api/v1/tokens/ci", None, admin)
            .await
            .0,
        404
    );
    assert_eq!(
        call(&app, Method::POST, "/api/v1/tokens/ci/rotate", None, admin)
            .await
            .0,
        404
    );
    // The configured token is untouched by all this.
    assert_eq!(
        call(&app, Method::GET, "/api/v1/jobs", None, admin).await.0,
        200
    );
    app.stop().await;
}

fn trail(page: &Value) -> Vec<(String, String, Value, String)> {
    page["content"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|e| {
            (
                e["actor"].as_str().unwrap().to_string(),
                e["action"].as_str().unwrap().to_string(),
                e["namespace"].clone(),
                e["target"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

async fn every_action_is_in_the_audit_trail(backend: Backend) {
    let executor = Recorder::with(|_| crate::recorder::Reply::slow(Duration::from_secs(30))).await;
    let app = with_admin(backend, vec![executor.addr.clone()]).await;
    let admin = Some(ADMIN);
    let (_, t) = call(
        &app,
        Method::POST,
        "/api/v1/tokens",
        Some(&json!({"name": "ops", "role": "operator", "namespaces": ["team-a"]})),
        admin,
    )
    .await;
    let ops = t["token"].as_str().unwrap().to_string();
    let q = "?namespace=team-a";
    call(
        &app,
        Method::POST,
        &format!("/api/v1/jobs{q}"),
        Some(&job("sync")),
        admin,
    )
    .await;
    let change =
        json!({"serviceName": "order-service", "handler": "syncOrders", "cron": "0 0 3 * * ?"});
    call(
        &app,
        Method::PUT,
        &format!("/api/v1/jobs/sync{q}"),
        Some(&change),
        admin,
    )
    .await;
    call(
        &app,
        Method::PATCH,
        "/api/v1/jobs/sync/enabled?enabled=false&namespace=team-a",
        None,
        Some(&ops),
    )
    .await;
    call(
        &app,
        Method::PATCH,
        "/api/v1/jobs/sync/enabled?enabled=true&namespace=team-a",
        None,
        Some(&ops),
    )
    .await;
    let (_, fired) = call(
        &app,
        Method::POST,
        &format!("/api/v1/jobs/sync/trigger{q}"),
        None,
        Some(&ops),
    )
    .await;
    let trace = fired[0]["traceId"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(10), "the call", || async {
        (!executor.calls().is_empty()).then_some(())
    })
    .await;
    let (s, _) = call(
        &app,
        Method::POST,
        &format!("/api/v1/jobs/executions/{trace}/cancel{q}"),
        None,
        Some(&ops),
    )
    .await;
    assert_eq!(s, 200);
    let (s, retried) = call(
        &app,
        Method::POST,
        &format!("/api/v1/jobs/executions/{trace}/retry{q}"),
        None,
        Some(&ops),
    )
    .await;
    assert_eq!(s, 200, "{retried}");
    let backfill = json!({"from": "2026-01-01T00:00:00Z", "to": "2026-01-03T00:00:00Z", "backfillId": "jan", "maxPerSecond": 1});
    call(
        &app,
        Method::POST,
        &format!("/api/v1/jobs/sync/backfill{q}"),
        Some(&backfill),
        Some(&ops),
    )
    .await;
    let (s, _) = call(
        &app,
        Method::POST,
        &format!("/api/v1/jobs/sync/backfills/jan/cancel{q}"),
        None,
        Some(&ops),
    )
    .await;
    assert_eq!(s, 200);
    call(&app, Method::POST, "/api/v1/tokens/ops/rotate", None, admin).await;
    call(&app, Method::DELETE, "/api/v1/tokens/ops", None, admin).await;
    call(
        &app,
        Method::DELETE,
        &format!("/api/v1/jobs/sync{q}"),
        None,
        admin,
    )
    .await;

    let (s, page) = call(&app, Method::GET, "/api/v1/audit?size=50", None, admin).await;
    assert_eq!(s, 200, "{page}");
    let ns = json!("team-a");
    let e = |actor: &str, action: &str, namespace: &Value, target: &str| {
        (
            actor.to_string(),
            action.to_string(),
            namespace.clone(),
            target.to_string(),
        )
    };
    assert_eq!(
        trail(&page),
        [
            e("ada", "TOKEN_CREATED", &Value::Null, "ops"),
            e("ada", "JOB_CREATED", &ns, "sync"),
            e("ada", "JOB_UPDATED", &ns, "sync"),
            e("ops", "JOB_DISABLED", &ns, "sync"),
            e("ops", "JOB_ENABLED", &ns, "sync"),
            e("ops", "JOB_TRIGGERED", &ns, "sync"),
            e("ops", "EXECUTION_CANCELLED", &ns, &trace),
            e("ops", "EXECUTION_RETRIED", &ns, &trace),
            e("ops", "BACKFILL_STARTED", &ns, "sync"),
            e("ops", "BACKFILL_CANCELLED", &ns, "sync"),
            e("ada", "TOKEN_ROTATED", &Value::Null, "ops"),
            e("ada", "TOKEN_REVOKED", &Value::Null, "ops"),
            e("ada", "JOB_DELETED", &ns, "sync"),
        ]
    );
    let entries = page["content"].as_array().unwrap();
    let find = |action: &str| {
        entries
            .iter()
            .find(|x| x["action"] == action)
            .unwrap()
            .clone()
    };
    assert_eq!(
        find("JOB_UPDATED")["detail"],
        json!({"cron": {"from": "0 0 2 * * ?", "to": "0 0 3 * * ?"}})
    );
    assert_eq!(find("JOB_TRIGGERED")["detail"]["traceIds"], json!([trace]));
    assert_eq!(
        find("EXECUTION_RETRIED")["detail"]["traceId"],
        retried["traceId"]
    );
    assert_eq!(
        find("TOKEN_CREATED")["detail"],
        json!({"role": "operator", "namespaces": ["team-a"]})
    );
    assert_eq!(find("JOB_CREATED")["detail"]["cron"], "0 0 2 * * ?");
    assert!(!page.to_string().contains("jf_"), "no secret in the trail");

    // Filters and paging.
    let count = |q: &str| {
        let app = &app;
        let q = q.to_string();
        async move {
            let (s, p) = call(
                app,
                Method::GET,
                &format!("/api/v1/audit?{q}"),
                None,
                Some(ADMIN),
            )
            .await;
            assert_eq!(s, 200, "{q}: {p}");
            p["totalElements"].as_i64().unwrap()
        }
    };
    assert_eq!(count("actor=ops").await, 7);
    assert_eq!(count("action=JOB_ENABLED").await, 1);
    assert_eq!(count("namespace=team-a").await, 10);
    assert_eq!(count("target=ops").await, 3);
    assert_eq!(count("actor=ops&target=sync").await, 5);
    assert_eq!(
        count("from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z").await,
        0
    );
    let (_, two) = call(
        &app,
        Method::GET,
        "/api/v1/audit?size=2&page=1",
        None,
        admin,
    )
    .await;
    assert_eq!(
        (
            two["totalElements"].as_i64(),
            two["content"].as_array().unwrap().len()
        ),
        (Some(13), 2)
    );
    assert_eq!(two["content"][0]["action"], "TOKEN_ROTATED");
    for bad in [
        "action=JOB_RENAMED",
        "namespace=A",
        "from=yesterday",
        "actor=",
    ] {
        let (s, p) = call(
            &app,
            Method::GET,
            &format!("/api/v1/audit?{bad}"),
            None,
            admin,
        )
        .await;
        assert_eq!(s, 400, "{bad}: {p}");
    }
    app.stop().await;
}

async fn the_proxy_is_believed_only_from_its_addresses(backend: Backend) {
    let db = Arc::new(TestDb::create(backend).await);
    let app = TestApp::spawn_with(db, |s| {
        s.auth.proxy = Some(ProxySettings {
            header: "X-Forwarded-User".into(),
            groups_header: Some("X-Forwarded-Groups".into()),
            trusted: vec!["127.0.0.2".into()],
            users: BTreeMap::from([("alice".into(), Role::Admin)]),
            groups: BTreeMap::from([("sre".into(), Role::Operator)]),
            default_role: Some(Role::Viewer),
        });
    })
    .await;
    let via = |source: &str| {
        reqwest::Client::builder()
            .local_address(source.parse::<std::net::IpAddr>().unwrap())
            .build()
            .unwrap()
    };
    let (proxy, elsewhere) = (via("127.0.0.2"), via("127.0.0.1"));
    let me = |client: &reqwest::Client, user: &str, groups: &str| {
        let req = client
            .get(app.url("/api/v1/auth/me"))
            .header("X-Forwarded-User", user)
            .header("X-Forwarded-Groups", groups);
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (s, m) = me(&proxy, "alice", "").await;
    assert_eq!(
        (s, &m["name"], &m["role"]),
        (200, &json!("alice"), &json!("admin"))
    );
    let (s, m) = me(&proxy, "bob", "dev,sre").await;
    assert_eq!((s, &m["role"]), (200, &json!("operator")));
    let (s, m) = me(&proxy, "carol", "").await;
    assert_eq!((s, &m["role"]), (200, &json!("viewer")));
    // The same header from any other address is nobody's word: no token, no entry.
    let (s, _) = me(&elsewhere, "alice", "").await;
    assert_eq!(s, 401);
    // What a proxied user does is theirs.
    let resp = proxy
        .post(app.url("/api/v1/jobs"))
        .header("X-Forwarded-User", "alice")
        .json(&job("by-alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let created: Value = resp.json().await.unwrap();
    assert_eq!(created["createdBy"], "alice");
    let audit: Value = proxy
        .get(app.url("/api/v1/audit?action=JOB_CREATED"))
        .header("X-Forwarded-User", "alice")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(audit["content"][0]["actor"], "alice");
    app.stop().await;
}

async fn a_database_of_the_last_release_keeps_every_job_and_its_owner(backend: Backend) {
    let db = Arc::new(TestDb::create(backend).await);
    // The last migration of the release before namespaces.
    migrate_until(&db, backend, 20261204150001).await;
    let at = match backend {
        Backend::Sqlite => "'2026-12-04T01:00:00.000+00:00'",
        Backend::MySql => "'2026-12-04 01:00:00.000'",
    };
    let old = ["order-sync", "订单对账", "pay:recon-2024_v1"];
    for name in old {
        db.execute(&format!(
            "INSERT INTO job_definition (name, service_name, handler, cron, created_at, updated_at) \
             VALUES ('{name}', 'order-service', 'h', '* * * * * ?', {at}, {at})"
        ))
        .await;
    }
    let executor = Recorder::start().await;
    let list = vec![executor.addr.clone()];
    let app = TestApp::spawn_with(db.clone(), move |s| {
        s.executors.static_ = static_executors("order-service", &list)
    })
    .await;
    // Every job is in `default`, under its old name: the key ownership hashes is unchanged.
    // (Read on a connection opened after the upgrade: one opened before it would have read
    // the old schema.)
    let store = jobflow::store::connect(&crate::helpers::base_settings(&db.url).database)
        .await
        .unwrap();
    let jobs = store.load_jobs().await.unwrap();
    let mut keys: Vec<&str> = jobs.iter().map(|j| j.name().key()).collect();
    keys.sort();
    let mut expected = old.to_vec();
    expected.sort();
    assert_eq!(keys, expected);
    assert!(jobs.iter().all(|j| j.name().namespace() == "default"));
    let instances: Vec<String> = ["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"]
        .map(String::from)
        .to_vec();
    let ring =
        jobflow::engine::ownership::OwnershipRing::new(instances.clone(), Default::default());
    for j in &jobs {
        let by_name = &instances[jobflow::engine::ownership::java_hash_index(j.name().local(), 3)];
        assert_eq!(ring.owner_of(j.name().key()), Some(by_name.as_str()));
    }
    let (_, listed) = app.get("/api/v1/jobs").await;
    assert_eq!(listed["totalElements"], 3);
    // And every one of them fires, with the execution ids it always had.
    let calls = eventually(Duration::from_secs(10), "every job fired", || async {
        let calls = executor.calls();
        let fired: std::collections::BTreeSet<String> = calls
            .iter()
            .map(|c| c.body["jobName"].as_str().unwrap().to_string())
            .collect();
        (fired.len() == 3).then_some(calls)
    })
    .await;
    for c in calls {
        let name = c.body["jobName"].as_str().unwrap();
        assert!(
            c.body["executionId"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{name}:"))
        );
        assert_eq!(c.header("x-job-namespace"), "");
    }
    app.stop().await;
}
