//! The floor: the same calls with nothing in the way. A process of its own (this binary as
//! `floor-sender`) sends N POSTs at each second boundary with hyper's pooled client, JobFlow's
//! executor client (`--client reqwest`: with reqwest, to price what it adds), carrying the
//! headers and a body like JobFlow's, at most 256 at a time (JobFlow's default
//! `executor.max_in_flight`), to the recording executor every scheduler here is measured
//! with. Its delays are what HTTP alone costs on this machine: every scheduler's figure has
//! its limit beside it.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::json;
use tokio::sync::Semaphore;

use crate::Args;
use crate::peers::print_row;
use crate::support::{DelayStats, own_cpu, proc_usage, recorder};

/// Calls in flight at once, as JobFlow's default `executor.max_in_flight`.
const IN_FLIGHT: usize = 256;

pub async fn floor(a: &Args) {
    let (executors, calls) = recorder(1).await;
    println!(
        "# floor — {} calls at each second boundary for {} s, {} in its own process",
        a.jobs, a.seconds, a.client
    );
    let from = (Utc::now() + chrono::Duration::seconds(2)).trunc_subsecs(0);
    let to = from + chrono::Duration::seconds(a.seconds as i64);
    let mut sender = Command::new(std::env::current_exe().unwrap())
        .args([
            "floor-sender",
            "--jobs",
            &a.jobs.to_string(),
            "--seconds",
            &a.seconds.to_string(),
            "--target",
            &executors[0],
            "--from",
            &from.timestamp().to_string(),
            "--client",
            &a.client,
        ])
        .spawn()
        .expect("start the floor sender");
    let pid = sender.id();
    let mut cpu_rss = (0.0, 0.0);
    // Sample the sender's CPU and RSS just before it exits (it lingers past the window).
    while Utc::now() < to + chrono::Duration::seconds(2) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (rss, cpu) = proc_usage(pid);
        if cpu.is_finite() && rss.is_finite() {
            cpu_rss = (cpu, rss);
        }
    }
    sender.wait().unwrap();
    let stats = DelayStats::of(&calls.lock().unwrap(), from, to);
    print_row(
        a,
        &format!("floor ({})", a.client),
        &stats,
        cpu_rss.0 / a.seconds as f64,
        cpu_rss.1,
    );
}

/// The sender process: N calls at each whole second of the window, then waits for the last
/// answers and lingers briefly so its CPU can be read.
pub async fn sender(a: &Args) {
    let target = a.target.clone().expect("--target ip:port");
    let from = DateTime::from_timestamp(a.from.expect("--from unix seconds"), 0).unwrap();
    let client = Client::new(&a.client);
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let url = format!("http://{target}/internal/job/tick");
    let mut tasks = tokio::task::JoinSet::new();
    for second in 0..a.seconds as i64 {
        let at = from + chrono::Duration::seconds(second);
        if let Ok(wait) = (at - Utc::now()).to_std() {
            tokio::time::sleep(wait).await;
        }
        let fire = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        for job in 0..a.jobs {
            let (client, url, slots, fire) =
                (client.clone(), url.clone(), slots.clone(), fire.clone());
            tasks.spawn(async move {
                let _slot = slots.acquire().await.unwrap();
                let name = format!("floor-{job}");
                let body = json!({
                    "traceId": format!("{job:032x}"), "jobName": name, "executionId": format!("{name}:{fire}:0-0"),
                    "fireTime": fire, "shardStart": 0, "shardEnd": 0, "shardCount": 1,
                    "shardStrategy": "MOD_HASH", "retryCount": 0, "timeoutSeconds": 300,
                    "jobParams": null, "reportUrl": "http://127.0.0.1:1/api/v1/jobs/executions/x/result"
                });
                let headers = [
                    ("x-job-name", name.as_str()),
                    ("x-fire-time", &fire),
                    ("x-shard-start", "0"),
                    ("x-shard-end", "0"),
                    ("x-shard-count", "1"),
                ];
                client.post(&url, &headers, &body).await;
            });
        }
        // Reap the finished calls so the set holds only those in flight.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    eprintln!("floor sender CPU {:.2} s", own_cpu());
    tokio::time::sleep(Duration::from_secs(3)).await;
}

/// The sender's HTTP client: hyper's own (`hyper-util`'s `legacy::Client`, JobFlow's executor
/// client) or reqwest (JobFlow's other clients), each with its pool kept at the calls in
/// flight.
#[derive(Clone)]
enum Client {
    Reqwest(reqwest::Client),
    Hyper(HyperClient),
}

type HyperClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    http_body_util::Full<hyper::body::Bytes>,
>;

impl Client {
    fn new(which: &str) -> Self {
        match which {
            "reqwest" => Self::Reqwest(
                reqwest::Client::builder()
                    .pool_max_idle_per_host(IN_FLIGHT)
                    .build()
                    .unwrap(),
            ),
            "hyper" => Self::Hyper(
                hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                    .pool_max_idle_per_host(IN_FLIGHT)
                    .build_http(),
            ),
            other => panic!("--client {other}: reqwest or hyper"),
        }
    }

    /// POSTs `body` as JSON with `headers`; the answer and any failure are dropped.
    async fn post(&self, url: &str, headers: &[(&str, &str)], body: &serde_json::Value) {
        match self {
            Self::Reqwest(client) => {
                let mut req = client.post(url).json(body);
                for (name, value) in headers {
                    req = req.header(*name, *value);
                }
                let _ = req.send().await;
            }
            Self::Hyper(client) => {
                let mut req = hyper::Request::post(url).header("content-type", "application/json");
                for (name, value) in headers {
                    req = req.header(*name, *value);
                }
                let body = http_body_util::Full::new(serde_json::to_vec(body).unwrap().into());
                let _ = client.request(req.body(body).unwrap()).await;
            }
        }
    }
}
