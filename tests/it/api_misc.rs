//! OpenAPI, Swagger UI, health, metrics and fire time previews.

use crate::helpers::{Backend, TestApp, backend_tests, job};

backend_tests!(
    openapi_and_swagger_are_served,
    health_and_metrics,
    next_fire_times_preview,
    the_api_answers_while_the_scheduling_runtime_is_held
);

async fn openapi_and_swagger_are_served(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (status, doc) = app.get("/api-docs/openapi.json").await;
    assert_eq!(status, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    for path in [
        "/api/v1/jobs",
        "/api/v1/jobs/{name}",
        "/api/v1/jobs/{name}/enabled",
        "/api/v1/jobs/{name}/trigger",
        "/api/v1/jobs/{name}/executions",
        "/api/v1/jobs/executions/{traceId}",
        "/api/v1/jobs/executions/{traceId}/retry",
        "/api/v1/jobs/{name}/next-fire-times",
        "/api/v1/cron/next-fire-times",
        "/health/live",
        "/health/ready",
    ] {
        assert!(
            doc["paths"].get(path).is_some(),
            "{path} missing from OpenAPI"
        );
    }
    let resp = app
        .client
        .get(app.url("/swagger-ui/"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let html = resp.text().await.unwrap();
    assert!(html.contains("swagger-ui"), "{html}");
    // The UI's assets come from the binary, not a CDN.
    assert!(!html.contains("unpkg.com") && !html.contains("cdn"));
    let resp = app
        .client
        .get(app.url("/swagger-ui/swagger-ui-bundle.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.bytes().await.unwrap().len() > 100_000);
}

async fn health_and_metrics(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (status, live) = app.get("/health/live").await;
    assert_eq!((status, &live["status"]), (200, &serde_json::json!("UP")));
    let (status, ready) = app.get("/health/ready").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["checks"]["database"], "UP");
    app.get("/api/v1/jobs/metrics-probe").await;
    let text = app.metrics().await;
    assert!(
        text.lines()
            .any(|l| l.starts_with("http_server_requests_seconds_count")
                && l.contains("uri=\"/api/v1/jobs/{name}\"")
                && l.contains("status=\"404\"")),
        "{text}"
    );
    app.stop().await;
}

async fn next_fire_times_preview(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut j = job("nightly");
    j["timezone"] = serde_json::json!("Asia/Shanghai");
    app.create_job(&j).await;
    let (status, body) = app
        .get("/api/v1/jobs/nightly/next-fire-times?count=3")
        .await;
    assert_eq!(status, 200, "{body}");
    let times = body["fireTimes"].as_array().unwrap();
    assert_eq!(times.len(), 3);
    // 02:00 in Shanghai is 18:00 UTC.
    assert!(
        times
            .iter()
            .all(|t| t.as_str().unwrap().contains("T18:00:00")),
        "{body}"
    );
    assert!(
        body["localFireTimes"][0]
            .as_str()
            .unwrap()
            .ends_with("T02:00:00+08:00")
    );

    let (status, body) = app
        .get("/api/v1/cron/next-fire-times?cron=0%200%2012%20L%20*%20%3F&count=2")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["fireTimes"].as_array().unwrap().len(), 2);
    assert_eq!(body["timezone"], "UTC");
}

/// The API serves from a runtime of its own: with every worker of the scheduling runtime held
/// (as at 10,000 fires a second, when thousands of attempts are ready at each second's burst),
/// a request is still answered, its read of the database included (on MySQL the API's
/// connections are opened, and so driven, by its own runtime). The request goes from a plain
/// thread with a plain socket, so nothing of the held runtime carries it.
async fn the_api_answers_while_the_scheduling_runtime_is_held(backend: Backend) {
    use std::io::{Read, Write};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let app = TestApp::spawn(backend).await;
    let held = Arc::new(AtomicBool::new(true));
    let holders: Vec<_> = (0..2)
        .map(|_| {
            let held = held.clone();
            tokio::spawn(async move {
                while held.load(Ordering::SeqCst) {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            })
        })
        .collect();
    let addr = app.addr.trim_start_matches("http://").to_string();
    let answer = std::thread::spawn(move || {
        let mut socket = std::net::TcpStream::connect(&addr).unwrap();
        // A bound on a hang, not a measure: the answer takes milliseconds.
        socket
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        let ask = format!("GET /api/v1/jobs HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        socket.write_all(ask.as_bytes()).unwrap();
        let mut answer = String::new();
        let read = socket.read_to_string(&mut answer);
        (read.map_err(|e| e.kind()), answer)
    })
    .join()
    .unwrap();
    held.store(false, Ordering::SeqCst);
    for h in holders {
        h.await.unwrap();
    }
    let (read, answer) = answer;
    assert!(
        read.is_ok(),
        "no answer while the runtime was held: {read:?}"
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    app.stop().await;
}

/// An instance whose runtime is shut down under it (an embedding program exiting, a test
/// ending) stops its API's threads too: the port closes, and the API's database connections
/// with it.
#[test]
fn an_instance_dropped_with_its_runtime_stops_serving() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let app = runtime.block_on(async {
        let app = TestApp::spawn(Backend::Sqlite).await;
        let (status, _) = app.get("/api/v1/jobs").await;
        assert_eq!(status, 200);
        app
    });
    let addr = app.addr.trim_start_matches("http://").to_string();
    // The runtime goes first, the instance still running on it (never told to stop).
    drop(runtime);
    // A bound on a hang, not a measure: the port closes within milliseconds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(&addr).is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "{addr} still serves after its runtime was dropped"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Its handles (pools, client) are let go where a runtime runs.
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(async move { drop(app) });
}
