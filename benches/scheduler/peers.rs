//! The peers, firing the same one-second schedule at a recording executor on this machine:
//! tokio-cron-scheduler in-process, and ratchjob (an XXL-JOB-compatible scheduler in Rust,
//! from crates.io) as its own process calling an XXL-JOB-protocol executor.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use chrono::{DateTime, SubsecRound, Utc};
use serde_json::{Value, json};

use crate::Args;
use crate::harness::free_port;
use crate::support::{Call, Calls, DelayStats, own_cpu, proc_usage, record_precision, recorder};

pub(crate) fn print_row(a: &Args, peer: &str, stats: &DelayStats, cpu: f64, rss: f64) {
    let expected = a.jobs * a.shards as usize * a.seconds as usize;
    println!(
        "| peer | jobs | shards | executions | expected | lost | doubled | executions/s | p50 delay | p99 delay | max delay | scheduler CPU | RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {peer} | {} | {} | {} | {expected} | {} | {} | {:.0} | {:.1} ms | {:.1} ms | {:.1} ms | {cpu:.2} | {rss:.0} MiB |",
        a.jobs,
        a.shards,
        stats.executions,
        expected.saturating_sub(stats.executions),
        stats.doubled,
        stats.executions as f64 / a.seconds as f64,
        stats.p(0.5),
        stats.p(0.99),
        stats.max(),
    );
    record_precision(a, peer, "none", stats, cpu, None, rss);
}

/// tokio-cron-scheduler 0.15 in this process (no database, no exactly-once guard, no
/// cluster). Its callback is not told the scheduled instant, so the call carries the second
/// the callback started in: a callback more than a second late would count as on time (the
/// max column shows whether any came near).
pub async fn tokio_cron_scheduler(a: &Args) {
    let (executors, calls) = recorder(1).await;
    println!(
        "# peer-tcs — {} jobs, {} s, tokio-cron-scheduler in-process",
        a.jobs, a.seconds
    );
    let sched = tokio_cron_scheduler::JobScheduler::new().await.unwrap();
    let client = reqwest::Client::new();
    let url = format!("http://{}/internal/job/noop", executors[0]);
    for i in 0..a.jobs {
        let (client, url, name) = (client.clone(), url.clone(), format!("tcs-{i:06}"));
        let job = tokio_cron_scheduler::Job::new_async("* * * * * *", move |_id, _lock| {
            let (client, url, name) = (client.clone(), url.clone(), name.clone());
            Box::pin(async move {
                let fire = Utc::now()
                    .trunc_subsecs(0)
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                let _ = client
                    .post(&url)
                    .header("x-job-name", name)
                    .header("x-fire-time", fire)
                    .body("{}")
                    .send()
                    .await;
            })
        })
        .unwrap();
        sched.add(job).await.unwrap();
    }
    sched.start().await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let from = Utc::now().trunc_subsecs(0) + chrono::Duration::seconds(1);
    let to = from + chrono::Duration::seconds(a.seconds as i64);
    tokio::time::sleep((from - Utc::now()).to_std().unwrap_or_default()).await;
    let (_, cpu0) = proc_usage(std::process::id());
    tokio::time::sleep((to - Utc::now()).to_std().unwrap_or_default()).await;
    let (rss, cpu1) = proc_usage(std::process::id());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stats = DelayStats::of(&calls.lock().unwrap(), from, to);
    // Scheduler and executor share this process: the CPU is both.
    print_row(
        a,
        "tokio-cron-scheduler 0.15",
        &stats,
        (cpu1 - cpu0) / a.seconds as f64,
        rss,
    );
}

fn ratchjob_binary() -> std::path::PathBuf {
    if let Ok(p) = std::env::var("RATCHJOB_BIN") {
        return p.into();
    }
    let p = std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
        .join(".cargo/bin/ratchjob");
    assert!(
        p.is_file(),
        "ratchjob is needed: cargo install ratchjob --locked (scripts/bench.sh does this)"
    );
    p
}

const XXL_TOKEN: &str = "bench-token";

/// What each XXL-JOB executor endpoint shares: where calls are recorded, which instance
/// (shard) it is, and the callbacks waiting to be sent to the admin.
#[derive(Clone)]
struct XxlExecutor {
    calls: Calls,
    index: u32,
    callbacks: Arc<Mutex<Vec<Value>>>,
}

/// `POST /run` of the XXL-JOB executor protocol: answers at once, and reports the result
/// through the admin's callback API, batched (as XXL-JOB's own executor does).
async fn xxl_run(State(x): State<XxlExecutor>, body: axum::Json<Value>) -> axum::Json<Value> {
    let received = Utc::now();
    let fire = DateTime::from_timestamp_millis(body["logDateTime"].as_i64().unwrap_or(0))
        .unwrap_or(received);
    x.calls.lock().unwrap().push(Call {
        job: body["jobId"].to_string(),
        fire,
        shard_start: x.index,
        received,
    });
    x.callbacks.lock().unwrap().push(json!({
        "logId": body["logId"], "logDateTim": body["logDateTime"], "handleCode": 200, "handleMsg": null
    }));
    axum::Json(json!({"code": 200, "msg": null}))
}

struct Ratchjob {
    child: Child,
    api: String,
    /// Its data and its log (`ratchjob.log`).
    dir: tempfile::TempDir,
}

impl Drop for Ratchjob {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_ratchjob() -> Ratchjob {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("ratchjob.log")).unwrap();
    let child = Command::new(ratchjob_binary())
        .current_dir(dir.path())
        .env("RATCH_HTTP_API_PORT", port.to_string())
        .env("RATCH_HTTP_CONSOLE_PORT", free_port().to_string())
        .env("RATCH_GRPC_CLUSTER_PORT", free_port().to_string())
        .env("RATCH_DATA_DIR", dir.path().join("data"))
        .env("RATCH_XXL_DEFAULT_ACCESS_TOKEN", XXL_TOKEN)
        .env("RATCH_GMT_OFFSET_HOURS", "0")
        .env("RUST_LOG", "error")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .expect("start ratchjob");
    // Owned at once, so the process is killed on every path out of here.
    let rj = Ratchjob {
        child,
        api: format!("http://127.0.0.1:{port}"),
        dir,
    };
    let client = reqwest::Client::new();
    for _ in 0..300 {
        if client
            .get(format!("{}/ratch/v1/about", rj.api))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return rj;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("ratchjob did not come up");
}

/// ratchjob fires N jobs on `* * * * * *` (its cron has a seconds field) at `--shards`
/// XXL-JOB executor instances: one instance round-robin, or SHARDING_BROADCAST to all of
/// them when there are several, the XXL-JOB counterpart of one execution per shard.
pub async fn ratchjob(a: &Args) {
    let rj = start_ratchjob().await;
    let (calls, callbacks): (Calls, Arc<Mutex<Vec<Value>>>) = Default::default();
    let client = reqwest::Client::new();
    let mut addrs = Vec::new();
    for index in 0..a.shards {
        let state = XxlExecutor {
            calls: calls.clone(),
            index,
            callbacks: callbacks.clone(),
        };
        let app = Router::new()
            .route("/run", post(xxl_run))
            .route("/beat", post(|| async { axum::Json(json!({"code": 200})) }))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.push(format!("http://{}/", listener.local_addr().unwrap()));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    }
    // Registration every 30 s and result callbacks every 100 ms, as an XXL-JOB executor does.
    {
        let (client, api, addrs, callbacks) = (
            client.clone(),
            rj.api.clone(),
            addrs.clone(),
            callbacks.clone(),
        );
        tokio::spawn(async move {
            let mut tick = 0u64;
            loop {
                if tick.is_multiple_of(300) {
                    for addr in &addrs {
                        let r = client
                            .post(format!("{api}/xxl-job-admin/api/registry"))
                            .header("XXL-JOB-ACCESS-TOKEN", XXL_TOKEN)
                            .json(&json!({"registryGroup": "EXECUTOR", "registryKey": "bench", "registryValue": addr}))
                            .send()
                            .await;
                        assert!(r.is_ok_and(|r| r.status().is_success()), "registry");
                    }
                }
                let batch: Vec<Value> = std::mem::take(&mut *callbacks.lock().unwrap());
                if !batch.is_empty() {
                    let _ = client
                        .post(format!("{api}/xxl-job-admin/api/callback"))
                        .header("XXL-JOB-ACCESS-TOKEN", XXL_TOKEN)
                        .json(&batch)
                        .send()
                        .await;
                }
                tick += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }
    // The executors are registered before any job exists.
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!(
        "# peer-ratchjob — {} jobs × {} shards, {} s window, ratchjob {}",
        a.jobs,
        a.shards,
        a.seconds,
        client
            .get(format!("{}/ratch/v1/about", rj.api))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    );
    let router = if a.shards > 1 {
        "SHARDING_BROADCAST"
    } else {
        "ROUND_ROBIN"
    };
    let started = std::time::Instant::now();
    for i in 0..a.jobs {
        let body = json!({"namespace": "xxl", "appName": "bench", "handleName": "noop",
            "description": format!("bench-{i:06}"), "scheduleType": "CRON", "cronValue": "* * * * * *",
            "routerStrategy": router, "blockingStrategy": "SERIAL_EXECUTION", "enable": true,
            "triggerParam": "", "timeoutSecond": 0, "tryTimes": 0});
        let r: Value = client
            .post(format!("{}/ratch/v1/job/create", rj.api))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["code"], 200, "ratchjob job create: {r}");
    }
    println!(
        "created {} jobs in {:.1} s",
        a.jobs,
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let from = Utc::now().trunc_subsecs(0) + chrono::Duration::seconds(1);
    let to = from + chrono::Duration::seconds(a.seconds as i64);
    tokio::time::sleep((from - Utc::now()).to_std().unwrap_or_default()).await;
    let (_, cpu0) = proc_usage(rj.child.id());
    let exec0 = own_cpu();
    tokio::time::sleep((to - Utc::now()).to_std().unwrap_or_default()).await;
    let (rss, cpu1) = proc_usage(rj.child.id());
    let exec1 = own_cpu();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let stats = DelayStats::of(&calls.lock().unwrap(), from, to);
    print_row(a, "ratchjob", &stats, (cpu1 - cpu0) / a.seconds as f64, rss);
    if stats.executions == 0 {
        // Seen once in a `bench.sh` round: jobs created, nothing called. What ratchjob said
        // (it logs errors only) and what reached the executors goes with the row.
        let received = calls.lock().unwrap().len();
        println!(
            "ratchjob delivered nothing in the window ({received} calls received in all); its log:"
        );
        let log = std::fs::read_to_string(rj.dir.path().join("ratchjob.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        for line in &lines[lines.len().saturating_sub(20)..] {
            println!("  {line}");
        }
    }
    println!(
        "executor (this process) CPU: {:.2} cores",
        (exec1 - exec0) / a.seconds as f64
    );
}
