//! A handler slow to stop is never retried beside itself. The executor here is truthful and
//! slow: its handler ignores the job's timeout and runs on for 20 s, its status answers
//! RUNNING while it runs, and its cancel answers only after 10 s (what the SDK allows a
//! handler to stop in), RUNNING while it still runs. The scheduler gives up on the answer at
//! the timeout, asks the executor to stop, hears RUNNING, and then waits: compensation keeps
//! asking until the executor says the run ended, and only then is the retry called. A range
//! never runs twice at once.
//!
//! Under overlap COVER the same executor's runs are covered by newer fires: each newer fire
//! waits until every run before it has stopped, including runs a fire before it covered and
//! that are still stopping. The job never runs two fires at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde_json::json;

use crate::helpers::{Backend, TestApp, TestDb, backend_tests, eventually, static_executors};

backend_tests!(
    a_handler_slow_to_stop_is_not_retried_beside_itself,
    a_cover_fire_waits_for_every_run_still_stopping,
    a_cover_trigger_is_answered_before_the_run_it_covers_stops,
    a_covered_run_its_executor_never_had_stops_only_once_the_executor_was_told,
    a_cover_fire_asks_every_covered_run_at_once,
);

/// How long the handler runs, whatever it is asked (unless the test says otherwise).
const RUN: Duration = Duration::from_secs(20);
/// How long a cancel request waits for the handler before answering RUNNING.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
struct Run {
    trace: String,
    range: String,
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
}

#[derive(Clone)]
struct Truth {
    runs: Arc<Mutex<Vec<Run>>>,
    run: Duration,
}

impl Truth {
    fn new(run: Duration) -> Self {
        Self {
            runs: Arc::default(),
            run,
        }
    }

    fn state(&self, trace: &str) -> Option<&'static str> {
        let runs = self.runs.lock().unwrap();
        let run = runs.iter().find(|r| r.trace == trace)?;
        Some(if run.end.is_some() {
            "TIMEOUT"
        } else {
            "RUNNING"
        })
    }

    fn answer(&self, trace: &str) -> (StatusCode, String) {
        let body = |status: &str| {
            json!({"traceId": trace, "status": status, "startedAt": "2020-01-01T00:00:00Z",
                "message": "ran past its timeout"})
            .to_string()
        };
        match self.state(trace) {
            Some(s) => (StatusCode::OK, body(s)),
            None => (StatusCode::NOT_FOUND, body("UNKNOWN")),
        }
    }
}

async fn call(State(t): State<Truth>, headers: HeaderMap) -> (StatusCode, String) {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let (trace, id) = (header("x-trace-id"), header("x-execution-id"));
    let range = id.split('#').next().unwrap_or("").to_string();
    let index = {
        let mut runs = t.runs.lock().unwrap();
        runs.push(Run {
            trace,
            range,
            start: Utc::now(),
            end: None,
        });
        runs.len() - 1
    };
    // The work runs on whatever happens to this request.
    let truth = t.clone();
    let work = tokio::spawn(async move {
        tokio::time::sleep(truth.run).await;
        truth.runs.lock().unwrap()[index].end = Some(Utc::now());
    });
    let _ = work.await;
    (
        StatusCode::OK,
        json!({"success": false, "message": "ran past its timeout"}).to_string(),
    )
}

async fn status(State(t): State<Truth>, Path(trace): Path<String>) -> (StatusCode, String) {
    t.answer(&trace)
}

async fn cancel(State(t): State<Truth>, Path(trace): Path<String>) -> (StatusCode, String) {
    let until = tokio::time::Instant::now() + CANCEL_WAIT;
    while t.state(&trace) == Some("RUNNING") && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    t.answer(&trace)
}

/// The truthful, slow executor on a port of its own: its address.
async fn serve_truth(truth: &Truth) -> String {
    let app = Router::new()
        .route("/internal/job/status/{trace}", get(status))
        .route("/internal/job/cancel/{trace}", post(cancel))
        .route("/internal/job/{handler}", post(call))
        .with_state(truth.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// The truthful, slow executor, and a scheduler whose compensation asks every second.
async fn slow_executor(backend: Backend, truth: &Truth) -> TestApp {
    let addr = serve_truth(truth).await;
    let db = Arc::new(TestDb::create(backend).await);
    TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &[addr]);
        s.compensation.interval_seconds = 1.try_into().unwrap();
        s.compensation.stuck_after_seconds = 3.try_into().unwrap();
        s.compensation.recovery_interval_millis = 200;
        s.compensation.pending_grace_seconds = 2;
    })
    .await
}

async fn a_handler_slow_to_stop_is_not_retried_beside_itself(backend: Backend) {
    let truth = Truth::new(RUN);
    let scheduler = slow_executor(backend, &truth).await;
    scheduler
        .create_job(
            &json!({"name": "stubborn", "serviceName": "svc", "handler": "h",
            "cron": "0 0 3 1 1 ?", "timeoutSeconds": 2, "maxRetry": 1}),
        )
        .await;
    let (status, rows) = scheduler
        .post("/api/v1/jobs/stubborn/trigger", &json!({}))
        .await;
    assert_eq!(status, 200, "{rows}");
    // The retry comes once the first run ended (after RUN), never before.
    let runs = eventually(Duration::from_secs(40), "the retry's call", || async {
        let runs = truth.runs.lock().unwrap().clone();
        (runs.len() >= 2).then_some(runs)
    })
    .await;
    let (first, retry) = (&runs[0], &runs[1]);
    assert_eq!(first.range, retry.range, "{runs:?}");
    let ended = first
        .end
        .expect("the first run ended before its retry began");
    assert!(ended <= retry.start, "ran at once: {runs:?}");
    let first_row = scheduler
        .execution_in(&first.trace, "TIMEOUT", Duration::ZERO)
        .await;
    assert!(
        first_row["errorMessage"]
            .as_str()
            .unwrap()
            .contains("ran past its timeout"),
        "the executor's own account settles it: {first_row}"
    );
}

/// A COVER job fired every two seconds whose handler ignores cancels for 6 s: the fire after
/// the first covers it and waits; the fire after that covers both, the first still stopping.
/// No fire is called until the first run ended, and no two runs ever overlap.
async fn a_cover_fire_waits_for_every_run_still_stopping(backend: Backend) {
    let truth = Truth::new(Duration::from_secs(6));
    let scheduler = slow_executor(backend, &truth).await;
    scheduler
        .create_job(
            &json!({"name": "covered", "serviceName": "svc", "handler": "h",
            "cron": "*/2 * * * * ?", "timeoutSeconds": 30, "overlapPolicy": "COVER"}),
        )
        .await;
    let runs = eventually(Duration::from_secs(40), "two runs", || async {
        let runs = truth.runs.lock().unwrap().clone();
        (runs.len() >= 2).then_some(runs)
    })
    .await;
    let (status, _) = scheduler
        .patch("/api/v1/jobs/covered/enabled?enabled=false")
        .await;
    assert_eq!(status, 200);
    let (first, second) = (&runs[0], &runs[1]);
    let ended = first
        .end
        .expect("the first run ended before the next began");
    assert!(ended <= second.start, "two at once: {runs:?}");
    // Between them, fires were covered while they waited, never called.
    let (_, page) = scheduler
        .get("/api/v1/jobs/covered/executions?status=CANCELLED&size=50")
        .await;
    let cancelled = page["content"].as_array().unwrap();
    assert!(cancelled.len() >= 2, "{page}");
    let called: Vec<&str> = runs.iter().map(|r| r.trace.as_str()).collect();
    let never_called = cancelled
        .iter()
        .filter(|e| !called.contains(&e["traceId"].as_str().unwrap()))
        .count();
    assert!(never_called >= 1, "a fire covered while it waited: {page}");
}

/// A manual trigger of a COVER job is answered with its admitted rows at once, while the
/// run it covers is still stopping; its call waits until that run has ended.
async fn a_cover_trigger_is_answered_before_the_run_it_covers_stops(backend: Backend) {
    let truth = Truth::new(Duration::from_secs(4));
    let scheduler = slow_executor(backend, &truth).await;
    scheduler
        .create_job(
            &json!({"name": "covering", "serviceName": "svc", "handler": "h",
            "cron": "0 0 3 1 1 ?", "timeoutSeconds": 30, "overlapPolicy": "COVER"}),
        )
        .await;
    let trigger = "/api/v1/jobs/covering/trigger";
    let (status, _) = scheduler.post(trigger, &json!({})).await;
    assert_eq!(status, 200);
    eventually(Duration::from_secs(10), "the first run", || async {
        (!truth.runs.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    let (status, rows) = scheduler.post(trigger, &json!({})).await;
    assert_eq!(status, 200, "{rows}");
    assert!(
        truth.runs.lock().unwrap()[0].end.is_none(),
        "answered while the covered run still runs"
    );
    let runs = eventually(Duration::from_secs(20), "the second run", || async {
        let runs = truth.runs.lock().unwrap().clone();
        (runs.len() >= 2).then_some(runs)
    })
    .await;
    let ended = runs[0]
        .end
        .expect("the first run ended before the second began");
    assert!(ended <= runs[1].start, "two at once: {runs:?}");
}

/// A cron fire's row is called by its holder at the instant without reading it again; a
/// holder stalled there (its database cut) calls late. A COVER fire that cancelled the row
/// meanwhile waits for it as a run that may have been called, and the leader, asking its
/// executor, hears "never had it": the executor is then told to stop it, which it remembers,
/// before the run counts as stopped, so the late call does not run the handler. (The
/// campaign, seed 4: the leader ended the wait on "never had it" alone, and the stalled
/// holder's call ran beside the covering fire.)
async fn a_covered_run_its_executor_never_had_stops_only_once_the_executor_was_told(
    backend: Backend,
) {
    use jobflow::jobs::{ExecutionStatus, NewExecution, OverlapPolicy, TriggerType};
    use jobflow::store::{Admitted, FireOutcome};
    let (addr, runs) = crate::helpers::counting_sdk_executor("h").await;
    let db = Arc::new(TestDb::create(backend).await);
    let planned = addr.clone();
    let scheduler = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &[planned]);
        s.compensation.recovery_interval_millis = 200;
    })
    .await;
    scheduler
        .create_job(
            &json!({"name": "late-holder", "serviceName": "svc", "handler": "h",
            "cron": "0 0 3 1 1 ?", "overlapPolicy": "COVER"}),
        )
        .await;
    // The fire of this second, claimed by a holder that has not called it yet; the executor
    // ran before it (so it can say it never had it).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let instant = chrono::SubsecRound::trunc_subsecs(Utc::now(), 0);
    let row = |trigger: TriggerType, id: String| NewExecution {
        execution_id: id,
        trace_id: jobflow::jobs::new_trace_id(),
        job_name: "late-holder".into(),
        trigger_type: trigger,
        fire_time: instant,
        scheduler_instance: "127.0.0.1:1".into(),
        executor_instance: Some(addr.clone()),
        shard_start: 0,
        shard_end: 0,
        shard_count: 1,
        trigger_time: instant,
        due_time: instant,
        status: ExecutionStatus::Pending,
        retry_count: 0,
        parent_trace_id: None,
        error_message: None,
        job_params: None,
    };
    let claimed = row(
        TriggerType::Cron,
        jobflow::jobs::execution_id("late-holder", instant, 0, 0),
    );
    let trace = claimed.trace_id.clone();
    let store = scheduler.store.clone();
    assert!(matches!(
        store.record_fire(None, &[claimed]).await.unwrap(),
        FireOutcome::Recorded(_)
    ));
    // A newer run of the job covers it (admitted here, its own stop loop not run).
    let newer = row(TriggerType::Manual, "late-holder:MANUAL:x:0-0".into());
    let newer_trace = newer.trace_id.clone();
    let admitted = store
        .record_guarded(OverlapPolicy::Cover, &[newer], Utc::now())
        .await
        .unwrap();
    assert!(
        matches!(&admitted, Admitted::Run { covered, .. } if covered[0].trace_id == trace),
        "{admitted:?}"
    );
    // That run is over (nobody is to call it here).
    let over =
        jobflow::store::Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Success);
    store.transition(&newer_trace, &over).await.unwrap();
    eventually(
        Duration::from_secs(20),
        "the leader confirms the stop",
        || async {
            let stopping = store.stopping(100).await.unwrap();
            (!stopping.iter().any(|s| s.trace_id == trace)).then_some(())
        },
    )
    .await;
    // The stalled holder's call arrives now.
    let body = json!({"traceId": trace,
        "executionId": jobflow::jobs::execution_id("late-holder", instant, 0, 0),
        "jobName": "late-holder", "handler": "h", "triggerType": "CRON", "fireTime": instant,
        "shardStart": 0, "shardEnd": 0, "shardCount": 1, "shardStrategy": "MOD_HASH",
        "retryCount": 0, "timeoutSeconds": 300, "reportUrl": "http://127.0.0.1:1/report"});
    let answer = reqwest::Client::new()
        .post(format!("http://{addr}/internal/job/h"))
        .header("X-Trace-Id", &trace)
        .json(&body)
        .send()
        .await
        .unwrap();
    let answered = answer.text().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the handler ran for a call its executor was told to stop: {answered}"
    );
}

/// A COVER fire asks every run it covers to stop at once: a run whose executor takes 10 s to
/// answer its cancel (its handler runs on) does not hold back the ask of a claimed run whose
/// call may still be on its way, which its executor then remembers. (The campaign, seed 4: the
/// covering fire asked one by one, and the call of the second arrived before its ask.)
async fn a_cover_fire_asks_every_covered_run_at_once(backend: Backend) {
    use jobflow::jobs::{ExecutionStatus, NewExecution, TriggerType};
    use jobflow::store::{FireOutcome, Transition};
    let truth = Truth::new(RUN);
    let slow_addr = serve_truth(&truth).await;
    let (sdk_addr, runs) = crate::helpers::counting_sdk_executor("h").await;
    let db = Arc::new(TestDb::create(backend).await);
    let both = [slow_addr.clone(), sdk_addr.clone()];
    let scheduler = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &both);
        // The leader stays out of it: only the covering fire asks.
        s.compensation.recovery_interval_millis = 600_000;
    })
    .await;
    scheduler
        .create_job(
            &json!({"name": "two-covered", "serviceName": "svc", "handler": "h",
            "cron": "0 0 3 1 1 ?", "overlapPolicy": "COVER", "timeoutSeconds": 60}),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let instant = chrono::SubsecRound::trunc_subsecs(Utc::now(), 0);
    let row = |range: u32, executor: &str| NewExecution {
        execution_id: jobflow::jobs::execution_id("two-covered", instant, range, range),
        trace_id: jobflow::jobs::new_trace_id(),
        job_name: "two-covered".into(),
        trigger_type: TriggerType::Cron,
        fire_time: instant,
        scheduler_instance: "127.0.0.1:1".into(),
        executor_instance: Some(executor.to_string()),
        shard_start: range,
        shard_end: range,
        shard_count: 2,
        trigger_time: instant,
        due_time: instant,
        status: ExecutionStatus::Pending,
        retry_count: 0,
        parent_trace_id: None,
        error_message: None,
        job_params: None,
    };
    // Range 0 runs at the slow executor; range 1 is claimed and not called yet.
    let (running, claimed) = (row(0, &slow_addr), row(1, &sdk_addr));
    let (running_trace, claimed_trace) = (running.trace_id.clone(), claimed.trace_id.clone());
    let store = scheduler.store.clone();
    assert!(matches!(
        store.record_fire(None, &[running, claimed]).await.unwrap(),
        FireOutcome::Recorded(_)
    ));
    let started = Transition {
        executor_instance: Some(slow_addr.clone()),
        start_time: Some(Utc::now()),
        ..Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Running)
    };
    store.transition(&running_trace, &started).await.unwrap();
    let slow_call = reqwest::Client::new()
        .post(format!("http://{slow_addr}/internal/job/h"))
        .header("X-Trace-Id", &running_trace)
        .header("X-Execution-Id", "two-covered:0-0")
        .send();
    tokio::spawn(slow_call);
    eventually(Duration::from_secs(5), "range 0 running", || async {
        (truth.state(&running_trace) == Some("RUNNING")).then_some(())
    })
    .await;
    let (status, _) = scheduler
        .post("/api/v1/jobs/two-covered/trigger", &json!({}))
        .await;
    assert_eq!(status, 200);
    // Within 3 s (the slow executor answers its cancel after 10 s), the claimed range's
    // executor has been told to stop it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let answer = reqwest::get(format!(
        "http://{sdk_addr}/internal/job/status/{claimed_trace}"
    ))
    .await
    .unwrap();
    let told = answer.text().await.unwrap();
    assert!(told.contains("CANCELLED"), "{told}");
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 0);
}
