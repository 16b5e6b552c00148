//! `kill -9` of the real binary, then a restart on the same database: a missed fire is made
//! once under FIRE_ONCE_NOW and not at all under DO_NOTHING; a fire claimed ahead of its
//! instant by the killed process is delivered once, by compensation, on both backends.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chrono::{SubsecRound, Timelike, Utc};
use serde_json::{Value, json};

use crate::helpers::{Backend, TestDb, backend_tests, eventually};
use crate::recorder::Recorder;

/// Starts `jobflow` in `dir` (SQLite under `dir/data`) and returns it with its address.
fn start(dir: &std::path::Path, executor: &str) -> (Child, String) {
    start_with(
        dir,
        executor,
        None,
        "[scheduler]\nmisfire_tolerance_millis = 500\n",
    )
}

/// Starts `jobflow` in `dir` on `database` (SQLite under `dir/data` when `None`), with
/// `extra` TOML after the executor list.
fn start_with(
    dir: &std::path::Path,
    executor: &str,
    database: Option<&str>,
    extra: &str,
) -> (Child, String) {
    std::fs::write(
        dir.join("kill.toml"),
        format!("[executors.static]\nsvc = [\"{executor}\"]\n{extra}"),
    )
    .unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_jobflow"));
    command
        .current_dir(dir)
        .args(["--config", "kill.toml"])
        .env("JOBFLOW__SERVER__HOST", "127.0.0.1")
        .env("JOBFLOW__SERVER__PORT", "0")
        .env("JOBFLOW__LOG__FORMAT", "json")
        .env("JOBFLOW__LOG__LEVEL", "info")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped());
    if let Some(url) = database {
        command.env("JOBFLOW__DATABASE__URL", url);
    }
    let mut child = command.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            let v: Value = serde_json::from_str(&l).ok()?;
            (v["message"] == "JobFlow listening").then(|| v["addr"].as_str().unwrap().to_string())
        })
        .expect("listening");
    std::thread::spawn(move || lines.for_each(drop));
    (child, addr)
}

backend_tests!(kill_9_inside_the_claim_window_loses_nothing);

async fn kill_9_inside_the_claim_window_loses_nothing(backend: Backend) {
    let rec = Recorder::start().await;
    let db = TestDb::create(backend).await;
    let dir = tempfile::tempdir().unwrap();
    let config = "[scheduler]\nclaim_ahead_millis = 20000\n\
                  [compensation]\npending_grace_seconds = 2\nrecovery_interval_millis = 200\n";
    let (mut first, addr) = start_with(dir.path(), &rec.addr, Some(&db.url), config);
    let client = reqwest::Client::new();
    let at = (Utc::now() + chrono::Duration::seconds(6)).trunc_subsecs(0);
    let cron = format!("{} {} {} * * ?", at.second(), at.minute(), at.hour());
    let r = client
        .post(format!("http://{addr}/api/v1/jobs"))
        .json(&json!({"name": "claimed-then-killed", "serviceName": "svc", "handler": "h", "cron": cron}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let claimed: Value = eventually(Duration::from_secs(5), "the fire claimed ahead", || async {
        let page: Value = client
            .get(format!(
                "http://{addr}/api/v1/jobs/claimed-then-killed/executions"
            ))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        page["content"].as_array()?.first().cloned()
    })
    .await;
    assert!(Utc::now() < at, "claimed before the instant");
    first.kill().unwrap(); // SIGKILL inside the window: the row stays PENDING.
    first.wait().unwrap();
    let (mut second, _) = start_with(dir.path(), &rec.addr, Some(&db.url), config);
    let fire = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let call = eventually(
        Duration::from_secs(30),
        "the claimed fire delivered",
        || async {
            rec.calls()
                .into_iter()
                .find(|c| c.header("x-fire-time") == fire)
        },
    )
    .await;
    // Recovered half a lease (1 s) after its instant, once its holder has left the list.
    assert!(
        call.received_at >= at + chrono::Duration::seconds(1),
        "{}",
        call.received_at
    );
    assert_eq!(call.trace_id(), claimed["traceId"].as_str().unwrap());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let calls = rec.calls();
    assert_eq!(calls.len(), 1, "delivered once: {calls:?}");
    second.kill().unwrap();
    second.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_between_fires_then_restart_follows_the_misfire_policy() {
    let rec = Recorder::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (mut first, addr) = start(dir.path(), &rec.addr);
    let client = reqwest::Client::new();
    let period = 6;
    for (name, policy) in [
        ("kill-catch-up", "FIRE_ONCE_NOW"),
        ("kill-let-go", "DO_NOTHING"),
    ] {
        let r = client
            .post(format!("http://{addr}/api/v1/jobs"))
            .json(&json!({"name": name, "serviceName": "svc", "handler": "h", "cron": format!("*/{period} * * * * ?"), "misfirePolicy": policy}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
    }
    eventually(
        Duration::from_secs(15),
        "a first fire of both jobs",
        || async {
            let c = rec.calls();
            (c.iter().any(|c| c.header("x-job-name") == "kill-catch-up")
                && c.iter().any(|c| c.header("x-job-name") == "kill-let-go"))
            .then_some(())
        },
    )
    .await;
    first.kill().unwrap(); // SIGKILL: no shutdown path runs.
    first.wait().unwrap();
    let killed = Utc::now();
    let mut missed = killed.trunc_subsecs(0) + chrono::Duration::seconds(1);
    while missed.timestamp() % period != 0 {
        missed += chrono::Duration::seconds(1);
    }
    let back = missed + chrono::Duration::seconds(2);
    tokio::time::sleep((back - Utc::now()).to_std().unwrap()).await;
    let (mut second, _) = start(dir.path(), &rec.addr);
    let at = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let next = at(missed + chrono::Duration::seconds(period));
    eventually(
        Duration::from_secs(15),
        "the next regular fire of both",
        || async {
            (rec.calls()
                .iter()
                .filter(|c| c.header("x-fire-time") == next)
                .count()
                == 2)
                .then_some(())
        },
    )
    .await;
    let fires_of = |job: &str| {
        rec.calls()
            .iter()
            .filter(|c| c.header("x-job-name") == job && c.header("x-fire-time") == at(missed))
            .count()
    };
    assert_eq!(
        fires_of("kill-catch-up"),
        1,
        "FIRE_ONCE_NOW catches the missed fire up once"
    );
    assert_eq!(fires_of("kill-let-go"), 0, "DO_NOTHING skips it");
    second.kill().unwrap();
    second.wait().unwrap();
}
