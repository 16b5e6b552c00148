//! Per-service concurrency caps (`[executors.limits]`): calls beyond a service's cap wait for
//! one to end; none is dropped or doubled, and the waits show in the metrics.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use serde_json::json;

use crate::helpers::{Backend, TestApp, TestDb, backend_tests, eventually, static_executors};

backend_tests!(calls_beyond_a_services_cap_wait_for_one_to_end,);

/// An executor whose handler takes half a second, counting the calls it runs at once.
#[derive(Clone, Default)]
struct Counting {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    done: Arc<AtomicUsize>,
}

impl Counting {
    async fn start(&self) -> String {
        let me = self.clone();
        let app = Router::new().route(
            "/internal/job/{handler}",
            post(move || {
                let me = me.clone();
                async move {
                    let running = me.now.fetch_add(1, Ordering::SeqCst) + 1;
                    me.most.fetch_max(running, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    me.now.fetch_sub(1, Ordering::SeqCst);
                    me.done.fetch_add(1, Ordering::SeqCst);
                    axum::Json(json!({"success": true, "message": "done"}))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }
}

/// Six jobs of a service capped at 2 triggered at once: the executor never runs more than
/// two of them at a time, and all six run once and succeed. Another service's calls go on
/// beside them, uncounted.
async fn calls_beyond_a_services_cap_wait_for_one_to_end(backend: Backend) {
    let capped = Counting::default();
    let free = Counting::default();
    let (capped_addr, free_addr) = (capped.start().await, free.start().await);
    // Metrics are the process's: each backend's run of this test names its own service, so
    // the two running at once do not read each other's waiting calls.
    let billing: &'static str = match backend {
        Backend::Sqlite => "billing-sqlite",
        Backend::MySql => "billing-mysql",
    };
    let db = Arc::new(TestDb::create(backend).await);
    let app = TestApp::spawn_with(db, move |s| {
        let mut executors = static_executors(billing, &[capped_addr]);
        executors.extend(static_executors("mailer", &[free_addr]));
        s.executors.static_ = executors;
        s.executors.limits = [(billing.to_string(), 2.try_into().unwrap())].into();
    })
    .await;
    let jobs: Vec<(String, &str)> = (0..6)
        .map(|i| (format!("capped-{i}"), billing))
        .chain((0..6).map(|i| (format!("free-{i}"), "mailer")))
        .collect();
    for (name, service) in &jobs {
        app.create_job(
            &json!({"name": name, "serviceName": service, "handler": "work",
            "cron": "0 0 3 1 1 ?", "maxRetry": 0}),
        )
        .await;
    }
    for (name, _) in &jobs {
        let (status, body) = app
            .post(&format!("/api/v1/jobs/{name}/trigger"), &json!({}))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    eventually(Duration::from_secs(20), "every call done", || async {
        (capped.done.load(Ordering::SeqCst) == 6 && free.done.load(Ordering::SeqCst) == 6)
            .then_some(())
    })
    .await;
    assert_eq!(
        capped.most.load(Ordering::SeqCst),
        2,
        "at most the cap at once"
    );
    assert!(
        free.most.load(Ordering::SeqCst) > 2,
        "the other service is not capped"
    );
    for (name, _) in &jobs {
        let (_, page) = app.get(&format!("/api/v1/jobs/{name}/executions")).await;
        let rows = page["content"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{name}: {page}");
        assert_eq!(rows[0]["status"], "SUCCESS", "{name}: {page}");
    }
    let metrics = app.metrics().await;
    assert!(
        metrics.contains(&format!(
            "scheduler_service_calls_waiting{{service_name=\"{billing}\"}} 0"
        )),
        "{metrics}"
    );
    assert!(
        !metrics.contains("service_name=\"mailer\""),
        "an uncapped service never waits: {metrics}"
    );
}
