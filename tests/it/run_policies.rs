//! The job's run policies on the fire path, with real executors (recorders): routing,
//! overlap SKIP and COVER across two instances on one database, for cron fires, manual
//! triggers and child triggers, child jobs triggered once across two instances, a manual
//! trigger's body, and alerts raised by the dispatcher.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{
    Backend, Inbox, TestApp, TestDb, backend_tests, eventually, params_of_len, problem_fields,
    static_executors,
};
use crate::recorder::{Recorder, Reply};

backend_tests!(
    a_broadcast_job_runs_whole_on_every_executor_and_its_children_once_after_all,
    round_robin_spreads_unsharded_fires_over_the_executors,
    first_hash_random_and_least_busy_route_as_documented,
    a_sharded_jobs_ranges_stay_on_their_executors_whatever_the_route,
    overlap_skip_records_the_fire_uncalled_across_instances,
    overlap_cover_cancels_the_running_execution_then_runs,
    a_manual_trigger_of_a_skip_job_that_still_runs_is_recorded_skipped,
    a_manual_trigger_of_a_cover_job_cancels_the_running_run_then_runs,
    simultaneous_triggers_of_a_skip_job_on_two_instances_run_once,
    simultaneous_triggers_of_a_cover_job_on_two_instances_leave_one_running,
    a_child_trigger_of_a_skip_job_that_still_runs_is_recorded_skipped,
    child_jobs_run_once_after_every_range_succeeded,
    children_that_find_no_executor_or_run_on_every_executor_are_written_with_their_parent,
    every_run_of_a_parent_triggers_its_children_even_within_one_second,
    an_operator_rerun_that_completes_a_fire_triggers_its_children,
    a_trigger_body_sets_params_and_executor,
    failure_recovery_and_no_executor_raise_their_alerts
);

async fn pair(backend: Backend, executors: Vec<String>) -> (TestApp, TestApp) {
    let db = Arc::new(TestDb::create(backend).await);
    let e = executors.clone();
    let a = TestApp::spawn_with(db.clone(), move |s| {
        s.executors.static_ = static_executors("svc", &e);
    })
    .await;
    let b = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &executors);
    })
    .await;
    (a, b)
}

/// `n` manual triggers of `job` sent at once, alternately to `a` and `b`; every row answered.
async fn triggers_at_once(a: &TestApp, b: &TestApp, job: &str, n: usize) -> Vec<Value> {
    let sent = (0..n).map(|i| trigger(if i % 2 == 0 { a } else { b }, job, None));
    futures::future::join_all(sent)
        .await
        .into_iter()
        .flatten()
        .collect()
}

async fn trigger(app: &TestApp, job: &str, body: Option<Value>) -> Vec<Value> {
    let (status, rows) = app
        .post(
            &format!("/api/v1/jobs/{job}/trigger"),
            &body.unwrap_or(json!({})),
        )
        .await;
    assert_eq!(status, 200, "{rows}");
    rows.as_array().unwrap().clone()
}

async fn round_robin_spreads_unsharded_fires_over_the_executors(backend: Backend) {
    let (r1, r2) = (Recorder::start().await, Recorder::start().await);
    let db = Arc::new(TestDb::create(backend).await);
    let addrs = vec![r1.addr.clone(), r2.addr.clone()];
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &addrs);
    })
    .await;
    app.create_job(
        &json!({"name": "spread", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?"}),
    )
    .await;
    for _ in 0..4 {
        trigger(&app, "spread", None).await;
    }
    eventually(Duration::from_secs(10), "four calls", || async {
        (r1.calls().len() + r2.calls().len() == 4).then_some(())
    })
    .await;
    assert_eq!(
        (r1.calls().len(), r2.calls().len()),
        (2, 2),
        "ROUND_ROBIN alternates"
    );
}

/// Stable range placement: range `i` of a sharded job goes to executor `i` of the sorted list
/// on every fire, under every routing strategy (the default ROUND_ROBIN rotated it before).
async fn a_sharded_jobs_ranges_stay_on_their_executors_whatever_the_route(backend: Backend) {
    let recorders = [
        Recorder::start().await,
        Recorder::start().await,
        Recorder::start().await,
    ];
    let addrs: Vec<String> = recorders.iter().map(|r| r.addr.clone()).collect();
    let db = Arc::new(TestDb::create(backend).await);
    let list = addrs.clone();
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &list);
    })
    .await;
    let mut sorted = addrs.clone();
    sorted.sort();
    let strategies = [
        "ROUND_ROBIN",
        "RANDOM",
        "LEAST_BUSY",
        "CONSISTENT_HASH",
        "FIRST",
    ];
    for strategy in strategies {
        let name = format!("placed-{}", strategy.to_lowercase().replace('_', "-"));
        app.create_job(&json!({"name": name, "serviceName": "svc", "handler": "h",
            "cron": "0 0 3 1 1 ?", "shardCount": 9, "routeStrategy": strategy}))
            .await;
        for _ in 0..4 {
            trigger(&app, &name, None).await;
        }
    }
    eventually(Duration::from_secs(10), "every range called", || async {
        let calls: usize = recorders.iter().map(|r| r.calls().len()).sum();
        (calls == strategies.len() * 4 * 3).then_some(())
    })
    .await;
    // 9 shards over 3 executors: 0-2, 3-5, 6-8, range i on executor i of the sorted list.
    for r in &recorders {
        let i = sorted.iter().position(|a| *a == r.addr).unwrap();
        let starts: Vec<String> = r
            .calls()
            .iter()
            .map(|c| c.header("x-shard-start").to_string())
            .collect();
        assert_eq!(starts.len(), strategies.len() * 4, "{}: {starts:?}", r.addr);
        assert!(
            starts.iter().all(|s| *s == (i * 3).to_string()),
            "executor {i} ({}) got ranges starting at {starts:?}",
            r.addr
        );
    }
}

/// FIRST: the executor sorting first; CONSISTENT_HASH: one executor for every fire of a job;
/// RANDOM: both, over enough fires; LEAST_BUSY: away from an executor that holds this
/// instance's calls in flight.
async fn first_hash_random_and_least_busy_route_as_documented(backend: Backend) {
    let (r1, r2) = (
        Recorder::slow_for("hold", Duration::from_secs(30)).await,
        Recorder::slow_for("hold", Duration::from_secs(30)).await,
    );
    let db = Arc::new(TestDb::create(backend).await);
    let addrs = vec![r1.addr.clone(), r2.addr.clone()];
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &addrs);
    })
    .await;
    let (first, second) = if r1.addr < r2.addr {
        (&r1, &r2)
    } else {
        (&r2, &r1)
    };
    let job = |name: &str, handler: &str, strategy: &str| {
        json!({"name": name, "serviceName": "svc", "handler": handler, "cron": "0 0 3 1 1 ?",
            "routeStrategy": strategy})
    };
    // Calls of `name` per executor, once `n` arrived.
    let calls_of = |name: &'static str, n: usize| async move {
        let count = |r: &Recorder| {
            r.calls()
                .iter()
                .filter(|c| c.header("x-job-name") == name)
                .count()
        };
        eventually(Duration::from_secs(10), name, || async {
            (count(first) + count(second) == n).then_some(())
        })
        .await;
        (count(first), count(second))
    };

    app.create_job(&job("first", "h", "FIRST")).await;
    for _ in 0..3 {
        trigger(&app, "first", None).await;
    }
    assert_eq!(
        calls_of("first", 3).await,
        (3, 0),
        "FIRST: the first by ip:port"
    );

    app.create_job(&job("sticky", "h", "CONSISTENT_HASH")).await;
    for _ in 0..4 {
        trigger(&app, "sticky", None).await;
    }
    let (a, b) = calls_of("sticky", 4).await;
    assert!(
        (a, b) == (4, 0) || (a, b) == (0, 4),
        "CONSISTENT_HASH: {a}/{b}"
    );

    app.create_job(&job("dice", "h", "RANDOM")).await;
    for _ in 0..24 {
        trigger(&app, "dice", None).await;
    }
    let (a, b) = calls_of("dice", 24).await;
    assert!(a > 0 && b > 0, "RANDOM over 24 fires: {a}/{b}");

    // Four calls held on the first executor (FIRST, an answer after 30 s) ...
    app.create_job(&job("hog", "hold", "FIRST")).await;
    for _ in 0..4 {
        trigger(&app, "hog", None).await;
    }
    assert_eq!(calls_of("hog", 4).await, (4, 0));
    // ... so every fire of a LEAST_BUSY job goes to the second, whatever its rotation: even
    // with the job's own earlier calls still in flight there (at most two), the second is
    // the less busy.
    app.create_job(&job("idle-seeker", "h", "LEAST_BUSY")).await;
    for _ in 0..3 {
        trigger(&app, "idle-seeker", None).await;
    }
    assert_eq!(calls_of("idle-seeker", 3).await, (0, 3), "LEAST_BUSY");
}

/// Instance `a` owns nothing of the job's schedule here: both instances fire it through the
/// trigger of a cron job at the next second; the SKIP decision reads the database.
async fn overlap_skip_records_the_fire_uncalled_across_instances(backend: Backend) {
    let slow = Recorder::with(|_| Reply::slow(Duration::from_secs(4))).await;
    let (a, b) = pair(backend, vec![slow.addr.clone()]).await;
    a.create_job(
        &json!({"name": "single", "serviceName": "svc", "handler": "h",
        "cron": "* * * * * ?", "overlapPolicy": "SKIP", "timeoutSeconds": 30, "maxRetry": 0}),
    )
    .await;
    let rows = eventually(
        Duration::from_secs(10),
        "a fire recorded SKIPPED",
        || async {
            let rows = b.executions("single").await;
            rows.iter()
                .any(|r| r["status"] == "SKIPPED")
                .then_some(rows)
        },
    )
    .await;
    let skipped = rows.iter().find(|r| r["status"] == "SKIPPED").unwrap();
    assert!(
        skipped["errorMessage"]
            .as_str()
            .unwrap()
            .contains("overlapPolicy SKIP"),
        "{skipped}"
    );
    let calls = slow.calls();
    assert!(
        calls
            .iter()
            .all(|c| c.trace_id() != skipped["traceId"].as_str().unwrap()),
        "a SKIPPED fire is not called"
    );
    // While the first run lasts, no second call starts.
    let first = calls[0].received_at;
    assert!(
        calls
            .iter()
            .skip(1)
            .all(|c| c.received_at - first >= chrono::Duration::seconds(3))
    );
}

async fn overlap_cover_cancels_the_running_execution_then_runs(backend: Backend) {
    let slow = Recorder::with(|_| Reply::slow(Duration::from_secs(30))).await;
    let (a, b) = pair(backend, vec![slow.addr.clone()]).await;
    a.create_job(
        &json!({"name": "newest", "serviceName": "svc", "handler": "h",
        "cron": "* * * * * ?", "overlapPolicy": "COVER", "timeoutSeconds": 60, "maxRetry": 0}),
    )
    .await;
    let rows = eventually(Duration::from_secs(15), "a covered execution", || async {
        let rows = b.executions("newest").await;
        rows.iter()
            .any(|r| r["status"] == "CANCELLED")
            .then_some(rows)
    })
    .await;
    let cancelled = rows.iter().find(|r| r["status"] == "CANCELLED").unwrap();
    assert!(
        cancelled["errorMessage"]
            .as_str()
            .unwrap()
            .contains("overlapPolicy COVER"),
        "{cancelled}"
    );
    // The row is CANCELLED before the executor is asked to stop it.
    let trace = cancelled["traceId"].as_str().unwrap().to_string();
    eventually(
        Duration::from_secs(5),
        "the cancel at the executor",
        || async { slow.cancels().contains(&trace).then_some(()) },
    )
    .await;
    a.patch("/api/v1/jobs/newest/enabled?enabled=false").await;
}

fn traces(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| r["traceId"].as_str().unwrap().to_string())
        .collect()
}

/// A manual trigger is held to SKIP like a cron fire: while the job runs (on the other
/// instance), the trigger answers its rows SKIPPED and calls nothing; once the run ended, the
/// next trigger runs.
async fn a_manual_trigger_of_a_skip_job_that_still_runs_is_recorded_skipped(backend: Backend) {
    let (r1, r2) = (
        Recorder::with(|_| Reply::slow(Duration::from_secs(4))).await,
        Recorder::with(|_| Reply::slow(Duration::from_secs(4))).await,
    );
    let (a, b) = pair(backend, vec![r1.addr.clone(), r2.addr.clone()]).await;
    a.create_job(
        &json!({"name": "non-reentrant", "serviceName": "svc", "handler": "h",
        "cron": "0 0 3 1 1 ?", "shardCount": 2, "overlapPolicy": "SKIP",
        "timeoutSeconds": 30, "maxRetry": 0}),
    )
    .await;
    let running = trigger(&a, "non-reentrant", None).await;
    eventually(Duration::from_secs(10), "both ranges called", || async {
        (r1.calls().len() + r2.calls().len() == 2).then_some(())
    })
    .await;
    let body = json!({"jobParams": {"again": true}});
    let skipped = trigger(&b, "non-reentrant", Some(body)).await;
    assert_eq!(skipped.len(), 2, "one row per range: {skipped:?}");
    for row in &skipped {
        assert_eq!(row["status"], "SKIPPED", "{row}");
        assert_eq!(row["triggerType"], "MANUAL", "{row}");
        let why = row["errorMessage"].as_str().unwrap();
        assert!(why.contains("overlapPolicy SKIP"), "{why}");
        for t in traces(&running) {
            assert!(why.contains(&t), "names the running {t}: {why}");
        }
    }
    // The running run ends on its own; nothing else was called meanwhile.
    for t in traces(&running) {
        a.execution_in(&t, "SUCCESS", Duration::from_secs(15)).await;
    }
    for t in traces(&skipped) {
        b.execution_in(&t, "SKIPPED", Duration::ZERO).await;
    }
    assert_eq!(
        r1.calls().len() + r2.calls().len(),
        2,
        "the SKIPPED rows were not called"
    );
    let called: Vec<String> = r1
        .calls()
        .iter()
        .chain(&r2.calls())
        .map(|c| c.trace_id().to_string())
        .collect();
    assert!(traces(&skipped).iter().all(|t| !called.contains(t)));
    // Nothing runs any more: the next trigger runs.
    let next = trigger(&b, "non-reentrant", None).await;
    assert!(next.iter().all(|r| r["status"] == "PENDING"), "{next:?}");
    eventually(Duration::from_secs(10), "the next run's calls", || async {
        (r1.calls().len() + r2.calls().len() == 4).then_some(())
    })
    .await;
}

/// A manual trigger of a COVER job cancels the running execution (the executor is asked to
/// stop it) before it answers, then runs.
async fn a_manual_trigger_of_a_cover_job_cancels_the_running_run_then_runs(backend: Backend) {
    let slow = Recorder::with(|_| Reply::slow(Duration::from_secs(30))).await;
    let (a, b) = pair(backend, vec![slow.addr.clone()]).await;
    a.create_job(
        &json!({"name": "latest-wins", "serviceName": "svc", "handler": "h",
        "cron": "0 0 3 1 1 ?", "overlapPolicy": "COVER", "timeoutSeconds": 60, "maxRetry": 0}),
    )
    .await;
    let first = trigger(&a, "latest-wins", None).await;
    let first = first[0]["traceId"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(10), "the first call", || async {
        (slow.calls().len() == 1).then_some(())
    })
    .await;
    let second = trigger(&b, "latest-wins", None).await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0]["status"], "PENDING", "{}", second[0]);
    assert_eq!(second[0]["triggerType"], "MANUAL");
    // Cancelled before the trigger answered; asked to stop right after, in the background.
    let covered = b.execution_in(&first, "CANCELLED", Duration::ZERO).await;
    assert!(
        covered["errorMessage"]
            .as_str()
            .unwrap()
            .contains("overlapPolicy COVER"),
        "{covered}"
    );
    // Asked to stop that one only. Twice when the cancel refused the first attempt's deferred
    // RUNNING on `a`: that attempt then asks as well, in case the canceller could not reach it.
    let asked = eventually(Duration::from_secs(10), "the stop request", || async {
        let mut asked = slow.cancels();
        asked.dedup();
        (!asked.is_empty()).then_some(asked)
    })
    .await;
    assert_eq!(asked, vec![first.clone()]);
    let second = second[0]["traceId"].as_str().unwrap().to_string();
    let call = eventually(Duration::from_secs(10), "the second call", || async {
        slow.calls().get(1).cloned()
    })
    .await;
    assert_eq!(call.trace_id(), second);
    assert_eq!(slow.calls().len(), 2);
    a.execution_in(&second, "RUNNING", Duration::from_secs(5))
        .await;
}

/// Ten triggers of a SKIP job sent at once to two instances: the overlap is judged under a
/// lock on the job's row, so exactly one is recorded to run and the nine others are recorded
/// SKIPPED, each naming a run recorded before it; the executor is called once. The run lasts
/// 8 s, far longer than recording ten triggers takes even on a loaded machine.
async fn simultaneous_triggers_of_a_skip_job_on_two_instances_run_once(backend: Backend) {
    let slow = Recorder::with(|_| Reply::slow(Duration::from_secs(8))).await;
    let (a, b) = pair(backend, vec![slow.addr.clone()]).await;
    a.create_job(
        &json!({"name": "exclusive", "serviceName": "svc", "handler": "h",
        "cron": "0 0 3 1 1 ?", "overlapPolicy": "SKIP", "timeoutSeconds": 30, "maxRetry": 0}),
    )
    .await;
    let rows = triggers_at_once(&a, &b, "exclusive", 10).await;
    assert_eq!(rows.len(), 10, "{rows:?}");
    let (ran, skipped): (Vec<&Value>, Vec<&Value>) =
        rows.iter().partition(|r| r["status"] != "SKIPPED");
    assert_eq!(ran.len(), 1, "exactly one runs: {rows:?}");
    let winner = ran[0]["traceId"].as_str().unwrap().to_string();
    for row in &skipped {
        let why = row["errorMessage"].as_str().unwrap();
        assert!(why.contains(&winner), "{why}");
    }
    a.execution_in(&winner, "SUCCESS", Duration::from_secs(15))
        .await;
    let called: Vec<String> = slow
        .calls()
        .iter()
        .map(|c| c.trace_id().to_string())
        .collect();
    assert_eq!(called, vec![winner]);
}

/// Six triggers of a COVER job sent at once to two instances: each recorded fire cancels
/// those recorded before it, so one execution is left running and five end CANCELLED.
async fn simultaneous_triggers_of_a_cover_job_on_two_instances_leave_one_running(backend: Backend) {
    let slow = Recorder::with(|_| Reply::slow(Duration::from_secs(30))).await;
    let (a, b) = pair(backend, vec![slow.addr.clone()]).await;
    a.create_job(
        &json!({"name": "freshest", "serviceName": "svc", "handler": "h",
        "cron": "0 0 3 1 1 ?", "overlapPolicy": "COVER", "timeoutSeconds": 60, "maxRetry": 0}),
    )
    .await;
    let rows = triggers_at_once(&a, &b, "freshest", 6).await;
    assert_eq!(rows.len(), 6, "{rows:?}");
    eventually(
        Duration::from_secs(15),
        "one RUNNING and five CANCELLED",
        || async {
            let mut statuses: Vec<String> = a
                .executions("freshest")
                .await
                .iter()
                .map(|r| r["status"].as_str().unwrap().to_string())
                .collect();
            statuses.sort();
            let want = [
                "CANCELLED",
                "CANCELLED",
                "CANCELLED",
                "CANCELLED",
                "CANCELLED",
                "RUNNING",
            ];
            (statuses == want).then_some(statuses)
        },
    )
    .await;
    a.patch("/api/v1/jobs/freshest/enabled?enabled=false").await;
}

/// A child job with SKIP that still runs: the parent's success records the child's trigger
/// SKIPPED (trigger type CHILD) and does not call it.
async fn a_child_trigger_of_a_skip_job_that_still_runs_is_recorded_skipped(backend: Backend) {
    let rec = Recorder::slow_for("slow-child", Duration::from_secs(30)).await;
    let (a, b) = pair(backend, vec![rec.addr.clone()]).await;
    a.create_job(
        &json!({"name": "report", "serviceName": "svc", "handler": "slow-child",
        "cron": "0 0 3 1 1 ?", "overlapPolicy": "SKIP", "timeoutSeconds": 60, "maxRetry": 0}),
    )
    .await;
    a.create_job(
        &json!({"name": "import", "serviceName": "svc", "handler": "p", "cron": "0 0 3 1 1 ?",
        "childJobs": ["report"]}),
    )
    .await;
    let running = trigger(&a, "report", None).await;
    let running = running[0]["traceId"].as_str().unwrap().to_string();
    eventually(
        Duration::from_secs(10),
        "the child's own run called",
        || async { (rec.calls().len() == 1).then_some(()) },
    )
    .await;
    let parent = trigger(&b, "import", None).await;
    let parent = parent[0]["traceId"].as_str().unwrap().to_string();
    // The parent's SUCCESS writes the child's row PENDING; its admission then judges it.
    let child = eventually(
        Duration::from_secs(10),
        "the child trigger judged",
        || async {
            a.executions("report")
                .await
                .into_iter()
                .find(|r| r["triggerType"] == "CHILD" && r["status"] != "PENDING")
        },
    )
    .await;
    assert_eq!(child["status"], "SKIPPED", "{child}");
    assert_eq!(child["parentTraceId"], parent.as_str());
    let why = child["errorMessage"].as_str().unwrap();
    assert!(
        why.contains("overlapPolicy SKIP") && why.contains(&running),
        "{why}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let calls: Vec<String> = rec.calls().iter().map(|c| c.handler.clone()).collect();
    assert_eq!(
        calls,
        vec!["slow-child", "p"],
        "the SKIPPED child is not called"
    );
    assert_eq!(a.executions("report").await.len(), 2);
}

/// Job `child`, and job `parent` in two shards with `child` as its child job, with `extra`
/// fields.
async fn parent_with_child(app: &TestApp, extra: Value) {
    app.create_job(
        &json!({"name": "child", "serviceName": "svc", "handler": "c", "cron": "0 0 3 1 1 ?"}),
    )
    .await;
    let mut parent = json!({"name": "parent", "serviceName": "svc", "handler": "p",
        "cron": "0 0 3 1 1 ?", "shardCount": 2, "childJobs": ["child"]});
    for (k, v) in extra.as_object().unwrap() {
        parent[k] = v.clone();
    }
    app.create_job(&parent).await;
}

async fn child_jobs_run_once_after_every_range_succeeded(backend: Backend) {
    let (r1, r2) = (Recorder::start().await, Recorder::start().await);
    let (a, b) = pair(backend, vec![r1.addr.clone(), r2.addr.clone()]).await;
    parent_with_child(&a, json!({})).await;
    let parents = trigger(&b, "parent", None).await;
    assert_eq!(parents.len(), 2, "two ranges");
    let child = eventually(Duration::from_secs(10), "the child run", || async {
        let rows = a.executions("child").await;
        (rows.len() == 1 && rows[0]["status"] == "SUCCESS").then(|| rows[0].clone())
    })
    .await;
    assert_eq!(child["triggerType"], "CHILD");
    let parent_traces: Vec<&str> = parents
        .iter()
        .map(|p| p["traceId"].as_str().unwrap())
        .collect();
    assert!(parent_traces.contains(&child["parentTraceId"].as_str().unwrap()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(a.executions("child").await.len(), 1, "triggered once");
}

/// A fire is named by its execution ids, not by its second: three runs of a sharded parent
/// triggered at once (one fire time, to the second) are three fires, each of whose two ranges
/// must succeed, and each triggers the child once.
async fn every_run_of_a_parent_triggers_its_children_even_within_one_second(backend: Backend) {
    let (r1, r2) = (Recorder::start().await, Recorder::start().await);
    let (a, b) = pair(backend, vec![r1.addr.clone(), r2.addr.clone()]).await;
    parent_with_child(&a, json!({})).await;
    let runs: Vec<Vec<Value>> = futures::future::join_all(
        (0..3).map(|i| trigger(if i == 1 { &b } else { &a }, "parent", None)),
    )
    .await;
    let children = eventually(Duration::from_secs(15), "three child runs", || async {
        let rows = a.executions("child").await;
        (rows.len() == 3 && rows.iter().all(|r| r["status"] == "SUCCESS")).then_some(rows)
    })
    .await;
    // One child per parent run: each names a range of a different run.
    let mut runs_named: Vec<usize> = children
        .iter()
        .map(|c| {
            let parent = c["parentTraceId"].as_str().unwrap();
            runs.iter()
                .position(|run| traces(run).iter().any(|t| t == parent))
                .unwrap_or_else(|| panic!("{parent} is no parent run's range"))
        })
        .collect();
    runs_named.sort();
    assert_eq!(runs_named, vec![0, 1, 2]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        a.executions("child").await.len(),
        3,
        "triggered once per run"
    );
}

/// A range that failed with no retries left leaves its fire unfinished: no child. The
/// operator's re-run of that range belongs to the same fire; its success completes the fire
/// and triggers the child, once.
async fn an_operator_rerun_that_completes_a_fire_triggers_its_children(backend: Backend) {
    // Range 1-1 fails its first call, wherever it runs.
    let failed_once = Arc::new(AtomicBool::new(false));
    let flaky = || {
        let failed_once = failed_once.clone();
        move |call: &crate::recorder::RecordedCall| {
            if call.range() == (1, 1) && !failed_once.swap(true, Ordering::SeqCst) {
                Reply::status(500, "disk full")
            } else {
                Reply::ok()
            }
        }
    };
    let (r1, r2) = (Recorder::with(flaky()).await, Recorder::with(flaky()).await);
    let (a, b) = pair(backend, vec![r1.addr.clone(), r2.addr.clone()]).await;
    parent_with_child(&a, json!({"maxRetry": 0})).await;
    let rows = trigger(&a, "parent", None).await;
    let range = |r: &Value| {
        (
            r["shardStart"].as_u64().unwrap(),
            r["shardEnd"].as_u64().unwrap(),
        )
    };
    let (ok, failing): (Vec<&Value>, Vec<&Value>) = rows.iter().partition(|r| range(r) == (0, 0));
    let ok = ok[0]["traceId"].as_str().unwrap();
    let failing = failing[0]["traceId"].as_str().unwrap();
    a.execution_in(ok, "SUCCESS", Duration::from_secs(10)).await;
    a.execution_in(failing, "FAILED", Duration::from_secs(10))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        a.executions("child").await.is_empty(),
        "half a fire triggers nothing"
    );

    // The re-run, on the other instance.
    let (status, rerun) = b
        .post(
            &format!("/api/v1/jobs/executions/{failing}/retry"),
            &json!({}),
        )
        .await;
    assert_eq!(status, 200, "{rerun}");
    let rerun = rerun["traceId"].as_str().unwrap().to_string();
    b.execution_in(&rerun, "SUCCESS", Duration::from_secs(10))
        .await;
    let child = eventually(Duration::from_secs(10), "the child run", || async {
        let rows = a.executions("child").await;
        (rows.len() == 1).then(|| rows[0].clone())
    })
    .await;
    assert_eq!(child["triggerType"], "CHILD");
    assert_eq!(child["parentTraceId"], rerun.as_str());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(a.executions("child").await.len(), 1, "triggered once");
}

async fn a_trigger_body_sets_params_and_executor(backend: Backend) {
    let (r1, r2) = (Recorder::start().await, Recorder::start().await);
    let db = Arc::new(TestDb::create(backend).await);
    let addrs = vec![r1.addr.clone(), r2.addr.clone()];
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &addrs);
    })
    .await;
    app.create_job(
        &json!({"name": "by-hand", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?",
        "shardCount": 4, "jobParams": {"day": "monday"}}),
    )
    .await;
    let rows = trigger(
        &app,
        "by-hand",
        Some(json!({"jobParams": {"day": "friday"}, "executor": r2.addr})),
    )
    .await;
    assert_eq!(rows.len(), 1, "one range: one executor chosen");
    assert_eq!(
        rows[0]["jobParams"],
        json!({"day": "friday"}),
        "the run says what it sends"
    );
    let call = eventually(Duration::from_secs(10), "the call", || async {
        r2.calls().first().cloned()
    })
    .await;
    assert_eq!(call.body["jobParams"], json!({"day": "friday"}));
    let trace = rows[0]["traceId"].as_str().unwrap();
    let (status, shown) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["jobParams"], json!({"day": "friday"}));
    assert_eq!(call.range(), (0, 3));
    assert!(r1.calls().is_empty());
    let (status, problem) = app
        .post(
            "/api/v1/jobs/by-hand/trigger",
            &json!({"executor": "127.0.0.1:1"}),
        )
        .await;
    assert_eq!(status, 409, "{problem}");
    let (status, problem) = app
        .post(
            "/api/v1/jobs/by-hand/trigger",
            &json!({"executor": "not an address"}),
        )
        .await;
    assert_eq!(status, 400, "{problem}");
    assert!(problem.to_string().contains("executor"), "{problem}");
    // The run's params are stored on its rows: they must fit the column, as a job's.
    let (status, problem) = app
        .post(
            "/api/v1/jobs/by-hand/trigger",
            &json!({"jobParams": params_of_len(65_536)}),
        )
        .await;
    assert_eq!(status, 400, "{problem}");
    assert_eq!(problem_fields(&problem), vec!["jobParams"]);
    let rows = trigger(
        &app,
        "by-hand",
        Some(json!({"jobParams": params_of_len(65_535)})),
    )
    .await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    // Without a body the run sends the job's own params and says so with null.
    let rows = trigger(&app, "by-hand", None).await;
    assert!(rows.iter().all(|r| r["jobParams"].is_null()), "{rows:?}");
}

/// The dispatcher's alerts, end to end on a webhook: the final failure, the first success
/// after it (RECOVERED), and a fire with no executor.
async fn failure_recovery_and_no_executor_raise_their_alerts(backend: Backend) {
    let healthy = Arc::new(AtomicBool::new(false));
    let flag = healthy.clone();
    let failing = Recorder::with(move |_| {
        if flag.load(Ordering::SeqCst) {
            Reply::ok()
        } else {
            Reply::status(500, "broken")
        }
    })
    .await;
    let (inbox, hook) = Inbox::start().await;
    let db = Arc::new(TestDb::create(backend).await);
    let addr = vec![failing.addr.clone()];
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &addr);
        Inbox::channel(&hook, s);
    })
    .await;
    app.create_job(&json!({"name": "breaks", "serviceName": "svc", "handler": "h", "cron": "0 0 3 1 1 ?", "maxRetry": 1}))
        .await;
    let within = Duration::from_secs(15);
    trigger(&app, "breaks", None).await;
    let failed = inbox.wait_for("EXECUTION_FAILED", within).await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["jobName"], "breaks");
    assert_eq!(failed[0]["retryCount"], 1, "only after the last retry");
    assert_eq!(failed[0]["status"], "FAILED");

    healthy.store(true, Ordering::SeqCst);
    trigger(&app, "breaks", None).await;
    let recovered = inbox.wait_for("RECOVERED", within).await;
    assert_eq!(recovered[0]["jobName"], "breaks");
    assert_eq!(recovered[0]["status"], "SUCCESS");
    // Another success after the recovery is no news.
    let again = trigger(&app, "breaks", None).await;
    let trace = again[0]["traceId"].as_str().unwrap().to_string();
    eventually(within, "the second success", || async {
        let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
        (e["status"] == "SUCCESS").then_some(())
    })
    .await;

    app.create_job(
        &json!({"name": "orphan", "serviceName": "nobody-home", "handler": "h",
        "cron": "0 0 3 1 1 ?", "maxRetry": 0}),
    )
    .await;
    trigger(&app, "orphan", None).await;
    let no_executor = inbox.wait_for("NO_EXECUTOR", within).await;
    assert_eq!(no_executor.len(), 1, "{no_executor:?}");
    assert_eq!(no_executor[0]["jobName"], "orphan");
    // Its final failure alerts too (no retry left); by then every alert before it was sent.
    eventually(within, "the orphan's failure", || {
        let failed = inbox.of("EXECUTION_FAILED");
        std::future::ready(
            failed
                .iter()
                .any(|a| a["jobName"] == "orphan")
                .then_some(()),
        )
    })
    .await;
    let recovered = inbox.of("RECOVERED");
    assert_eq!(
        recovered.len(),
        1,
        "one recovery, not one per success: {recovered:?}"
    );
}

/// `BROADCAST`: a fire of a job with 4 shards reaches each of three executors once,
/// each call over every shard (0-3), one row per executor named by its address; the child
/// is triggered once, after the last executor's SUCCESS. A name too long for the ids is
/// refused, naming `routeStrategy`.
async fn a_broadcast_job_runs_whole_on_every_executor_and_its_children_once_after_all(
    backend: Backend,
) {
    let recorders = [
        Recorder::start().await,
        Recorder::slow_for("p", Duration::from_millis(300)).await,
        Recorder::start().await,
    ];
    let addrs: Vec<String> = recorders.iter().map(|r| r.addr.clone()).collect();
    let (a, _b) = pair(backend, addrs.clone()).await;
    parent_with_child(&a, json!({"routeStrategy": "BROADCAST", "shardCount": 4})).await;
    let rows = trigger(&a, "parent", None).await;
    assert_eq!(rows.len(), 3, "one row per executor: {rows:?}");
    let mut named: Vec<String> = rows
        .iter()
        .map(|r| r["executorInstance"].as_str().unwrap().to_string())
        .collect();
    named.sort();
    let mut sorted = addrs.clone();
    sorted.sort();
    assert_eq!(named, sorted);
    for r in &rows {
        let id = r["executionId"].as_str().unwrap();
        assert!(
            id.ends_with(&format!("@{}", r["executorInstance"].as_str().unwrap())),
            "{id}"
        );
        assert_eq!((&r["shardStart"], &r["shardEnd"]), (&json!(0), &json!(3)));
    }
    let child = eventually(Duration::from_secs(10), "the child run", || async {
        let rows = a.executions("child").await;
        (rows.len() == 1 && rows[0]["status"] == "SUCCESS").then(|| rows[0].clone())
    })
    .await;
    for r in &recorders {
        let calls: Vec<_> = r.calls().into_iter().filter(|c| c.handler == "p").collect();
        assert_eq!(calls.len(), 1, "{}", r.addr);
        assert_eq!(calls[0].range(), (0, 3));
        assert_eq!(calls[0].header("x-shard-count"), "4");
    }
    // The child came after every executor's SUCCESS, the slow one's too.
    let parents = a.executions("parent").await;
    assert!(
        parents.iter().all(|p| p["status"] == "SUCCESS"),
        "{parents:?}"
    );
    let last_success = parents
        .iter()
        .map(|p| p["finishTime"].as_str().unwrap().to_string())
        .max()
        .unwrap();
    assert!(
        child["triggerTime"].as_str().unwrap() >= last_success.as_str(),
        "{child}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(a.executions("child").await.len(), 1, "triggered once");
    let (status, problem) = a
        .post(
            "/api/v1/jobs",
            &json!({"name": "b".repeat(71), "serviceName": "svc", "handler": "p",
                "cron": "0 0 3 1 1 ?", "routeStrategy": "BROADCAST"}),
        )
        .await;
    assert_eq!(status, 400, "{problem}");
    assert_eq!(crate::helpers::problem_fields(&problem), ["routeStrategy"]);
}

/// A SUCCESS that completes its fire is written with its children's rows. A child that finds
/// no executor is recorded FAILED with its retry, and a broadcast child has a row per
/// executor: each has an id of its own (the campaign found a parent whose child found no
/// executor never written, its child rows sharing one id, and its batch retried forever).
async fn children_that_find_no_executor_or_run_on_every_executor_are_written_with_their_parent(
    backend: Backend,
) {
    let (r1, r2) = (Recorder::start().await, Recorder::start().await);
    let db = Arc::new(TestDb::create(backend).await);
    let executors = vec![r1.addr.clone(), r2.addr.clone()];
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("svc", &executors);
    })
    .await;
    app.create_job(
        &json!({"name": "lost-child", "serviceName": "nowhere", "handler": "c",
        "cron": "0 0 3 1 1 ?", "maxRetry": 1}),
    )
    .await;
    app.create_job(
        &json!({"name": "fan-out", "serviceName": "svc", "handler": "f",
        "cron": "0 0 3 1 1 ?", "routeStrategy": "BROADCAST"}),
    )
    .await;
    app.create_job(
        &json!({"name": "parent", "serviceName": "svc", "handler": "p",
        "cron": "0 0 3 1 1 ?", "childJobs": ["lost-child", "fan-out"]}),
    )
    .await;
    let parent = trigger(&app, "parent", None).await;
    let trace = parent[0]["traceId"].as_str().unwrap().to_string();
    app.execution_in(&trace, "SUCCESS", Duration::from_secs(10))
        .await;
    let lost = eventually(
        Duration::from_secs(10),
        "the child and its retry",
        || async {
            let rows = app.executions("lost-child").await;
            (rows.len() == 2 && rows.iter().all(|r| r["status"] == "FAILED")).then_some(rows)
        },
    )
    .await;
    let first = lost.iter().find(|r| r["retryCount"] == 0).unwrap();
    let retry = lost.iter().find(|r| r["retryCount"] == 1).unwrap();
    assert_eq!(
        first["parentTraceId"],
        trace.as_str(),
        "names the parent run"
    );
    assert_eq!(
        retry["parentTraceId"], first["traceId"],
        "names the attempt it follows"
    );
    let first_id = first["executionId"].as_str().unwrap();
    assert!(first_id.starts_with("lost-child:CHILD:"), "{first_id}");
    assert_eq!(retry["executionId"], format!("{first_id}#r1"));
    let fanned = eventually(
        Duration::from_secs(10),
        "a child run on each executor",
        || async {
            let rows = app.executions("fan-out").await;
            (rows.len() == 2 && rows.iter().all(|r| r["status"] == "SUCCESS")).then_some(rows)
        },
    )
    .await;
    let mut ids: Vec<&str> = fanned
        .iter()
        .map(|r| r["executionId"].as_str().unwrap())
        .collect();
    ids.sort();
    assert!(
        ids[0] != ids[1] && ids.iter().all(|id| id.contains('@')),
        "{ids:?}"
    );
    let fan_out_calls = |r: &Recorder| r.calls().iter().filter(|c| c.handler == "f").count();
    assert_eq!((fan_out_calls(&r1), fan_out_calls(&r2)), (1, 1));
}
