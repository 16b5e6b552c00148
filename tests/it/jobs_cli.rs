//! `jobflow jobs …` against a real server on both backends, as a pipeline runs it: the
//! binary with its URL and token from the environment, its exit code and its output.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jobflow::config::{Role, Secret, TokenSettings};
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestDb, backend_tests, static_executors};
use crate::recorder::{Recorder, Reply};

backend_tests!(
    applying_the_same_files_twice_changes_nothing_the_second_time,
    an_edit_replaces_naming_its_fields_and_prune_deletes_what_the_files_leave_out,
    export_then_apply_round_trips,
    exit_codes_tell_usage_from_refusal,
    trigger_executions_and_cancel,
    every_command_acts_in_its_namespace,
);

/// `--namespace` (or `JOBFLOW_NAMESPACE`) scopes every command; `apply --prune` in one
/// namespace leaves the others alone, and an entry naming another namespace is bad usage.
async fn every_command_acts_in_its_namespace(backend: Backend) {
    let app = server(backend, None).await;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "orders.yaml", ORDERS);
    let run = jobs(&app, &["apply", "-f", dir.path().to_str().unwrap()]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = jobs(
        &app,
        &["-n", "team-a", "apply", "-f", dir.path().to_str().unwrap()],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The same files again, in team-a: nothing to do there.
    let run = jobs(
        &app,
        &[
            "--namespace",
            "team-a",
            "apply",
            "--prune",
            "-f",
            dir.path().to_str().unwrap(),
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["changes"], json!([]), "{}", run.stdout);
    assert_eq!(
        run.json()["unchanged"],
        json!(["order-sync", "order-report"]),
        "{}",
        run.stdout
    );
    let listed = jobs(&app, &["-n", "team-a", "list", "-o", "json"])
        .await
        .json();
    let in_team: Vec<(&str, &str)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["namespace"].as_str().unwrap(),
                j["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        in_team,
        [("team-a", "order-report"), ("team-a", "order-sync")]
    );
    // Pruning an empty file set in team-a deletes team-a's jobs only.
    write(dir.path(), "orders.yaml", "jobs: []\n");
    let run = jobs(
        &app,
        &[
            "-n",
            "team-a",
            "apply",
            "--prune",
            "-f",
            dir.path().to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        jobs(&app, &["-n", "team-a", "list", "-o", "json"])
            .await
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(names(&app).await, ["order-report", "order-sync"]);
    // Export shows no namespace for `default`, and the namespace elsewhere.
    let exported = jobs(&app, &["export", "order-sync"]).await;
    assert!(
        !exported.stdout.contains("namespace"),
        "{}",
        exported.stdout
    );
    write(
        dir.path(),
        "orders.yaml",
        "jobs:\n  - {name: x, namespace: team-b, serviceName: s, handler: h, cron: '0 0 2 * * ?'}\n",
    );
    let run = jobs(
        &app,
        &["-n", "team-a", "apply", "-f", dir.path().to_str().unwrap()],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--namespace team-b"), "{}", run.stderr);
    let run = jobs(&app, &["-n", "Team_A", "list"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    app.stop().await;
}

/// An admin token the server knows.
const TOKEN: &str = "cli-admin-token-0123456789";

async fn server(backend: Backend, executor: Option<&str>) -> TestApp {
    let db = Arc::new(TestDb::create(backend).await);
    let executor = executor.map(|a| vec![a.to_string()]);
    TestApp::spawn_with(db, move |s| {
        s.auth.tokens = vec![TokenSettings {
            name: "pipeline".into(),
            role: Role::Admin,
            token: Some(Secret::new(TOKEN)),
            token_sha256: None,
            ..Default::default()
        }];
        if let Some(addr) = executor {
            s.executors.static_ = static_executors("svc", &addr);
        }
    })
    .await
}

/// What one run of the binary came to.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.stdout))
    }
}

/// `jobflow jobs {args}` against `app`, its token from the environment.
async fn jobs(app: &TestApp, args: &[&str]) -> Run {
    jobs_with_token(app, Some(TOKEN), args).await
}

async fn jobs_with_token(app: &TestApp, token: Option<&str>, args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_jobflow"));
    cmd.arg("jobs").args(args).env("JOBFLOW_URL", &app.addr);
    match token {
        Some(t) => cmd.env("JOBFLOW_TOKEN", t),
        None => cmd.env_remove("JOBFLOW_TOKEN"),
    };
    let out = cmd.output().await.expect("the binary runs");
    Run {
        code: out.status.code().expect("an exit code"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

async fn get_job(app: &TestApp, name: &str) -> Value {
    let r = app
        .client
        .get(app.url(&format!("/api/v1/jobs/{name}")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{name}");
    r.json().await.unwrap()
}

async fn names(app: &TestApp) -> Vec<String> {
    let run = jobs(app, &["list", "-o", "json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap().to_string())
        .collect()
}

fn write(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
}

const ORDERS: &str = r#"
jobs:
  # Names its child, which is created first although it comes later.
  - name: order-sync
    serviceName: order-service
    handler: syncOrders
    cron: "0 0/5 * * * ?"
    shardCount: 4
    jobParams: {batch: 500}
    childJobs: [order-report]
  - name: order-report
    serviceName: order-service
    handler: report
    scheduleType: NONE
"#;

const REPORTS: &str = r#"
jobs:
  - name: 日报
    serviceName: report-service
    handler: daily
    cron: "0 0 2 * * ?"
    timezone: Asia/Shanghai
    maxRetry: 1
"#;

async fn applying_the_same_files_twice_changes_nothing_the_second_time(backend: Backend) {
    let app = server(backend, None).await;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "orders.yaml", ORDERS);
    write(dir.path(), "reports.yml", REPORTS);
    write(dir.path(), "notes.txt", "not a jobs document");
    let dir_arg = dir.path().to_str().unwrap();
    let first = jobs(&app, &["apply", "-f", dir_arg]).await;
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    assert_eq!(
        first.stdout,
        "create    order-report\ncreate    order-sync\ncreate    日报\nunchanged 0 job(s)\n"
    );
    let mut all = names(&app).await;
    all.sort();
    assert_eq!(all, ["order-report", "order-sync", "日报"]);
    let before = get_job(&app, "order-sync").await;
    let second = jobs(&app, &["apply", "-f", dir_arg, "-o", "json"]).await;
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(
        second.json(),
        json!({"dryRun": false, "changes": [],
            "unchanged": ["order-sync", "order-report", "日报"]})
    );
    let after = get_job(&app, "order-sync").await;
    assert_eq!(before["updatedAt"], after["updatedAt"], "not written again");
    // An operator's pause holds: the files do not say `enabled`.
    let r = app
        .client
        .patch(app.url("/api/v1/jobs/order-sync/enabled?enabled=false"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let third = jobs(&app, &["apply", "-f", dir_arg]).await;
    assert_eq!(third.stdout, "unchanged 3 job(s)\n");
}

async fn an_edit_replaces_naming_its_fields_and_prune_deletes_what_the_files_leave_out(
    backend: Backend,
) {
    let app = server(backend, None).await;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "orders.yaml", ORDERS);
    write(dir.path(), "reports.yaml", REPORTS);
    let dir_arg = dir.path().to_str().unwrap();
    assert_eq!(jobs(&app, &["apply", "-f", dir_arg]).await.code, 0);
    // One edit, one job gone from the files.
    write(
        dir.path(),
        "orders.yaml",
        &ORDERS
            .replace("0 0/5 * * * ?", "0 0/10 * * * ?")
            .replace("{batch: 500}", "{batch: 800}"),
    );
    std::fs::remove_file(dir.path().join("reports.yaml")).unwrap();
    let dry = jobs(&app, &["apply", "-f", dir_arg, "--prune", "--dry-run"]).await;
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert_eq!(
        dry.stdout,
        "update    order-sync (cron, jobParams)\ndelete    日报\nunchanged 1 job(s)\ndry run: nothing was changed\n"
    );
    assert_eq!(get_job(&app, "order-sync").await["cron"], "0 0/5 * * * ?");
    // Without --prune the job the files left out stays.
    let kept = jobs(&app, &["apply", "-f", dir_arg]).await;
    assert_eq!(
        kept.stdout,
        "update    order-sync (cron, jobParams)\nunchanged 1 job(s)\n"
    );
    let job = get_job(&app, "order-sync").await;
    assert_eq!(
        (&job["cron"], &job["jobParams"], &job["shardCount"]),
        (&json!("0 0/10 * * * ?"), &json!({"batch": 800}), &json!(4))
    );
    let pruned = jobs(&app, &["apply", "-f", dir_arg, "--prune"]).await;
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    assert_eq!(pruned.stdout, "delete    日报\nunchanged 2 job(s)\n");
    let mut all = names(&app).await;
    all.sort();
    assert_eq!(all, ["order-report", "order-sync"]);
}

async fn export_then_apply_round_trips(backend: Backend) {
    let app = server(backend, None).await;
    for body in [
        json!({"name": "rate", "serviceName": "s", "handler": "h", "scheduleType": "FIXED_RATE",
            "intervalSeconds": 30, "timezone": "Europe/Berlin", "shardCount": 3,
            "shardStrategy": "CUSTOM", "shardParams": {"0": "a", "1": "b", "2": "c"}, "overlapPolicy": "SKIP", "description": "every 30 s"}),
        json!({"name": "once", "serviceName": "s", "handler": "h", "scheduleType": "ONCE",
            "startAt": "2030-01-01T00:00:00Z", "routeStrategy": "BROADCAST"}),
        json!({"name": "cron", "serviceName": "s", "handler": "h", "cron": "0 15 3 * * ?",
            "misfirePolicy": "DO_NOTHING", "timeoutSeconds": 90, "childJobs": ["once"]}),
    ] {
        let r = app
            .client
            .post(app.url("/api/v1/jobs"))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{:?}", r.text().await);
    }
    let exported = jobs(&app, &["export"]).await;
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "all.yaml", &exported.stdout);
    let file = dir.path().join("all.yaml");
    let file = file.to_str().unwrap();
    let again = jobs(&app, &["apply", "-f", file]).await;
    assert_eq!(again.stdout, "unchanged 3 job(s)\n", "{}", exported.stdout);
    // Into an empty server: the same jobs, created children first.
    let other = server(backend, None).await;
    let created = jobs(&other, &["apply", "-f", file]).await;
    assert_eq!(created.code, 0, "{}{}", created.stdout, created.stderr);
    for name in ["rate", "once", "cron"] {
        let keys = jobflow_keys(&get_job(&app, name).await);
        assert_eq!(
            keys,
            jobflow_keys(&get_job(&other, name).await),
            "{name} as exported"
        );
    }
    // One job, as JSON.
    let one = jobs(&app, &["export", "rate", "-o", "json"]).await;
    assert_eq!(one.json()["jobs"][0]["intervalSeconds"], 30);
}

/// A job without what differs between two servers by nature (ids, times, actors).
fn jobflow_keys(job: &Value) -> Value {
    let mut job = job.clone();
    for k in ["id", "createdAt", "updatedAt", "createdBy", "updatedBy"] {
        job.as_object_mut().unwrap().remove(k);
    }
    job
}

async fn exit_codes_tell_usage_from_refusal(backend: Backend) {
    let app = server(backend, None).await;
    let dir = tempfile::tempdir().unwrap();
    // A bad file changes nothing: usage, 2, naming the file and the field.
    write(
        dir.path(),
        "bad.yaml",
        "jobs:\n  - {name: a, serviceName: s, handler: h, cron: \"0 0 2 * * ?\"}\n  - {name: b, serviceName: s, handler: h, cron: nonsense}\n",
    );
    let bad = dir.path().join("bad.yaml");
    let run = jobs(&app, &["apply", "-f", bad.to_str().unwrap()]).await;
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("bad.yaml") && run.stderr.contains("cron"),
        "{}",
        run.stderr
    );
    assert_eq!(names(&app).await, Vec::<String>::new());
    assert_eq!(jobs(&app, &["frobnicate"]).await.code, 2);
    assert_eq!(jobs(&app, &["apply"]).await.code, 2, "-f is required");
    let run = jobs(&app, &["trigger", "a", "--params", "{not json"]).await;
    assert_eq!(run.code, 2);
    // Refused by the server: 1, with its explanation.
    let run = jobs(&app, &["get", "missing"]).await;
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("404"), "{}", run.stderr);
    let run = jobs_with_token(&app, None, &["list"]).await;
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("401"), "{}", run.stderr);
    let run = jobs_with_token(&app, Some("wrong-token-0123456789"), &["list"]).await;
    assert_eq!(run.code, 1);
    // A child the server does not know: that job is refused, the others are applied.
    write(
        dir.path(),
        "child.yaml",
        "jobs:\n  - {name: p, serviceName: s, handler: h, cron: \"0 0 2 * * ?\", childJobs: [nowhere]}\n  - {name: q, serviceName: s, handler: h, cron: \"0 0 2 * * ?\"}\n",
    );
    let child = dir.path().join("child.yaml");
    let run = jobs(&app, &["apply", "-f", child.to_str().unwrap()]).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stdout
            .contains("create    p\n    failed: POST /api/v1/jobs: 400"),
        "{}",
        run.stdout
    );
    assert_eq!(names(&app).await, ["q"]);
    // Nothing listens there.
    let run = jobs(&app, &["list", "--url", "http://127.0.0.1:9"]).await;
    assert_eq!(run.code, 1);
}

async fn trigger_executions_and_cancel(backend: Backend) {
    let rec = Recorder::with(|_| Reply::slow(Duration::from_secs(30))).await;
    let app = server(backend, Some(&rec.addr)).await;
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "slow.yaml",
        "jobs:\n  - {name: slow, serviceName: svc, handler: h, scheduleType: NONE}\n",
    );
    let file = dir.path().join("slow.yaml");
    assert_eq!(
        jobs(&app, &["apply", "-f", file.to_str().unwrap()])
            .await
            .code,
        0
    );
    let run = jobs(
        &app,
        &[
            "trigger",
            "slow",
            "--params",
            r#"{"day": "friday"}"#,
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let trace = run.json()[0]["traceId"].as_str().unwrap().to_string();
    crate::helpers::eventually(Duration::from_secs(10), "the call", || async {
        (!rec.calls().is_empty()).then_some(())
    })
    .await;
    assert_eq!(rec.calls()[0].body["jobParams"], json!({"day": "friday"}));
    let listed = jobs(&app, &["executions", "slow"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert!(lines[0].starts_with("TRACE_ID"), "{}", listed.stdout);
    assert!(
        lines[1].starts_with(&trace) && lines[1].contains("MANUAL"),
        "{}",
        listed.stdout
    );
    let cancelled = jobs(&app, &["cancel", &trace]).await;
    assert_eq!(cancelled.code, 0, "{}", cancelled.stderr);
    assert_eq!(cancelled.stdout, format!("{trace}  CANCELLED\n"));
    let only = jobs(
        &app,
        &["executions", "slow", "--status", "cancelled", "-o", "json"],
    )
    .await;
    assert_eq!(only.json()[0]["traceId"], trace.as_str());
    // A second cancel is refused: the execution has ended.
    assert_eq!(jobs(&app, &["cancel", &trace]).await.code, 1);
}
