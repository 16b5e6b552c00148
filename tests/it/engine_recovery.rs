//! Recovery: compensation of abandoned rows, and misfire handling across a restart. A manual
//! run's own `jobParams` reach the executor whoever dispatches its row or its retries.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use jobflow::jobs::{ExecutionStatus, NewExecution, TriggerType, new_trace_id};
use jobflow::store::{FireOutcome, Transition};
use serde_json::json;

use crate::helpers::{
    Backend, Inbox, TestApp, TestDb, backend_tests, eventually, static_executors,
};
use crate::recorder::{Recorder, Reply};

backend_tests!(
    compensation_times_out_stuck_running_rows_and_retries,
    compensation_redispatches_abandoned_pending_rows,
    a_pending_row_whose_call_arrived_is_adopted_not_called_again,
    compensation_withdraws_a_fire_from_before_the_job_was_created_again,
    a_call_that_never_arrived_is_sent_again_without_spending_a_retry,
    a_run_lost_to_an_executor_restart_is_retried,
    restart_between_fires_follows_the_misfire_policy,
    a_manual_runs_params_reach_the_executor_when_another_instance_dispatches_it,
    retries_of_a_manual_run_keep_its_params_on_any_instance,
    an_attempt_whose_row_was_taken_over_leaves_it_to_its_new_holder,
);

async fn compensating_app(backend: Backend, rec: &Recorder) -> TestApp {
    let db = Arc::new(TestDb::create(backend).await);
    let addr = vec![rec.addr.clone()];
    TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &addr);
        s.compensation.interval_seconds = 1u64.try_into().unwrap();
        s.compensation.stuck_after_seconds = 1u64.try_into().unwrap();
        s.compensation.pending_grace_seconds = 2;
        s.scheduler.retry_backoff_millis = 50u64.try_into().unwrap();
        s.scheduler.retry_backoff_max_millis = 100u64.try_into().unwrap();
    })
    .await
}

/// A row as a scheduler that died mid-dispatch leaves it.
async fn abandoned_row(
    app: &TestApp,
    job: &str,
    status: ExecutionStatus,
    executor: &str,
) -> String {
    // An instant of the job as it is (a fire from before it was created or last enabled is
    // withdrawn, not dispatched).
    abandoned_row_at(
        app,
        job,
        status,
        executor,
        Utc::now() + chrono::Duration::seconds(1),
    )
    .await
}

/// A row of `job`'s fire at `fire`, held by a scheduler whose lease ran out long ago.
async fn abandoned_row_at(
    app: &TestApp,
    job: &str,
    status: ExecutionStatus,
    executor: &str,
    fire: chrono::DateTime<Utc>,
) -> String {
    let long_ago = Utc::now().trunc_subsecs(0) - chrono::Duration::minutes(5);
    let trace_id = new_trace_id();
    let row = NewExecution {
        execution_id: format!("{job}:{}:0-0", fire.format("%Y%m%d%H%M%S")),
        trace_id: trace_id.clone(),
        job_name: job.into(),
        trigger_type: TriggerType::Cron,
        fire_time: fire,
        scheduler_instance: "10.9.9.9:8080".into(),
        // A PENDING row is planned towards its executor when it is recorded.
        executor_instance: (!executor.is_empty()).then(|| executor.into()),
        shard_start: 0,
        shard_end: 0,
        shard_count: 1,
        trigger_time: long_ago,
        due_time: long_ago,
        status: ExecutionStatus::Pending,
        retry_count: 0,
        parent_trace_id: None,
        error_message: None,
        job_params: None,
    };
    assert!(matches!(
        app.store.record_fire(None, &[row]).await.unwrap(),
        FireOutcome::Recorded(_)
    ));
    if status == ExecutionStatus::Running {
        let t = Transition {
            executor_instance: Some(executor.into()),
            start_time: Some(long_ago),
            ..Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Running)
        };
        assert!(app.store.transition(&trace_id, &t).await.unwrap().applied());
    }
    trace_id
}

async fn compensation_times_out_stuck_running_rows_and_retries(backend: Backend) {
    let rec = Recorder::start().await;
    let app = compensating_app(backend, &rec).await;
    app.create_job(&json!({"name": "stuck", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?", "timeoutSeconds": 1, "maxRetry": 1})).await;
    // Long past the job's timeout: compensation asks the executor to stop it, which it
    // confirms, and only then is the execution TIMEOUT and retried.
    let trace = abandoned_row(&app, "stuck", ExecutionStatus::Running, &rec.addr).await;
    let e = eventually(Duration::from_secs(10), "TIMEOUT", || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        (e["status"] == "TIMEOUT").then_some(e)
    })
    .await;
    assert!(
        e["errorMessage"].as_str().unwrap().contains("compensation"),
        "{e}"
    );
    // The retry policy applies: a COMPENSATION retry runs on the executor.
    let retry = eventually(Duration::from_secs(10), "the retry", || async {
        app.executions("stuck")
            .await
            .into_iter()
            .find(|r| r["parentTraceId"] == trace.as_str() && r["status"] == "SUCCESS")
    })
    .await;
    assert_eq!(retry["triggerType"], "COMPENSATION");
    assert_eq!(retry["retryCount"], 1);
    assert_eq!(
        rec.calls()[0].trace_id(),
        retry["traceId"].as_str().unwrap()
    );
    // The late result of the original execution does not overwrite the compensator's verdict.
    let (status, _) = app
        .post(
            &format!("/api/v1/jobs/executions/{trace}/result"),
            &json!({"success": true}),
        )
        .await;
    assert_eq!(status, 409);
    let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
    assert_eq!(e["status"], "TIMEOUT");

    // A RUNNING row of a departed scheduler, within its job's timeout: the executor is asked.
    // Still running: left alone. Finished: settled with its answer.
    app.create_job(&json!({"name": "long", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?", "timeoutSeconds": 3600, "maxRetry": 1})).await;
    let running = abandoned_row(&app, "long", ExecutionStatus::Running, &rec.addr).await;
    rec.set_status_answer(Some(json!({"status": "RUNNING"})));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (_, e) = app.get(&format!("/api/v1/jobs/executions/{running}")).await;
    assert_eq!(e["status"], "RUNNING");
    rec.set_status_answer(Some(
        json!({"status": "SUCCESS", "message": "finished while you were away"}),
    ));
    let e = eventually(
        Duration::from_secs(10),
        "SUCCESS from the status answer",
        || async {
            let (_, e) = app.get(&format!("/api/v1/jobs/executions/{running}")).await;
            (e["status"] == "SUCCESS").then_some(e)
        },
    )
    .await;
    assert_eq!(e["resultMessage"], "finished while you were away");
}

async fn compensation_redispatches_abandoned_pending_rows(backend: Backend) {
    let rec = Recorder::start().await;
    let app = compensating_app(backend, &rec).await;
    app.create_job(
        &json!({"name": "abandoned", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?"}),
    )
    .await;
    let trace = abandoned_row(&app, "abandoned", ExecutionStatus::Pending, "").await;
    let e = eventually(Duration::from_secs(10), "SUCCESS", || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        (e["status"] == "SUCCESS").then_some(e)
    })
    .await;
    assert_eq!(e["executorInstance"], rec.addr.as_str());
    let calls = rec.calls();
    assert_eq!(calls.len(), 1, "dispatched once");
    assert_eq!(calls[0].trace_id(), trace);
}

/// The holder died between its call and writing RUNNING (the row stays PENDING): the planned
/// executor says it has the run, so compensation adopts it (RUNNING, then the verdict the
/// executor reports) and never calls it a second time.
async fn a_pending_row_whose_call_arrived_is_adopted_not_called_again(backend: Backend) {
    let rec = Recorder::start().await;
    let app = compensating_app(backend, &rec).await;
    app.create_job(&json!({"name": "arrived", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?", "timeoutSeconds": 3600, "maxRetry": 1})).await;
    rec.set_status_answer(Some(json!({"status": "RUNNING"})));
    let trace = abandoned_row(&app, "arrived", ExecutionStatus::Pending, &rec.addr).await;
    let e = eventually(Duration::from_secs(10), "adopted as RUNNING", || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        (e["status"] == "RUNNING").then_some(e)
    })
    .await;
    assert_eq!(e["executorInstance"], rec.addr.as_str());
    rec.set_status_answer(Some(json!({"status": "SUCCESS", "message": "ran once"})));
    let e = eventually(Duration::from_secs(10), "SUCCESS", || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        (e["status"] == "SUCCESS").then_some(e)
    })
    .await;
    assert_eq!(e["resultMessage"], "ran once");
    assert!(rec.calls().is_empty(), "never called again");
    assert_eq!(app.executions("arrived").await.len(), 1, "no retry row");
}

/// The holder of a claimed fire died before it could withdraw it, and the job was deleted and
/// created again under its name since: compensation withdraws the fire (CANCELLED), it does
/// not call the new job for an instant from before it existed.
async fn compensation_withdraws_a_fire_from_before_the_job_was_created_again(backend: Backend) {
    let rec = Recorder::start().await;
    let app = compensating_app(backend, &rec).await;
    let instant = Utc::now().trunc_subsecs(0) - chrono::Duration::seconds(30);
    app.create_job(
        &json!({"name": "reborn", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?"}),
    )
    .await;
    let trace = abandoned_row_at(&app, "reborn", ExecutionStatus::Pending, "", instant).await;
    let e = eventually(Duration::from_secs(10), "CANCELLED", || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        (e["status"] == "CANCELLED").then_some(e)
    })
    .await;
    assert!(
        e["errorMessage"].as_str().unwrap().starts_with("withdrawn"),
        "{e}"
    );
    assert!(rec.calls().is_empty(), "never called");
}

async fn restart_between_fires_follows_the_misfire_policy(backend: Backend) {
    let rec = Recorder::start().await;
    let db = Arc::new(TestDb::create(backend).await);
    let addr = vec![rec.addr.clone()];
    let (inbox, hook) = Inbox::start().await;
    let settings = move |s: &mut jobflow::Settings| {
        s.executors.static_ = static_executors("svc", &addr);
        s.scheduler.misfire_tolerance_millis = 500;
        Inbox::channel(&hook, s);
    };
    let period = 6;
    let first = TestApp::spawn_with(db.clone(), settings.clone()).await;
    for (name, policy) in [("catch-up", "FIRE_ONCE_NOW"), ("let-go", "DO_NOTHING")] {
        first.create_job(&json!({"name": name, "serviceName": "svc", "handler": "h", "cron": format!("*/{period} * * * * ?"), "misfirePolicy": policy})).await;
    }
    // Wait for a fire of both, then stop right after it.
    eventually(
        Duration::from_secs(15),
        "a first fire of both jobs",
        || async {
            let c = rec.calls();
            (c.iter().any(|c| c.header("x-job-name") == "catch-up")
                && c.iter().any(|c| c.header("x-job-name") == "let-go"))
            .then_some(())
        },
    )
    .await;
    first.stop().await;
    let stopped = Utc::now();
    // The first scheduled instant after the stop.
    let mut missed = stopped.trunc_subsecs(0) + chrono::Duration::seconds(1);
    while missed.timestamp() % period != 0 {
        missed += chrono::Duration::seconds(1);
    }
    // Down across `missed`, back 2 s after it: later than the tolerance, well inside the
    // threshold, before the next fire.
    let back = missed + chrono::Duration::seconds(2);
    tokio::time::sleep((back - Utc::now()).to_std().unwrap()).await;
    let second = TestApp::spawn_with(db.clone(), settings).await;
    let missed_rfc = missed.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let next_rfc = (missed + chrono::Duration::seconds(period))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    eventually(
        Duration::from_secs(15),
        "the next regular fire of both",
        || async {
            let c = rec.calls();
            let n = c
                .iter()
                .filter(|c| c.header("x-fire-time") == next_rfc)
                .count();
            (n == 2).then_some(())
        },
    )
    .await;
    let fires_of = |job: &str, at: &str| {
        rec.calls()
            .iter()
            .filter(|c| c.header("x-job-name") == job && c.header("x-fire-time") == at)
            .count()
    };
    assert_eq!(
        fires_of("catch-up", &missed_rfc),
        1,
        "FIRE_ONCE_NOW catches the missed fire up once"
    );
    assert_eq!(fires_of("let-go", &missed_rfc), 0, "DO_NOTHING skips it");
    let caught = rec
        .calls()
        .into_iter()
        .find(|c| c.header("x-job-name") == "catch-up" && c.header("x-fire-time") == missed_rfc)
        .unwrap();
    assert!(caught.received_at >= back, "fired after the restart");
    // The fire let go is announced, once; the one caught up is not.
    let skipped = inbox
        .wait_for("FIRE_SKIPPED", Duration::from_secs(10))
        .await;
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["jobName"], "let-go");
    let at: DateTime<Utc> = skipped[0]["fireTime"].as_str().unwrap().parse().unwrap();
    assert_eq!(at, missed, "{skipped:?}");
    second.stop().await;
}

/// A RUNNING row of a departed scheduler whose executor never received the call (the
/// scheduler died between RUNNING and the call): dispatched again as the same execution, so
/// a job with no retries still runs once.
async fn a_call_that_never_arrived_is_sent_again_without_spending_a_retry(backend: Backend) {
    let rec = Recorder::start().await;
    let app = compensating_app(backend, &rec).await;
    app.create_job(&json!({"name": "lost-call", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?", "timeoutSeconds": 3600, "maxRetry": 0})).await;
    rec.set_status_answer(Some(
        json!({"status": "UNKNOWN", "startedAt": "2020-01-01T00:00:00Z"}),
    ));
    let trace = abandoned_row(&app, "lost-call", ExecutionStatus::Running, &rec.addr).await;
    let e = eventually(Duration::from_secs(10), "SUCCESS", || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        (e["status"] == "SUCCESS").then_some(e)
    })
    .await;
    assert_eq!(e["retryCount"], 0);
    let calls = rec.calls();
    assert_eq!(calls.len(), 1, "called once");
    assert_eq!(calls[0].trace_id(), trace);
    assert_eq!(app.executions("lost-call").await.len(), 1, "no retry row");
}

/// The executor restarted after the call: the run died with its process, so the row fails and
/// the retry policy runs it again.
async fn a_run_lost_to_an_executor_restart_is_retried(backend: Backend) {
    let rec = Recorder::start().await;
    let app = compensating_app(backend, &rec).await;
    app.create_job(&json!({"name": "restarted", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?", "timeoutSeconds": 3600, "maxRetry": 1})).await;
    rec.set_status_answer(Some(json!({"status": "UNKNOWN", "startedAt": Utc::now()})));
    let trace = abandoned_row(&app, "restarted", ExecutionStatus::Running, &rec.addr).await;
    let e = eventually(Duration::from_secs(10), "FAILED", || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        (e["status"] == "FAILED").then_some(e)
    })
    .await;
    assert!(
        e["errorMessage"].as_str().unwrap().contains("restarted"),
        "{e}"
    );
    let retry = eventually(Duration::from_secs(10), "the retry", || async {
        app.executions("restarted")
            .await
            .into_iter()
            .find(|r| r["parentTraceId"] == trace.as_str() && r["status"] == "SUCCESS")
    })
    .await;
    assert_eq!(retry["triggerType"], "COMPENSATION");
}

/// An instance on `db` whose service `svc` is `rec`, with compensation looking often (a lease
/// is 2 s) and no grace period on shutdown, and `tweak` on top. Instances of one test run one
/// after the other, as a scheduler and its replacement.
async fn instance_on(
    db: &Arc<TestDb>,
    rec: &Recorder,
    tweak: impl FnOnce(&mut jobflow::Settings),
) -> TestApp {
    let addr = vec![rec.addr.clone()];
    TestApp::spawn_with(db.clone(), move |s| {
        s.executors.static_ = static_executors("svc", &addr);
        s.compensation.pending_grace_seconds = 2;
        s.compensation.recovery_interval_millis = 200;
        s.server.shutdown_grace_seconds = 0;
        tweak(s);
    })
    .await
}

/// A job whose own params are `{"day": "monday"}`, triggered by hand with the run's own
/// `{"day": "friday"}`; the trace id of its single execution.
async fn trigger_on_friday(app: &TestApp, job: &serde_json::Value) -> String {
    let mut job = job.clone();
    job["jobParams"] = json!({"day": "monday"});
    app.create_job(&job).await;
    let name = job["name"].as_str().unwrap();
    let (status, rows) = app
        .post(
            &format!("/api/v1/jobs/{name}/trigger"),
            &json!({"jobParams": {"day": "friday"}}),
        )
        .await;
    assert_eq!(status, 200, "{rows}");
    rows[0]["traceId"].as_str().unwrap().to_string()
}

/// The first instance takes a manual trigger with its own params, and stops before calling
/// (its only call slot is busy); the second instance's compensation dispatches the PENDING
/// row once the lease ran out, and sends the trigger's params, not the job's.
async fn a_manual_runs_params_reach_the_executor_when_another_instance_dispatches_it(
    backend: Backend,
) {
    let rec = Recorder::slow_for("busy", Duration::from_secs(20)).await;
    let db = Arc::new(TestDb::create(backend).await);
    let first = instance_on(&db, &rec, |s| {
        s.executor.max_in_flight = 1.try_into().unwrap();
    })
    .await;
    first.create_job(&json!({"name": "blocker", "serviceName": "svc", "handler": "busy", "cron": "0 0 3 1 1 ?", "timeoutSeconds": 60, "maxRetry": 0})).await;
    let (status, _) = first.post("/api/v1/jobs/blocker/trigger", &json!({})).await;
    assert_eq!(status, 200);
    eventually(Duration::from_secs(10), "the call slot taken", || async {
        (rec.calls().len() == 1).then_some(())
    })
    .await;
    let trace = trigger_on_friday(
        &first,
        &json!({"name": "by-hand", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?"}),
    )
    .await;
    let store = first.store.clone();
    first.stop().await;
    let row = store.get_execution(&trace).await.unwrap().unwrap();
    assert_eq!(
        row.status,
        ExecutionStatus::Pending,
        "left for compensation"
    );
    assert!(rec.calls().iter().all(|c| c.trace_id() != trace));

    let second = instance_on(&db, &rec, |_| {}).await;
    second
        .execution_in(&trace, "SUCCESS", Duration::from_secs(20))
        .await;
    let calls: Vec<_> = rec
        .calls()
        .into_iter()
        .filter(|c| c.trace_id() == trace)
        .collect();
    assert_eq!(calls.len(), 1, "called once");
    assert_eq!(calls[0].body["jobParams"], json!({"day": "friday"}));
    assert_eq!(calls[0].header("x-retry-count"), "0");
}

/// A failed manual run with its own params: its automatic retry, dispatched by another
/// instance after the first stopped during the backoff, and an operator's retry of it both
/// send the run's params.
async fn retries_of_a_manual_run_keep_its_params_on_any_instance(backend: Backend) {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let rec = Recorder::with(move |_| {
        if counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            Reply::status(500, "first attempt fails")
        } else {
            Reply::ok()
        }
    })
    .await;
    let db = Arc::new(TestDb::create(backend).await);
    let first = instance_on(&db, &rec, |s| {
        // The retry is due well after the first instance stopped.
        s.scheduler.retry_backoff_millis = 6000u64.try_into().unwrap();
        s.scheduler.retry_backoff_max_millis = 6000u64.try_into().unwrap();
    })
    .await;
    let trace = trigger_on_friday(&first, &json!({"name": "by-hand", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?", "maxRetry": 1})).await;
    let retry = eventually(Duration::from_secs(10), "the retry row", || async {
        first
            .executions("by-hand")
            .await
            .into_iter()
            .find(|r| r["parentTraceId"] == trace.as_str())
    })
    .await;
    first.stop().await;
    assert_eq!(retry["status"], "PENDING", "{retry}");
    assert_eq!(retry["triggerType"], "RETRY");
    let retry = retry["traceId"].as_str().unwrap().to_string();

    let second = instance_on(&db, &rec, |_| {}).await;
    second
        .execution_in(&retry, "SUCCESS", Duration::from_secs(20))
        .await;
    let (status, rerun) = second
        .post(
            &format!("/api/v1/jobs/executions/{trace}/retry"),
            &json!({}),
        )
        .await;
    assert_eq!(status, 200, "{rerun}");
    let rerun = rerun["traceId"].as_str().unwrap().to_string();
    second
        .execution_in(&rerun, "SUCCESS", Duration::from_secs(10))
        .await;
    let sent: Vec<(String, String, serde_json::Value)> = rec
        .calls()
        .iter()
        .map(|c| {
            let retries = c.header("x-retry-count").to_string();
            (
                c.trace_id().to_string(),
                retries,
                c.body["jobParams"].clone(),
            )
        })
        .collect();
    let friday = json!({"day": "friday"});
    assert_eq!(
        sent,
        vec![
            (trace, "0".into(), friday.clone()),
            (retry, "1".into(), friday.clone()),
            (rerun, "1".into(), friday)
        ],
        "every attempt sends the run's params"
    );
}

/// An instance whose call is out pauses past its lease; another instance takes the row over
/// and calls it again (the same execution, which the executor runs once). When the paused
/// instance's call then gets no answer, it neither asks the executor to stop the execution
/// (that would stop the new holder's call) nor writes a verdict and a retry beside the new
/// holder's run: the row is the new holder's to answer for.
async fn an_attempt_whose_row_was_taken_over_leaves_it_to_its_new_holder(backend: Backend) {
    let rec = Recorder::with(|_| Reply::slow(Duration::from_secs(60))).await;
    let db = Arc::new(TestDb::create(backend).await);
    let addr = vec![rec.addr.clone()];
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &addr);
        // This instance's compensation stays out of it: the test plays the other instance.
        s.compensation.interval_seconds = 3600u64.try_into().unwrap();
    })
    .await;
    app.create_job(&json!({"name": "paused", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?", "timeoutSeconds": 1, "maxRetry": 1})).await;
    let (status, rows) = app.post("/api/v1/jobs/paused/trigger", &json!({})).await;
    assert_eq!(status, 200, "{rows}");
    let trace = rows[0]["traceId"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(10), "the call", || async {
        (!rec.calls().is_empty()).then_some(())
    })
    .await;
    let other = "10.9.9.9:8080";
    let taken = Utc::now().trunc_subsecs(3);
    let take_over = Transition {
        hand_to: Some((other.into(), taken)),
        executor_instance: Some(rec.addr.clone()),
        start_time: Some(taken),
        ..Transition::to(&[ExecutionStatus::Running], ExecutionStatus::Running)
    };
    assert!(
        app.store
            .transition(&trace, &take_over)
            .await
            .unwrap()
            .applied()
    );
    // What must not happen can only be looked for after it would have: the call's answer
    // is given up on at the timeout + 5 s; a stop, a verdict and a retry follow within
    // milliseconds.
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(rec.cancels(), Vec::<String>::new(), "no stop asked");
    let row = app.store.get_execution(&trace).await.unwrap().unwrap();
    assert_eq!(
        (row.status, row.scheduler_instance.as_deref(), row.due_time),
        (ExecutionStatus::Running, Some(other), taken)
    );
    assert_eq!(app.executions("paused").await.len(), 1, "no retry row");
    assert_eq!(rec.calls().len(), 1, "called once");
}
