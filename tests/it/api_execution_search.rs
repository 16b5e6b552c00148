//! `GET /api/v1/executions`: the search over the executions of all jobs, and the history of a
//! deleted job.

use chrono::{DateTime, Duration, TimeZone, Utc};
use jobflow::jobs::{ExecutionStatus, NewExecution, TriggerType, new_trace_id};
use serde_json::Value;

use crate::helpers::{Backend, TestApp, backend_tests, job, problem_fields};

backend_tests!(
    search_filters_and_orders_newest_first,
    search_pages_like_the_job_history,
    search_rejects_bad_parameters_by_name,
    deleted_job_history_is_found_by_search,
);

/// Settled rows (nothing in the engine touches them) at fixed instants.
fn row(
    job: &str,
    minute: i64,
    status: ExecutionStatus,
    trigger: TriggerType,
    executor: Option<&str>,
) -> NewExecution {
    let t = base() + Duration::minutes(minute);
    let trace_id = new_trace_id();
    NewExecution {
        execution_id: format!("{job}:{trace_id}"),
        trace_id,
        job_name: job.into(),
        trigger_type: trigger,
        fire_time: t,
        scheduler_instance: "127.0.0.1:8080".into(),
        executor_instance: executor.map(str::to_string),
        shard_start: 0,
        shard_end: 0,
        shard_count: 1,
        trigger_time: t,
        due_time: t,
        status,
        retry_count: 0,
        parent_trace_id: None,
        error_message: None,
        job_params: None,
    }
}

fn base() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 31, 0, 0, 0).unwrap()
}

async fn insert(app: &TestApp, rows: Vec<NewExecution>) -> Vec<String> {
    let traces = rows.iter().map(|r| r.trace_id.clone()).collect();
    app.store
        .record_fire(None, &rows)
        .await
        .expect("insert rows");
    traces
}

/// The trace ids of a search's page, asserting it answered 200.
async fn traces(app: &TestApp, query: &str) -> Vec<String> {
    let (status, page) = app.get(&format!("/api/v1/executions{query}")).await;
    assert_eq!(status, 200, "{query}: {page}");
    page["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["traceId"].as_str().unwrap().to_string())
        .collect()
}

async fn search_filters_and_orders_newest_first(backend: Backend) {
    use ExecutionStatus::*;
    use TriggerType::*;
    let app = TestApp::spawn(backend).await;
    let t = insert(
        &app,
        vec![
            row("order-sync", 0, Success, Cron, Some("10.0.0.1:9001")),
            row("order-sync", 1, Failed, Cron, Some("10.0.0.2:9001")),
            row("order-sync", 2, Success, Retry, Some("10.0.0.1:9001")),
            row("bill-run", 3, Failed, Manual, None),
            row("bill-run", 4, Timeout, Retry, Some("10.0.0.2:9001")),
        ],
    )
    .await;
    let newest_first = |idx: &[usize]| idx.iter().map(|&i| t[i].clone()).collect::<Vec<_>>();

    assert_eq!(traces(&app, "").await, newest_first(&[4, 3, 2, 1, 0]));
    assert_eq!(
        traces(&app, "?jobName=order-sync").await,
        newest_first(&[2, 1, 0])
    );
    assert_eq!(traces(&app, "?status=FAILED").await, newest_first(&[3, 1]));
    assert_eq!(
        traces(&app, "?triggerType=RETRY").await,
        newest_first(&[4, 2])
    );
    assert_eq!(
        traces(&app, "?executor=10.0.0.2:9001").await,
        newest_first(&[4, 1])
    );
    // Every given filter must match.
    assert_eq!(
        traces(&app, "?jobName=order-sync&status=SUCCESS&triggerType=RETRY").await,
        newest_first(&[2])
    );
    assert_eq!(
        traces(&app, "?jobName=bill-run&executor=10.0.0.1:9001").await,
        newest_first(&[])
    );
    // from and to are both inclusive, and any offset names the same instant.
    assert_eq!(
        traces(
            &app,
            "?from=2026-01-31T00:01:00Z&to=2026-01-31T08:03:00%2B08:00"
        )
        .await,
        newest_first(&[3, 2, 1])
    );
    assert_eq!(
        traces(&app, "?from=2026-01-31T00:03:00.001Z").await,
        newest_first(&[4])
    );
    assert_eq!(
        traces(&app, "?to=2026-01-30T23:59:59.999Z").await,
        newest_first(&[])
    );
    assert_eq!(
        traces(&app, "?status=FAILED&to=2026-01-31T00:02:00Z").await,
        newest_first(&[1])
    );
    // A job that never existed has no executions: an empty page, not an error.
    assert_eq!(traces(&app, "?jobName=nobody").await, newest_first(&[]));
}

async fn search_pages_like_the_job_history(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_job(&job("paged")).await;
    let rows = (0..5)
        .map(|m| {
            row(
                "paged",
                m,
                ExecutionStatus::Success,
                TriggerType::Cron,
                None,
            )
        })
        .collect();
    let t = insert(&app, rows).await;

    let (status, page) = app.get("/api/v1/executions?size=2&page=1").await;
    assert_eq!(status, 200);
    let (_, history) = app.get("/api/v1/jobs/paged/executions?size=2&page=1").await;
    // The same page JSON, field for field, as the per-job history.
    assert_eq!(page, history);
    let keys: Vec<&String> = page.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["content", "number", "size", "totalElements", "totalPages"]
    );
    assert_eq!(
        (
            &page["number"],
            &page["size"],
            &page["totalElements"],
            &page["totalPages"]
        ),
        (
            &Value::from(1),
            &Value::from(2),
            &Value::from(5),
            &Value::from(3)
        )
    );
    assert_eq!(
        traces(&app, "?size=2&page=1").await,
        vec![t[2].clone(), t[1].clone()]
    );
    assert_eq!(traces(&app, "?size=2&page=2").await, vec![t[0].clone()]);
    assert_eq!(traces(&app, "?size=2&page=3").await, Vec::<String>::new());
    // An execution is the same object here as when fetched by trace id.
    let (_, one) = app.get(&format!("/api/v1/jobs/executions/{}", t[2])).await;
    assert_eq!(page["content"][0], one);
}

async fn search_rejects_bad_parameters_by_name(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for (query, field) in [
        ("status=DONE", "status"),
        ("triggerType=NIGHTLY", "triggerType"),
        ("jobName=bad%20name", "jobName"),
        ("jobName=", "jobName"),
        ("executor=", "executor"),
        ("from=yesterday", "from"),
        ("to=2026-01-31", "to"),
        ("from=2026-01-31T00:00:00", "from"),
        ("size=0", "size"),
        ("size=201", "size"),
        ("page=-1", "page"),
        ("size=ten", "size"),
    ] {
        let (status, problem) = app.get(&format!("/api/v1/executions?{query}")).await;
        assert_eq!(status, 400, "{query}: {problem}");
        assert_eq!(problem_fields(&problem), [field], "{query}: {problem}");
    }
    // Several bad parameters are all named at once.
    let (status, problem) = app
        .get("/api/v1/executions?status=DONE&from=soon&size=0")
        .await;
    assert_eq!(status, 400);
    assert_eq!(problem_fields(&problem), ["status", "from", "size"]);
    let (status, _) = app.get("/api/v1/executions?sort=asc").await;
    assert_eq!(status, 400);
}

async fn deleted_job_history_is_found_by_search(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_job(&job("retired")).await;
    let t = insert(
        &app,
        vec![
            row(
                "retired",
                0,
                ExecutionStatus::Success,
                TriggerType::Cron,
                None,
            ),
            row(
                "retired",
                1,
                ExecutionStatus::Failed,
                TriggerType::Cron,
                None,
            ),
        ],
    )
    .await;
    let (status, history) = app.get("/api/v1/jobs/retired/executions").await;
    assert_eq!((status, &history["totalElements"]), (200, &Value::from(2)));

    let (status, _) = app.delete("/api/v1/jobs/retired").await;
    assert_eq!(status, 204);
    // The job's sub-resource is gone with it ...
    let (status, problem) = app.get("/api/v1/jobs/retired/executions").await;
    assert_eq!(status, 404);
    assert_eq!(problem["type"], "urn:jobflow:problem:not-found");
    // ... while its rows are kept and found by search, and by trace id.
    assert_eq!(
        traces(&app, "?jobName=retired").await,
        vec![t[1].clone(), t[0].clone()]
    );
    let (status, _) = app.get(&format!("/api/v1/jobs/executions/{}", t[0])).await;
    assert_eq!(status, 200);
}
