//! `kill -9` of the real binary, then a restart on the same database: a missed fire is made
//! once under FIRE_ONCE_NOW and not at all under DO_NOTHING; a fire claimed ahead of its
//! instant by the killed process is delivered once, by compensation, on both backends; a
//! handler's log streaming in loses no line the killed process acknowledged.

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
    start_on(dir, executor, database, extra, 0)
}

/// As [`start_with`], listening on `port` (0: any free port).
fn start_on(
    dir: &std::path::Path,
    executor: &str,
    database: Option<&str>,
    extra: &str,
    port: u16,
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
        .env("JOBFLOW__SERVER__PORT", port.to_string())
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

backend_tests!(
    kill_9_inside_the_claim_window_loses_nothing,
    kill_9_while_a_log_streams_in_loses_no_acknowledged_line,
);

/// A handler logs 30 lines over 3 s while the scheduler receiving them is killed and started
/// again on the same address and database: every line acknowledged before the kill is still
/// there, the executor ships the rest again, and the log ends whole and in order.
async fn kill_9_while_a_log_streams_in_loses_no_acknowledged_line(backend: Backend) {
    use jobflow_executor::{JobContext, JobExecutor, JobResult, logs};
    const SECRET: &str = "kill-log-secret";
    let router = JobExecutor::with_secret(SECRET)
        .handler("stream", |_: JobContext| async {
            for i in 1..=30 {
                logs::log(tracing::Level::INFO, format!("line {i}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            JobResult::success("streamed")
        })
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let executor = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db = TestDb::create(backend).await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[executor]\nsigning_secret = \"{SECRET}\"\n\
         [compensation]\npending_grace_seconds = 2\nrecovery_interval_millis = 200\n"
    );
    let (mut first, addr) = start_on(dir.path(), &executor, Some(&db.url), &config, port);
    let client = reqwest::Client::new();
    let r = client
        .post(format!("http://{addr}/api/v1/jobs"))
        .json(
            &json!({"name": "streaming", "serviceName": "svc", "handler": "stream",
            "cron": "0 0 0 1 1 ? 2099"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let fired: Value = client
        .post(format!("http://{addr}/api/v1/jobs/streaming/trigger"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let trace = fired[0]["traceId"].as_str().unwrap().to_string();
    let read = |client: reqwest::Client, addr: String, trace: String| async move {
        client
            .get(format!(
                "http://{addr}/api/v1/jobs/executions/{trace}/logs?limit=1000"
            ))
            .send()
            .await
            .ok()?
            .json::<Value>()
            .await
            .ok()
    };
    let messages = |page: &Value| -> Vec<String> {
        page["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["message"].as_str().unwrap().to_string())
            .collect()
    };
    let before = eventually(Duration::from_secs(10), "lines acknowledged", || {
        let (c, a, t) = (client.clone(), addr.clone(), trace.clone());
        async move {
            let page = read(c, a, t).await?;
            (page["lines"].as_array()?.len() >= 5).then_some(page)
        }
    })
    .await;
    let acknowledged = messages(&before);
    assert!(
        acknowledged.len() < 30,
        "killed while the handler still logs"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    let (mut second, addr) = start_on(dir.path(), &executor, Some(&db.url), &config, port);
    let whole = eventually(Duration::from_secs(60), "the whole log", || {
        let (c, a, t) = (client.clone(), addr.clone(), trace.clone());
        async move {
            let page = read(c, a, t).await?;
            (page["complete"] == true).then_some(page)
        }
    })
    .await;
    let all = messages(&whole);
    let expected: Vec<String> = (1..=30).map(|i| format!("line {i}")).collect();
    assert_eq!(all, expected, "whole and in order");
    assert_eq!(
        &all[..acknowledged.len()],
        &acknowledged[..],
        "nothing acknowledged lost"
    );
    second.kill().unwrap();
    second.wait().unwrap();
}

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
