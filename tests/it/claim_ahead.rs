//! Fires claimed ahead of their instant (`scheduler.claim_ahead_millis`, docs/design.md
//! "Claims written ahead"): the rows exist before the instant, the call goes out at it, and
//! an edit, a disable, a delete or a cancel before the instant is honoured for a fire that is
//! already claimed, whatever the job's overlap policy and whichever instance the change went
//! through. `kill -9` inside the window: tests/it/kill_restart.rs; ownership moving inside
//! the window: the cluster suite.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Timelike, Utc};
use serde_json::{Value, json};

use crate::helpers::{
    Backend, TestApp, TestDb, backend_tests, eventually, sleep_until, static_executors,
};
use crate::proxy::CutProxy;
use crate::recorder::{RecordedCall, Recorder};

backend_tests!(
    every_fire_is_claimed_before_its_instant_and_called_at_it,
    an_edit_before_the_instant_reaches_the_claimed_fire,
    a_disable_before_the_instant_withdraws_the_claimed_fire,
    a_delete_before_the_instant_withdraws_the_claimed_fire,
    a_cancel_before_the_instant_keeps_the_executor_uncalled,
    a_stopping_instance_still_calls_what_it_claimed,
    an_edit_through_another_instance_is_honoured_at_the_instant,
    a_cancel_through_another_instance_keeps_the_handler_from_running,
    a_cancel_through_another_instance_reaches_even_a_bare_executor,
    a_cancel_before_an_earlier_instant_is_still_seen_at_its_fires_own,
);

/// Every overlap policy: a guarded fire is claimed and withdrawn like any other.
const POLICIES: [&str; 3] = ["ALLOW", "SKIP", "COVER"];

/// The window these tests claim with: wide, so a loaded machine still edits before the
/// instant.
const WINDOW_MILLIS: u64 = 20_000;

fn ts(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

/// An instance claiming `window` ahead, its executor, and its database (kept by the caller
/// past the instance's stop).
async fn app_with_executor(backend: Backend, window: u64) -> (TestApp, Recorder, Arc<TestDb>) {
    let recorder = Recorder::start().await;
    let db = Arc::new(TestDb::create(backend).await);
    let addr = recorder.addr.clone();
    let app = TestApp::spawn_with(db.clone(), move |s| {
        s.executors.static_ = static_executors("billing", &[addr]);
        s.scheduler.claim_ahead_millis = window;
    })
    .await;
    (app, recorder, db)
}

/// A daily cron whose next instant is `lead` from now (whole seconds), and that instant.
fn instant_in(lead: Duration) -> (String, DateTime<Utc>) {
    let at = (Utc::now() + chrono::Duration::from_std(lead).unwrap()).trunc_subsecs(0);
    (
        format!("{} {} {} * * ?", at.second(), at.minute(), at.hour()),
        at,
    )
}

/// Creates `name` (with `policy`) firing once, `lead` from now, and waits until that fire is
/// claimed: its PENDING row exists before the instant. Returns the instant and the row.
async fn claimed_fire(
    app: &TestApp,
    name: &str,
    policy: &str,
    lead: Duration,
) -> (DateTime<Utc>, Value) {
    let (at, mut rows) = claimed_fires(app, &[(name, policy)], lead).await;
    (at, rows.remove(0))
}

/// [`claimed_fire`] for several jobs (name, policy) firing at the same instant.
async fn claimed_fires(
    app: &TestApp,
    jobs: &[(&str, &str)],
    lead: Duration,
) -> (DateTime<Utc>, Vec<Value>) {
    let (cron, at) = instant_in(lead);
    for (name, policy) in jobs {
        app.create_job(&json!({
            "name": name, "serviceName": "billing", "handler": "invoice", "cron": cron,
            "jobParams": {"version": 1}, "overlapPolicy": policy
        }))
        .await;
    }
    let mut rows = Vec::new();
    for (name, _) in jobs {
        let row = eventually(
            Duration::from_secs(10),
            "the fire claimed ahead",
            || async {
                app.executions(name)
                    .await
                    .into_iter()
                    .find(|e| ts(&e["fireTime"]) == at)
            },
        )
        .await;
        assert_eq!(row["status"], "PENDING", "{row}");
        rows.push(row);
    }
    assert!(
        Utc::now() < at,
        "the claims must be visible before the instant; the machine is too slow for this window"
    );
    (at, rows)
}

/// Waits until two seconds past `at`, so a call that was going to come has come.
async fn past(at: DateTime<Utc>) {
    sleep_until(at + chrono::Duration::seconds(2)).await;
}

async fn every_fire_is_claimed_before_its_instant_and_called_at_it(backend: Backend) {
    let (app, recorder, _db) = app_with_executor(backend, 2_000).await;
    app.create_job(&json!({
        "name": "each-second", "serviceName": "billing", "handler": "invoice",
        "cron": "* * * * * ?"
    }))
    .await;
    let calls = eventually(Duration::from_secs(15), "four calls", || async {
        let calls = recorder.calls();
        (calls.len() >= 4).then_some(calls)
    })
    .await;
    app.patch("/api/v1/jobs/each-second/enabled?enabled=false")
        .await;
    for call in &calls {
        let fire: DateTime<Utc> = call.header("x-fire-time").parse().unwrap();
        assert!(
            call.received_at >= fire,
            "called before its instant: {fire} at {}",
            call.received_at
        );
    }
    let rows = app.executions("each-second").await;
    let mut fires: Vec<DateTime<Utc>> = rows.iter().map(|e| ts(&e["fireTime"])).collect();
    let count = fires.len();
    fires.sort();
    fires.dedup();
    assert_eq!(fires.len(), count, "one row per fire");
    // After the first instant (when the job was created inside the window), every fire was
    // recorded ahead of its instant: its row was written before the instant.
    let called: Vec<&Value> = rows
        .iter()
        .filter(|e| calls.iter().any(|c| c.trace_id() == e["traceId"]))
        .collect();
    assert_eq!(called.len(), calls.len());
    let ahead = called
        .iter()
        .filter(|e| ts(&e["triggerTime"]) < ts(&e["fireTime"]))
        .count();
    assert!(
        ahead >= calls.len() - 1,
        "rows written ahead: {ahead} of {}: {called:?}",
        calls.len()
    );
    let due: Vec<_> = called
        .iter()
        .filter(|e| ts(&e["triggerTime"]) < ts(&e["fireTime"]))
        .map(|e| (ts(&e["dueTime"]), ts(&e["fireTime"])))
        .collect();
    assert!(
        due.iter().all(|(d, f)| d == f),
        "a row claimed ahead is held from its instant: {due:?}"
    );
}

async fn an_edit_before_the_instant_reaches_the_claimed_fire(backend: Backend) {
    let (app, recorder, _db) = app_with_executor(backend, WINDOW_MILLIS).await;
    let mut claimed = Vec::new();
    for policy in POLICIES {
        let name = format!("edited-{}", policy.to_lowercase());
        let (at, row) = claimed_fire(&app, &name, policy, Duration::from_secs(8)).await;
        claimed.push((name, policy, at, row));
    }
    for (name, policy, at, _) in &claimed {
        let cron = format!("{} {} {} * * ?", at.second(), at.minute(), at.hour());
        let (status, body) = app
            .put(
                &format!("/api/v1/jobs/{name}"),
                &json!({
                    "name": name, "serviceName": "billing", "handler": "invoice", "cron": cron,
                    "jobParams": {"version": 2}, "overlapPolicy": policy
                }),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    eventually(
        Duration::from_secs(20),
        "the edited fires' calls",
        || async { (recorder.calls().len() >= claimed.len()).then_some(()) },
    )
    .await;
    past(claimed.iter().map(|c| c.2).max().unwrap()).await;
    let calls = recorder.calls();
    assert_eq!(
        calls.len(),
        claimed.len(),
        "one call per instant: {calls:?}"
    );
    for (name, policy, at, row) in &claimed {
        let call = calls
            .iter()
            .find(|c| c.header("x-job-name") == name)
            .unwrap_or_else(|| panic!("{policy}: no call"));
        assert_eq!(call.body["jobParams"], json!({"version": 2}), "{policy}");
        assert_eq!(
            call.header("x-fire-time").parse::<DateTime<Utc>>().unwrap(),
            *at
        );
        let rows = app.executions(name).await;
        assert_eq!(
            rows.len(),
            1,
            "{policy}: the withdrawn row is gone: {rows:?}"
        );
        assert_ne!(rows[0]["traceId"], row["traceId"]);
        assert_eq!(rows[0]["traceId"].as_str(), Some(call.trace_id()));
    }
}

async fn a_disable_before_the_instant_withdraws_the_claimed_fire(backend: Backend) {
    let (app, recorder, _db) = app_with_executor(backend, WINDOW_MILLIS).await;
    let mut last = None;
    for policy in POLICIES {
        let name = format!("disabled-{}", policy.to_lowercase());
        let (at, _) = claimed_fire(&app, &name, policy, Duration::from_secs(6)).await;
        let (status, _) = app
            .patch(&format!("/api/v1/jobs/{name}/enabled?enabled=false"))
            .await;
        assert_eq!(status, 200);
        eventually(
            Duration::from_secs(10),
            "the claimed row withdrawn",
            || async { app.executions(&name).await.is_empty().then_some(()) },
        )
        .await;
        last = Some(at);
    }
    past(last.unwrap()).await;
    assert!(recorder.calls().is_empty(), "{:?}", recorder.calls());
}

async fn a_delete_before_the_instant_withdraws_the_claimed_fire(backend: Backend) {
    let (app, recorder, _db) = app_with_executor(backend, WINDOW_MILLIS).await;
    let mut last = None;
    for policy in POLICIES {
        let name = format!("deleted-{}", policy.to_lowercase());
        let (at, claimed) = claimed_fire(&app, &name, policy, Duration::from_secs(6)).await;
        let (status, _) = app.delete(&format!("/api/v1/jobs/{name}")).await;
        assert_eq!(status, 204);
        let trace = claimed["traceId"].as_str().unwrap().to_string();
        eventually(
            Duration::from_secs(10),
            "the claimed row withdrawn",
            || async {
                let (status, _) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
                (status == 404).then_some(())
            },
        )
        .await;
        last = Some(at);
    }
    past(last.unwrap()).await;
    assert!(recorder.calls().is_empty(), "{:?}", recorder.calls());
}

async fn a_cancel_before_the_instant_keeps_the_executor_uncalled(backend: Backend) {
    let (app, recorder, _db) = app_with_executor(backend, WINDOW_MILLIS).await;
    let (at, claimed) = claimed_fire(&app, "cancelled", "ALLOW", Duration::from_secs(6)).await;
    let trace = claimed["traceId"].as_str().unwrap();
    let body = cancel(&app, trace).await;
    assert_eq!(body["status"], "CANCELLED");
    past(at).await;
    assert!(recorder.calls().is_empty(), "{:?}", recorder.calls());
    assert!(
        recorder.cancels().is_empty(),
        "nothing to stop at the executor"
    );
    let rows = app.executions("cancelled").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["status"], "CANCELLED");
}

async fn a_stopping_instance_still_calls_what_it_claimed(backend: Backend) {
    let (app, recorder, _db) = app_with_executor(backend, WINDOW_MILLIS).await;
    let (at, claimed) = claimed_fire(&app, "at-shutdown", "SKIP", Duration::from_secs(5)).await;
    let store = app.store.clone();
    // SIGTERM before the instant: the drain (30 s grace) still calls at the instant.
    app.stop().await;
    let calls = recorder.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0].received_at >= at);
    assert_eq!(calls[0].trace_id(), claimed["traceId"].as_str().unwrap());
    let row = store
        .get_execution(calls[0].trace_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.status, jobflow::jobs::ExecutionStatus::Success);
}

/// An edit through another instance, which the claiming instance's engine has not reloaded
/// yet (it polls the job revision once a minute here): the fire claimed under the old
/// definition is withdrawn at its instant and fired under the new one, so the call made for
/// an instant after the edit was answered carries the new definition.
async fn an_edit_through_another_instance_is_honoured_at_the_instant(backend: Backend) {
    let t = TwoInstances::start(backend, false).await;
    // Lead enough for a loaded machine: the edit must be answered before the instant (an
    // edit answered after it may leave the claimed row to be called, under either definition).
    let (at, claimed) =
        claimed_fire(&t.claimer, "remote-edit", "ALLOW", Duration::from_secs(12)).await;
    let cron = format!("{} {} {} * * ?", at.second(), at.minute(), at.hour());
    t.edit("remote-edit", &cron).await;
    assert!(
        Utc::now() < at,
        "the edit was answered before the instant, {at}"
    );
    let call = &t.calls(1).await["remote-edit"];
    assert_eq!(call.body["jobParams"], json!({"version": 2}));
    assert_eq!(
        call.header("x-fire-time").parse::<DateTime<Utc>>().unwrap(),
        at
    );
    assert_ne!(call.trace_id(), claimed["traceId"].as_str().unwrap());
}

/// A claimer that polls the job revision once a minute (its engine does not reload a change
/// made elsewhere before the instant), optionally behind a proxy this test can stall, and a
/// second instance on the same database. The second owns every job too (standalone); its
/// schedule holds nothing claimable before the claimer's claims, but an instant the claimer
/// withdrew may be recorded again by either.
struct TwoInstances {
    claimer: TestApp,
    other: TestApp,
    recorder: Recorder,
    proxy: Option<CutProxy>,
}

impl TwoInstances {
    async fn start(backend: Backend, stallable: bool) -> Self {
        let recorder = Recorder::start().await;
        let db = Arc::new(TestDb::create(backend).await);
        let (proxy, url) = match stallable {
            true => {
                let (proxy, url) = CutProxy::in_front_of(&db.url).await;
                (Some(proxy), Some(url))
            }
            false => (None, None),
        };
        let addr = recorder.addr.clone();
        let claimer = TestApp::spawn_with(db.clone(), move |s| {
            if let Some(url) = url {
                s.database.url = jobflow::config::Secret::new(url);
            }
            s.executors.static_ = static_executors("billing", &[addr]);
            s.scheduler.claim_ahead_millis = WINDOW_MILLIS;
            s.scheduler.job_refresh_millis = 60_000.try_into().unwrap();
        })
        .await;
        // The other instance owns the job too: once the claimer has withdrawn a fire, either
        // may record it again, so both reach the executor.
        let addr = recorder.addr.clone();
        let other = TestApp::spawn_with(db, move |s| {
            s.scheduler.claim_ahead_millis = 0;
            s.executors.static_ = static_executors("billing", &[addr]);
        })
        .await;
        Self {
            claimer,
            other,
            recorder,
            proxy,
        }
    }

    /// Replaces `name` through the other instance: firing at `cron`, at version 2.
    async fn edit(&self, name: &str, cron: &str) {
        let (status, body) = self
            .other
            .put(
                &format!("/api/v1/jobs/{name}"),
                &json!({"name": name, "serviceName": "billing", "handler": "invoice",
                    "cron": cron, "jobParams": {"version": 2}}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }

    /// Stalls the claimer's database from half a second before `at` until 3 s after it,
    /// running `during` 1 s after `at`; no call goes out meanwhile.
    async fn stall_around(&self, at: DateTime<Utc>, during: impl Future<Output = ()>) {
        let proxy = self.proxy.as_ref().expect("a claimer behind a proxy");
        sleep_until(at - chrono::Duration::milliseconds(500)).await;
        proxy.stall();
        sleep_until(at + chrono::Duration::seconds(1)).await;
        during.await;
        sleep_until(at + chrono::Duration::seconds(3)).await;
        assert!(
            self.recorder.calls().is_empty(),
            "{:?}",
            self.recorder.calls()
        );
        proxy.resume();
    }

    /// The calls made once the database answers again, when `n` have come and nothing more
    /// for 2 s, by job.
    async fn calls(&self, n: usize) -> HashMap<String, RecordedCall> {
        eventually(Duration::from_secs(20), "the fires' calls", || async {
            (self.recorder.calls().len() >= n).then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let calls = self.recorder.calls();
        assert_eq!(calls.len(), n, "{calls:?}");
        calls
            .into_iter()
            .map(|c| (c.body["jobName"].as_str().unwrap().to_string(), c))
            .collect()
    }
}

/// Each of `jobs` was called for `at` under definition `version`: as the fire it `claimed`
/// (`as_claimed`), or as that instant recorded again (a new trace id).
fn assert_called(
    calls: &HashMap<String, RecordedCall>,
    jobs: &[(String, &str)],
    claimed: &[Value],
    at: DateTime<Utc>,
    version: u64,
    as_claimed: bool,
) {
    for ((name, _), claimed) in jobs.iter().zip(claimed) {
        let call = &calls[name];
        assert_eq!(
            call.body["jobParams"],
            json!({"version": version}),
            "{name}"
        );
        assert_eq!(
            call.header("x-fire-time").parse::<DateTime<Utc>>().unwrap(),
            at
        );
        let claimed = claimed["traceId"].as_str().unwrap();
        assert_eq!(call.trace_id() == claimed, as_claimed, "{name}");
    }
}

/// One job of each overlap policy, named `{prefix}-{policy}`.
fn each_policy(prefix: &str) -> Vec<(String, &'static str)> {
    POLICIES
        .iter()
        .map(|p| (format!("{prefix}-{}", p.to_lowercase()), *p))
        .collect()
}

/// The same edit, with the claimer's database stalled from just before the instant until
/// 3 s after it: the claimer cannot check the fires at their instant. The edits were answered
/// before, so calling the fires as claimed would call the old definition; the claimer waits
/// for the database, then withdraws the fires and calls them under the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_through_another_instance_is_honoured_when_the_database_stalls_at_the_instant() {
    let t = TwoInstances::start(Backend::MySql, true).await;
    let jobs = each_policy("stalled-edit");
    let named: Vec<(&str, &str)> = jobs.iter().map(|(n, p)| (n.as_str(), *p)).collect();
    let (at, claimed) = claimed_fires(&t.claimer, &named, Duration::from_secs(6)).await;
    let cron = format!("{} {} {} * * ?", at.second(), at.minute(), at.hour());
    for (name, _) in &jobs {
        t.edit(name, &cron).await;
    }
    t.stall_around(at, async {}).await;
    let calls = t.calls(jobs.len()).await;
    assert_called(&calls, &jobs, &claimed, at, 2, false);
}

/// Edits answered after the instant, while the claimer's database stalls and its fires for
/// that instant wait to be checked: the fires were due before the edits, so they are called
/// under the definition of their time once the database answers, even though the new cron
/// has no such instant (withdrawing them would lose them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_after_the_instant_leaves_a_fire_the_database_delayed_to_its_definition() {
    let t = TwoInstances::start(Backend::MySql, true).await;
    let jobs = each_policy("late-edit");
    let named: Vec<(&str, &str)> = jobs.iter().map(|(n, p)| (n.as_str(), *p)).collect();
    let (at, claimed) = claimed_fires(&t.claimer, &named, Duration::from_secs(6)).await;
    let edits = async {
        for (name, _) in &jobs {
            t.edit(name, "0 0 3 1 1 ?").await;
        }
    };
    t.stall_around(at, edits).await;
    let calls = t.calls(jobs.len()).await;
    assert_called(&calls, &jobs, &claimed, at, 1, true);
}

/// A cancel through another instance of a fire claimed ahead here: the claimer calls at the
/// instant without reading the row, but the executor was asked to cancel first and remembers
/// it, so the handler never runs.
async fn a_cancel_through_another_instance_keeps_the_handler_from_running(backend: Backend) {
    let (addr, runs) = crate::helpers::counting_sdk_executor("invoice").await;
    let db = Arc::new(TestDb::create(backend).await);
    let planned = addr.clone();
    let claimer = TestApp::spawn_with(db.clone(), move |s| {
        s.executors.static_ = static_executors("billing", &[planned]);
        s.scheduler.claim_ahead_millis = WINDOW_MILLIS;
    })
    .await;
    let other = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("billing", &[addr]);
        s.scheduler.claim_ahead_millis = 0;
    })
    .await;
    let (at, claimed) =
        claimed_fire(&claimer, "remote-cancel", "ALLOW", Duration::from_secs(6)).await;
    let trace = claimed["traceId"].as_str().unwrap();
    let body = cancel(&other, trace).await;
    assert_eq!(body["status"], "CANCELLED");
    past(at).await;
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the handler never ran"
    );
    let row = claimer
        .execution_in(trace, "CANCELLED", Duration::ZERO)
        .await;
    assert!(
        row["errorMessage"]
            .as_str()
            .unwrap()
            .starts_with("cancelled"),
        "{row}"
    );
}

/// The same cancel through another instance, for an executor that does not remember cancels
/// (the recorder answers a cancel request but runs whatever it is called with, as a bare
/// executor would): the claimer reads the cancel counter at the instant, sees it moved, finds
/// the row CANCELLED and never calls.
async fn a_cancel_through_another_instance_reaches_even_a_bare_executor(backend: Backend) {
    let recorder = Recorder::start().await;
    let db = Arc::new(TestDb::create(backend).await);
    let addr = recorder.addr.clone();
    let claimer = TestApp::spawn_with(db.clone(), move |s| {
        s.executors.static_ = static_executors("billing", &[addr]);
        s.scheduler.claim_ahead_millis = WINDOW_MILLIS;
    })
    .await;
    let other = TestApp::spawn_with(db, |s| {
        s.scheduler.claim_ahead_millis = 0;
    })
    .await;
    let (at, claimed) =
        claimed_fire(&claimer, "bare-cancel", "ALLOW", Duration::from_secs(6)).await;
    let trace = claimed["traceId"].as_str().unwrap();
    cancel(&other, trace).await;
    past(at).await;
    assert!(
        recorder.calls().is_empty(),
        "never called: {:?}",
        recorder.calls()
    );
}

/// The claimer checks the cancel counter at every instant it calls fires. A cancel made after
/// a fire was recorded, but before the check of an earlier instant (of another job), is seen
/// at that earlier check; the fire's own instant must still read its rows, not take the
/// counter as unmoved since (campaign seed 35: a bare executor was called for a row
/// cancelled 1 s before its instant).
async fn a_cancel_before_an_earlier_instant_is_still_seen_at_its_fires_own(backend: Backend) {
    let recorder = Recorder::start().await;
    let db = Arc::new(TestDb::create(backend).await);
    let addr = recorder.addr.clone();
    let claimer = TestApp::spawn_with(db.clone(), move |s| {
        s.executors.static_ = static_executors("billing", &[addr]);
        s.scheduler.claim_ahead_millis = WINDOW_MILLIS;
    })
    .await;
    let other = TestApp::spawn_with(db, |s| {
        s.scheduler.claim_ahead_millis = 0;
    })
    .await;
    let (at, claimed) =
        claimed_fire(&claimer, "cancelled-late", "ALLOW", Duration::from_secs(7)).await;
    let (earlier, _) =
        claimed_fire(&claimer, "called-earlier", "ALLOW", Duration::from_secs(4)).await;
    assert!(earlier < at, "{earlier} before {at}");
    let trace = claimed["traceId"].as_str().unwrap();
    cancel(&other, trace).await;
    past(at).await;
    let called: Vec<String> = recorder
        .calls()
        .iter()
        .map(|c| c.header("x-job-name").to_string())
        .collect();
    assert_eq!(
        called,
        ["called-earlier"],
        "the cancelled fire is never called"
    );
}

/// Cancels the execution `trace` through `app`; its answer.
async fn cancel(app: &TestApp, trace: &str) -> serde_json::Value {
    let (status, body) = app
        .post(
            &format!("/api/v1/jobs/executions/{trace}/cancel"),
            &json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body
}
