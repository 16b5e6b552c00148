//! `kill -9` of the real binary between two fires, then a restart on the same database: the
//! missed fire is made once under FIRE_ONCE_NOW and not at all under DO_NOTHING.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chrono::{SubsecRound, Utc};
use serde_json::{Value, json};

use crate::helpers::eventually;
use crate::recorder::Recorder;

/// Starts `jobflow` in `dir` (SQLite under `dir/data`) and returns it with its address.
fn start(dir: &std::path::Path, executor: &str) -> (Child, String) {
    std::fs::write(
        dir.join("kill.toml"),
        format!("[executors.static]\nsvc = [\"{executor}\"]\n[scheduler]\nmisfire_tolerance_millis = 500\n"),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_jobflow"))
        .current_dir(dir)
        .args(["--config", "kill.toml"])
        .env("JOBFLOW__SERVER__HOST", "127.0.0.1")
        .env("JOBFLOW__SERVER__PORT", "0")
        .env("JOBFLOW__LOG__FORMAT", "json")
        .env("JOBFLOW__LOG__LEVEL", "info")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
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
