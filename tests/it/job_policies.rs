//! The job fields of docs/production.md through the REST API: `routeStrategy`, `overlapPolicy`,
//! `childJobs`, `alertChannels`, with their defaults, their save-time checks and their place
//! in the OpenAPI document.

use std::sync::Arc;

use jobflow::alerts::{ChannelKind, ChannelSettings};
use jobflow::config::Secret;
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestDb, backend_tests, job, problem_fields};

backend_tests!(
    run_policies_default_and_round_trip,
    child_jobs_must_exist_and_not_cycle,
    alert_channels_must_be_configured,
);

async fn app_with_channels(backend: Backend, names: &[&str]) -> TestApp {
    let db = Arc::new(TestDb::create(backend).await);
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    TestApp::spawn_with(db, move |s| {
        for name in names {
            s.alerts.channels.push(ChannelSettings {
                name,
                kind: ChannelKind::Webhook,
                url: Secret::new("http://127.0.0.1:9/hook"),
                secret: None,
            });
        }
    })
    .await
}

async fn run_policies_default_and_round_trip(backend: Backend) {
    let app = app_with_channels(backend, &["ops", "dev"]).await;
    let plain = app.create_job(&job("plain")).await;
    assert_eq!(plain["routeStrategy"], "ROUND_ROBIN");
    assert_eq!(plain["overlapPolicy"], "ALLOW");
    assert_eq!(plain["childJobs"], json!([]));
    assert_eq!(plain["alertChannels"], json!([]));

    let mut j = job("parent");
    j["routeStrategy"] = json!("CONSISTENT_HASH");
    j["overlapPolicy"] = json!("SKIP");
    j["childJobs"] = json!(["plain"]);
    j["alertChannels"] = json!(["ops", "dev"]);
    let created = app.create_job(&j).await;
    for k in [
        "routeStrategy",
        "overlapPolicy",
        "childJobs",
        "alertChannels",
    ] {
        assert_eq!(created[k], j[k], "{k}");
    }
    let (_, got) = app.get("/api/v1/jobs/parent").await;
    assert_eq!(got, created);

    // PUT replaces: absent fields go back to their defaults.
    let mut body = job("parent");
    body["routeStrategy"] = json!("LEAST_BUSY");
    body["overlapPolicy"] = json!("COVER");
    let (status, updated) = app.put("/api/v1/jobs/parent", &body).await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["routeStrategy"], "LEAST_BUSY");
    assert_eq!(updated["overlapPolicy"], "COVER");
    assert_eq!(updated["childJobs"], json!([]));
    assert_eq!(updated["alertChannels"], json!([]));
    let (_, got) = app.get("/api/v1/jobs/parent").await;
    assert_eq!(got, updated);

    let mut bad = job("bad");
    bad["routeStrategy"] = json!("NEAREST");
    bad["overlapPolicy"] = json!("queue");
    bad["childJobs"] = json!(["plain", "plain"]);
    let (status, problem) = app.post("/api/v1/jobs", &bad).await;
    assert_eq!(status, 400);
    assert_eq!(
        problem_fields(&problem),
        ["routeStrategy", "overlapPolicy", "childJobs"]
    );

    // The OpenAPI document shows each new field with its default.
    let (_, doc) = app.get("/api-docs/openapi.json").await;
    let props = &doc["components"]["schemas"]["JobRequest"]["properties"];
    assert_eq!(props["routeStrategy"]["default"], "ROUND_ROBIN", "{props}");
    assert_eq!(props["overlapPolicy"]["default"], "ALLOW", "{props}");
    assert_eq!(props["childJobs"]["default"], json!([]), "{props}");
    assert_eq!(props["alertChannels"]["default"], json!([]), "{props}");
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["RouteStrategy"]["enum"],
        json!([
            "ROUND_ROBIN",
            "FIRST",
            "RANDOM",
            "CONSISTENT_HASH",
            "LEAST_BUSY",
            "BROADCAST"
        ])
    );
    assert_eq!(
        schemas["OverlapPolicy"]["enum"],
        json!(["ALLOW", "SKIP", "COVER"])
    );
    for k in [
        "routeStrategy",
        "overlapPolicy",
        "childJobs",
        "alertChannels",
    ] {
        let required = schemas["JobView"]["required"].as_array().unwrap();
        assert!(
            required.contains(&json!(k)),
            "JobView.{k} is always present"
        );
    }
}

fn with_children(name: &str, children: &[&str]) -> Value {
    let mut j = job(name);
    j["childJobs"] = json!(children);
    j
}

async fn child_jobs_must_exist_and_not_cycle(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (status, problem) = app
        .post("/api/v1/jobs", &with_children("a", &["b", "ghost"]))
        .await;
    assert_eq!(status, 400);
    assert_eq!(problem_fields(&problem), ["childJobs"]);
    let message = problem["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("`b`") && message.contains("`ghost`"),
        "{message}"
    );

    let (status, problem) = app
        .post("/api/v1/jobs", &with_children("self", &["self"]))
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        problem["errors"][0]["message"],
        "would form a cycle: self -> self"
    );

    // c <- b <- a: a chain is fine; closing it through an update is not.
    app.create_job(&job("c")).await;
    app.create_job(&with_children("b", &["c"])).await;
    app.create_job(&with_children("a", &["b"])).await;
    let (status, problem) = app.put("/api/v1/jobs/c", &with_children("c", &["a"])).await;
    assert_eq!(status, 400, "{problem}");
    assert_eq!(problem_fields(&problem), ["childJobs"]);
    assert_eq!(
        problem["errors"][0]["message"],
        "would form a cycle: c -> a -> b -> c"
    );
    let (_, c) = app.get("/api/v1/jobs/c").await;
    assert_eq!(
        c["childJobs"],
        json!([]),
        "the rejected update changed nothing"
    );

    // Diamonds are not cycles; re-saving a job with its own children is fine.
    app.create_job(&with_children("d", &["b", "c"])).await;
    let (status, _) = app
        .put("/api/v1/jobs/a", &with_children("a", &["b", "c"]))
        .await;
    assert_eq!(status, 200);
}

async fn alert_channels_must_be_configured(backend: Backend) {
    let app = app_with_channels(backend, &["ops"]).await;
    let mut j = job("alerting");
    j["alertChannels"] = json!(["ops", "pager", "sms"]);
    let (status, problem) = app.post("/api/v1/jobs", &j).await;
    assert_eq!(status, 400);
    assert_eq!(problem_fields(&problem), ["alertChannels"]);
    let message = problem["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("`pager`") && message.contains("`sms`") && !message.contains("`ops`"),
        "{message}"
    );
    j["alertChannels"] = json!(["ops"]);
    let created = app.create_job(&j).await;
    assert_eq!(created["alertChannels"], json!(["ops"]));
}
