//! Hostile and malformed input: always a 4xx problem+json naming what is wrong, never a 5xx.

use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, backend_tests, job, problem_fields};

backend_tests!(
    invalid_fields_are_named,
    malformed_requests_are_4xx,
    unknown_things_are_404
);

async fn invalid_fields_are_named(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let cases: Vec<(&str, Value, &str)> = vec![
        ("invalid cron", json!({"cron": "every day at noon"}), "cron"),
        (
            "cron with 61 seconds",
            json!({"cron": "61 * * * * ?"}),
            "cron",
        ),
        (
            "cron in the past only",
            json!({"cron": "0 0 0 1 1 ? 2001"}),
            "cron",
        ),
        (
            "dot-dot service",
            json!({"serviceName": "../x"}),
            "serviceName",
        ),
        ("slash handler", json!({"handler": "a/b"}), "handler"),
        (
            "percent-encoded handler",
            json!({"handler": "%2e"}),
            "handler",
        ),
        (
            "percent-encoded dots",
            json!({"serviceName": "%2e%2e"}),
            "serviceName",
        ),
        ("whitespace handler", json!({"handler": "a b"}), "handler"),
        ("empty service", json!({"serviceName": ""}), "serviceName"),
        ("bad name", json!({"name": "no spaces"}), "name"),
        ("reserved name", json!({"name": "executions"}), "name"),
        ("long name", json!({"name": "x".repeat(101)}), "name"),
        ("zero shards", json!({"shardCount": 0}), "shardCount"),
        (
            "too many shards",
            json!({"shardCount": 10001}),
            "shardCount",
        ),
        (
            "timeout zero",
            json!({"timeoutSeconds": 0}),
            "timeoutSeconds",
        ),
        (
            "timeout over a day",
            json!({"timeoutSeconds": 86401}),
            "timeoutSeconds",
        ),
        ("negative retries", json!({"maxRetry": -1}), "maxRetry"),
        ("too many retries", json!({"maxRetry": 101}), "maxRetry"),
        ("huge number", json!({"shardCount": 1e300}), "shardCount"),
        (
            "unknown strategy",
            json!({"shardStrategy": "ROUND_ROBIN"}),
            "shardStrategy",
        ),
        (
            "unknown misfire policy",
            json!({"misfirePolicy": "LATER"}),
            "misfirePolicy",
        ),
        (
            "unknown timezone",
            json!({"timezone": "Mars/Olympus_Mons"}),
            "timezone",
        ),
        (
            "range without params",
            json!({"shardStrategy": "RANGE", "shardCount": 2}),
            "shardParams",
        ),
        (
            "custom index too high",
            json!({"shardStrategy": "CUSTOM", "shardCount": 2, "shardParams": "5=x"}),
            "shardParams",
        ),
        ("wrong type", json!({"shardCount": "ten"}), "shardCount"),
        ("null required field", json!({"cron": null}), "cron"),
        ("unknown field", json!({"shardcount": 3}), "shardcount"),
        (
            "long description",
            json!({"description": "d".repeat(501)}),
            "description",
        ),
    ];
    for (what, patch, field) in cases {
        let mut body = job("hostile");
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        let resp = app
            .client
            .post(app.url("/api/v1/jobs"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{what}");
        assert_eq!(
            resp.headers()["content-type"],
            "application/problem+json",
            "{what}"
        );
        let problem: Value = resp.json().await.unwrap();
        assert_eq!(problem["status"], 400, "{what}");
        assert!(
            problem_fields(&problem).contains(&field.to_string()),
            "{what}: {problem}"
        );
    }
    let mut missing = job("hostile");
    missing.as_object_mut().unwrap().remove("handler");
    let (status, problem) = app.post("/api/v1/jobs", &missing).await;
    assert_eq!(status, 400);
    assert_eq!(problem_fields(&problem), ["handler"]);
    // Nothing was stored by any of these.
    let (_, page) = app.get("/api/v1/jobs").await;
    assert_eq!(page["totalElements"], 0);
}

async fn malformed_requests_are_4xx(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let post_raw = |body: Vec<u8>, content_type: &'static str| {
        app.client
            .post(app.url("/api/v1/jobs"))
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let cases: Vec<(&str, Vec<u8>, &str, u16)> = vec![
        (
            "malformed JSON",
            b"{\"name\": ".to_vec(),
            "application/json",
            400,
        ),
        (
            "not an object",
            b"[1,2,3]".to_vec(),
            "application/json",
            400,
        ),
        ("empty body", Vec::new(), "application/json", 400),
        (
            "invalid UTF-8",
            vec![b'"', 0xff, 0xfe, b'"'],
            "application/json",
            400,
        ),
        (
            "deep nesting",
            format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes(),
            "application/json",
            400,
        ),
        (
            "form body",
            b"name=x".to_vec(),
            "application/x-www-form-urlencoded",
            415,
        ),
    ];
    for (what, body, ct, want) in cases {
        let resp = post_raw(body, ct).await.unwrap();
        assert_eq!(resp.status().as_u16(), want, "{what}");
        assert_eq!(
            resp.headers()["content-type"],
            "application/problem+json",
            "{what}"
        );
    }
    // Over 1 MiB: 413. The server may answer before the client has sent everything and close
    // the connection, which the client can see as a reset; only a response counts. A client
    // of its own, without pooling, keeps that connection away from the requests after it.
    let big = format!("{{\"description\": \"{}\"}}", "x".repeat(2 * 1024 * 1024)).into_bytes();
    let lone = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut answered = None;
    for _ in 0..5 {
        let sent = lone
            .post(app.url("/api/v1/jobs"))
            .header("content-type", "application/json")
            .body(big.clone())
            .send()
            .await;
        if let Ok(resp) = sent {
            answered = Some((
                resp.status().as_u16(),
                resp.headers()["content-type"].clone(),
            ));
            break;
        }
    }
    let (status, ct) = answered.expect("the server answered an oversized body");
    assert_eq!(
        (status, ct.to_str().unwrap()),
        (413, "application/problem+json")
    );

    // An array whose items fit the fields in order is still not an object: serde would read
    // it field by field, the document says object.
    let (_, trigger) = app.post("/api/v1/jobs", &job("fields-in-order")).await;
    assert_eq!(trigger["name"], "fields-in-order", "{trigger}");
    for (path, body) in [
        (
            "/api/v1/jobs",
            json!(["in-order", "svc", "h", "0 0 3 1 1 ?"]),
        ),
        ("/api/v1/jobs/fields-in-order/trigger", json!([null, null])),
        ("/api/v1/jobs/fields-in-order/trigger", json!([])),
        (
            "/api/v1/jobs/executions/feedbeef/result",
            json!([true, "done"]),
        ),
    ] {
        let (status, problem) = app.post(path, &body).await;
        assert_eq!(status, 400, "{path} {body}: {problem}");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .contains("expected an object"),
            "{problem}"
        );
    }
    assert_eq!(
        app.executions("fields-in-order").await.len(),
        0,
        "nothing was triggered"
    );

    for (path, field) in [
        ("/api/v1/jobs?size=0", "size"),
        ("/api/v1/jobs?size=100000", "size"),
        ("/api/v1/jobs?page=-1", "page"),
        ("/api/v1/jobs?enabled=perhaps", "enabled"),
        ("/api/v1/jobs/x/executions?status=DONE", "status"),
        ("/api/v1/cron/next-fire-times?cron=bogus", "cron"),
        (
            "/api/v1/cron/next-fire-times?cron=0+0+*+*+*+%3F&count=1000",
            "count",
        ),
        (
            "/api/v1/cron/next-fire-times?cron=0+0+*+*+*+%3F&timezone=Nowhere",
            "timezone",
        ),
    ] {
        let (status, problem) = app.get(path).await;
        assert_eq!(status, 400, "{path}: {problem}");
        assert!(
            problem_fields(&problem).contains(&field.to_string()),
            "{path}: {problem}"
        );
    }
}

async fn unknown_things_are_404(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for path in [
        "/api/v1/jobs/unknown",
        "/api/v1/jobs/unknown/next-fire-times",
        "/api/v1/jobs/executions/0123456789abcdef",
        "/api/v1/jobs/..%2F..%2Fetc%2Fpasswd",
        "/api/v1/nothing-here",
    ] {
        let (status, problem) = app.get(path).await;
        assert_eq!(status, 404, "{path}");
        assert_eq!(problem["status"], 404, "{path}");
    }
    let (status, _) = app.post("/api/v1/jobs/unknown/trigger", &json!({})).await;
    assert_eq!(status, 404);
    let (status, _) = app
        .post("/api/v1/jobs/executions/feedbeef/retry", &json!({}))
        .await;
    assert_eq!(status, 404);
    let (status, problem) = app.get("/api/v1/jobs/unknown/executions").await;
    assert_eq!(status, 404);
    assert_eq!(problem["status"], 404);
}
