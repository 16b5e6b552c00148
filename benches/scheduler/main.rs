//! Scheduler benchmarks against the real `jobflow` binary (release build), a MySQL/MariaDB
//! database and an in-process recording executor on 127.0.0.1.
//!
//! ```text
//! cargo bench --bench scheduler -- precision --jobs 300 --seconds 20
//! cargo bench --bench scheduler -- idle --jobs 10000 --seconds 30
//! ```
//! `--sqlite` runs on a temporary SQLite file instead; `JOBFLOW_BENCH_MYSQL_URL` picks the
//! server (default `mysql://root@127.0.0.1:3306`; a database is created and dropped).
//!
//! - precision: N jobs on a one-second cron; the delay from each scheduled instant to the
//!   executor receiving the call (p50, p99, max), and fires lost or doubled.
//! - idle: N enabled jobs that do not fire during the run; RSS and CPU of the instance.
//! - burst: N jobs all due at the same instant (second 0 of the next minute that leaves time
//!   to create them): when the last call arrives, and how many never do.
//! - peer-tcs: the same one-second schedule fired by tokio-cron-scheduler in-process at the
//!   same recording executor (`cargo bench --bench scheduler -- peer-tcs --jobs 300`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use chrono::{DateTime, Timelike, Utc};
use serde_json::json;
use sqlx::Connection;

#[derive(Debug)]
struct Args {
    scenario: String,
    jobs: usize,
    seconds: u64,
    sqlite: bool,
    /// idle: every job gets its own cron expression (no sharing of parsed patterns).
    distinct: bool,
}

fn args() -> Args {
    let mut a = Args {
        scenario: "precision".into(),
        jobs: 300,
        seconds: 20,
        sqlite: false,
        distinct: false,
    };
    let mut it = std::env::args().skip(1).filter(|s| s != "--bench");
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--jobs" => a.jobs = it.next().and_then(|v| v.parse().ok()).expect("--jobs N"),
            "--seconds" => a.seconds = it.next().and_then(|v| v.parse().ok()).expect("--seconds N"),
            "--sqlite" => a.sqlite = true,
            "--distinct" => a.distinct = true,
            "precision" | "idle" | "peer-tcs" | "burst" => a.scenario = arg,
            other => panic!("unknown argument {other}; see the module docs"),
        }
    }
    a
}

type Calls = Arc<Mutex<Vec<(String, DateTime<Utc>, DateTime<Utc>)>>>;

async fn recorder() -> (String, Calls) {
    let calls: Calls = Arc::default();
    let sink = calls.clone();
    let app = Router::new().route(
        "/internal/job/{handler}",
        post(move |headers: HeaderMap| {
            let sink = sink.clone();
            async move {
                let now = Utc::now();
                let h = |n: &str| {
                    headers
                        .get(n)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string()
                };
                let fire = DateTime::parse_from_rfc3339(&h("x-fire-time"))
                    .map(|t| t.with_timezone(&Utc))
                    .unwrap_or(now);
                sink.lock().unwrap().push((h("x-job-name"), fire, now));
                r#"{"success":true}"#
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, calls)
}

struct Database {
    url: String,
    drop_name: Option<String>,
    _dir: Option<tempfile::TempDir>,
}

impl Database {
    async fn create(sqlite: bool) -> Self {
        if sqlite {
            let dir = tempfile::tempdir().unwrap();
            return Self {
                url: format!("sqlite://{}/bench.db", dir.path().display()),
                drop_name: None,
                _dir: Some(dir),
            };
        }
        let server = std::env::var("JOBFLOW_BENCH_MYSQL_URL")
            .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".into());
        let name = format!("jobflow_bench_{:08x}", rand::random::<u32>());
        let mut conn = sqlx::MySqlConnection::connect(&server)
            .await
            .expect("MySQL/MariaDB for the benchmark");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .execute(&mut conn)
            .await
            .unwrap();
        Self {
            url: format!("{server}/{name}"),
            drop_name: Some(name),
            _dir: None,
        }
    }

    async fn drop_db(&self) {
        if let Some(name) = &self.drop_name {
            let server = self.url.rsplit_once('/').unwrap().0;
            let mut conn = sqlx::MySqlConnection::connect(server).await.unwrap();
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE `{name}`")))
                .execute(&mut conn)
                .await
                .unwrap();
        }
    }
}

/// Starts the release binary and returns it with its HTTP address once it listens.
fn start_jobflow(db: &str, executor: &str, dir: &std::path::Path) -> (Child, String) {
    let config = dir.join("bench.toml");
    std::fs::write(
        &config,
        format!("[executors.static]\nbench = [\"{executor}\"]\n"),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_jobflow"))
        .current_dir(dir)
        .args(["--config", config.to_str().unwrap()])
        .env("JOBFLOW__DATABASE__URL", db)
        .env("JOBFLOW__DATABASE__MAX_CONNECTIONS", "16")
        .env("JOBFLOW__SERVER__HOST", "127.0.0.1")
        .env("JOBFLOW__SERVER__PORT", "0")
        .env("JOBFLOW__LOG__FORMAT", "json")
        .env("JOBFLOW__LOG__LEVEL", "warn,jobflow::app=info")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start jobflow");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(&l).ok()?;
            (v["message"] == "JobFlow listening").then(|| v["addr"].as_str().unwrap().to_string())
        })
        .expect("jobflow listening");
    std::thread::spawn(move || lines.for_each(drop));
    (child, addr)
}

/// `cron` may contain `{i}`-style placeholders: `{s}` `{m}` `{h}` take second, minute and hour
/// values derived from the job's index, so every job gets its own expression.
async fn create_jobs(api: &str, n: usize, cron: &str) -> Duration {
    let client = reqwest::Client::new();
    let start = Instant::now();
    let sem = Arc::new(tokio::sync::Semaphore::new(16));
    let mut tasks = Vec::new();
    for i in 0..n {
        let (client, api, cron, sem) = (
            client.clone(),
            api.to_string(),
            cron.to_string(),
            sem.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let _p = sem.acquire().await.unwrap();
            let cron = cron.replace("{s}", &(i % 60).to_string()).replace("{m}", &(i / 60 % 60).to_string()).replace("{h}", &(i / 3600 % 24).to_string());
            let body = json!({"name": format!("bench-{i:06}"), "serviceName": "bench", "handler": "noop", "cron": cron, "maxRetry": 0});
            let r = client.post(format!("http://{api}/api/v1/jobs")).json(&body).send().await.unwrap();
            assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

/// (RSS in MiB, CPU seconds used so far) from /proc.
fn proc_usage(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss_kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    (rss_kb / 1024.0, ticks / 100.0)
}

/// Delay statistics of the calls whose scheduled instant lies in `[from, to)`.
struct DelayStats {
    fires: usize,
    doubled: usize,
    p50: f64,
    p99: f64,
    max: f64,
}

impl DelayStats {
    fn of(
        calls: &[(String, DateTime<Utc>, DateTime<Utc>)],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Self {
        let mut per_fire: HashMap<(String, DateTime<Utc>), usize> = HashMap::new();
        let mut delays = Vec::new();
        for (job, fire, received) in calls {
            if *fire >= from && *fire < to {
                *per_fire.entry((job.clone(), *fire)).or_default() += 1;
                delays.push((*received - *fire).num_microseconds().unwrap() as f64 / 1000.0);
            }
        }
        delays.sort_by(|x, y| x.partial_cmp(y).unwrap());
        Self {
            fires: delays.len(),
            doubled: per_fire.values().filter(|n| **n > 1).count(),
            p50: percentile(&delays, 0.5),
            p99: percentile(&delays, 0.99),
            max: delays.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// The peer: tokio-cron-scheduler, in-process (no database, no cluster), firing the same
/// one-second schedule at the same recording executor. Its callback does not learn the
/// scheduled instant, so the call carries the second the callback started in: a callback
/// more than a second late would be counted as on time (none were in our runs: see max).
async fn peer_tokio_cron_scheduler(a: &Args, executor: &str, calls: &Calls) {
    use chrono::SubsecRound;
    let sched = tokio_cron_scheduler::JobScheduler::new().await.unwrap();
    let client = reqwest::Client::new();
    let url = format!("http://{executor}/internal/job/noop");
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
    let from = Utc::now();
    tokio::time::sleep(Duration::from_secs(a.seconds)).await;
    let to = Utc::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let stats = DelayStats::of(&calls.lock().unwrap(), from, to);
    println!(
        "| peer | jobs | fires measured | expected | doubled | p50 delay | p99 delay | max delay |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| tokio-cron-scheduler 0.15 | {} | {} | ~{} | {} | {:.1} ms | {:.1} ms | {:.1} ms |",
        a.jobs,
        stats.fires,
        a.jobs * (to - from).num_seconds() as usize,
        stats.doubled,
        stats.p50,
        stats.p99,
        stats.max
    );
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let a = args();
    let (executor, calls) = recorder().await;
    if a.scenario == "peer-tcs" {
        println!(
            "# peer-tcs — {} jobs, {} s, in-process tokio-cron-scheduler",
            a.jobs, a.seconds
        );
        return peer_tokio_cron_scheduler(&a, &executor, &calls).await;
    }
    let db = Database::create(a.sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let (mut child, api) = start_jobflow(&db.url, &executor, dir.path());
    let ready_ms = started.elapsed().as_millis();
    let backend = if a.sqlite { "SQLite" } else { "MariaDB" };
    println!(
        "# {} — {} jobs, {} s, {backend}; start-up to listening {ready_ms} ms",
        a.scenario, a.jobs, a.seconds
    );

    match a.scenario.as_str() {
        "precision" => {
            let took = create_jobs(&api, a.jobs, "* * * * * ?").await;
            println!("created {} jobs in {:.1} s", a.jobs, took.as_secs_f64());
            // Skip the first seconds: jobs are still being picked up.
            tokio::time::sleep(Duration::from_secs(3)).await;
            let window_start = Utc::now();
            let (_, cpu0) = proc_usage(child.id());
            tokio::time::sleep(Duration::from_secs(a.seconds)).await;
            let window_end = Utc::now();
            let (rss, cpu1) = proc_usage(child.id());
            tokio::time::sleep(Duration::from_secs(3)).await;
            let stats = DelayStats::of(&calls.lock().unwrap(), window_start, window_end);
            println!(
                "| jobs | fires measured | expected | doubled | p50 delay | p99 delay | max delay | CPU (cores) | RSS |"
            );
            println!("|---|---|---|---|---|---|---|---|---|");
            println!(
                "| {} | {} | ~{} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.2} | {:.0} MiB |",
                a.jobs,
                stats.fires,
                a.jobs * (window_end - window_start).num_seconds() as usize,
                stats.doubled,
                stats.p50,
                stats.p99,
                stats.max,
                (cpu1 - cpu0) / a.seconds as f64,
                rss
            );
        }
        "burst" => {
            let took = create_jobs(&api, a.jobs, "0 * * * * ?").await;
            println!("created {} jobs in {:.1} s", a.jobs, took.as_secs_f64());
            // The next minute boundary at least 5 s away: every job is loaded by then.
            let now = Utc::now();
            let mut instant = now.with_second(0).unwrap().with_nanosecond(0).unwrap()
                + chrono::Duration::minutes(1);
            if instant - now < chrono::Duration::seconds(5) {
                instant += chrono::Duration::minutes(1);
            }
            let (_, cpu0) = proc_usage(child.id());
            tokio::time::sleep(
                (instant - Utc::now()).to_std().unwrap() + Duration::from_secs(a.seconds),
            )
            .await;
            let (rss, cpu1) = proc_usage(child.id());
            let calls = calls.lock().unwrap().clone();
            let mut delays: Vec<f64> = calls
                .iter()
                .filter(|(_, fire, _)| *fire == instant)
                .map(|(_, fire, received)| {
                    (*received - *fire).num_microseconds().unwrap() as f64 / 1000.0
                })
                .collect();
            delays.sort_by(|x, y| x.partial_cmp(y).unwrap());
            println!(
                "| jobs due at one instant | dispatched | missing | first call | p50 | p99 | last call | CPU (cores, during) | RSS |"
            );
            println!("|---|---|---|---|---|---|---|---|---|");
            println!(
                "| {} | {} | {} | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms | {:.2} | {:.0} MiB |",
                a.jobs,
                delays.len(),
                a.jobs - delays.len().min(a.jobs),
                delays.first().copied().unwrap_or(f64::NAN),
                percentile(&delays, 0.5),
                percentile(&delays, 0.99),
                delays.last().copied().unwrap_or(f64::NAN),
                (cpu1 - cpu0)
                    / ((instant - Utc::now()).num_seconds().abs() as f64 + a.seconds as f64)
                        .max(1.0),
                rss
            );
        }
        "idle" => {
            // Once a year (Jan 1st): nothing fires during the run.
            let cron = if a.distinct {
                "{s} {m} {h} 1 1 ?"
            } else {
                "0 0 3 1 1 ?"
            };
            let took = create_jobs(&api, a.jobs, cron).await;
            println!("created {} jobs in {:.1} s", a.jobs, took.as_secs_f64());
            tokio::time::sleep(Duration::from_secs(5)).await;
            let (_, cpu0) = proc_usage(child.id());
            tokio::time::sleep(Duration::from_secs(a.seconds)).await;
            let (rss, cpu1) = proc_usage(child.id());
            println!(
                "| enabled jobs | cron expressions | RSS | CPU (% of one core, {} s idle) |",
                a.seconds
            );
            println!("|---|---|---|---|");
            let exprs = if a.distinct {
                a.jobs.to_string()
            } else {
                "1 shared".into()
            };
            println!(
                "| {} | {exprs} | {:.1} MiB | {:.2} % |",
                a.jobs,
                rss,
                (cpu1 - cpu0) / a.seconds as f64 * 100.0
            );
        }
        _ => unreachable!(),
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    db.drop_db().await;
}
