//! What every scenario uses: the recording executor, a database, the `jobflow` process,
//! job creation through the API, /proc readings and delay statistics.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::Connection;

use crate::harness::MySqlDb;

/// One executor call as the recording executor saw it.
#[derive(Debug, Clone)]
pub struct Call {
    pub job: String,
    pub fire: DateTime<Utc>,
    pub shard_start: u32,
    pub received: DateTime<Utc>,
}

pub type Calls = Arc<Mutex<Vec<Call>>>;

/// A recording executor listening on `ports` addresses of 127.0.0.1 (one per executor
/// instance the scheduler is told about), all recording into one list.
pub async fn recorder(ports: usize) -> (Vec<String>, Calls) {
    let calls: Calls = Arc::default();
    let sink = calls.clone();
    let app = Router::new().route(
        "/internal/job/{handler}",
        post(move |headers: HeaderMap| {
            let sink = sink.clone();
            async move {
                let received = Utc::now();
                let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("");
                let fire = DateTime::parse_from_rfc3339(h("x-fire-time"))
                    .map(|t| t.with_timezone(&Utc))
                    .unwrap_or(received);
                sink.lock().unwrap().push(Call {
                    job: h("x-job-name").to_string(),
                    fire,
                    shard_start: h("x-shard-start").parse().unwrap_or(0),
                    received,
                });
                r#"{"success":true}"#
            }
        }),
    );
    let mut addrs = Vec::with_capacity(ports);
    for _ in 0..ports {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.push(listener.local_addr().unwrap().to_string());
        let app = app.clone();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    }
    (addrs, calls)
}

/// The signing secret of the SDK executors and of the scheduler that calls them.
pub const SDK_SECRET: &str = "bench-signing-secret";

/// As [`recorder`], but each executor is the Rust SDK's (signed calls, logs captured and
/// shipped to the scheduler) with the benchmark's one handler, `noop`, that records its call and logs `lines`
/// lines. The time received is when the handler starts, after the SDK's checks.
pub async fn sdk_recorder(ports: usize, lines: usize) -> (Vec<String>, Calls) {
    use jobflow_executor::logs::log;
    use jobflow_executor::{JobContext, JobExecutor, JobResult};
    use tracing::Level;
    let calls: Calls = Arc::default();
    let mut addrs = Vec::with_capacity(ports);
    for _ in 0..ports {
        let sink = calls.clone();
        let executor =
            JobExecutor::with_secret(SDK_SECRET).handler("noop", move |ctx: JobContext| {
                let sink = sink.clone();
                async move {
                    sink.lock().unwrap().push(Call {
                        job: ctx.job_name.clone(),
                        fire: ctx.fire_time,
                        shard_start: ctx.shard_start,
                        received: Utc::now(),
                    });
                    for i in 1..=lines {
                        log(
                            Level::INFO,
                            format!(
                                "{}: batch {i} of {lines} done, 250 orders synced, 0 skipped",
                                ctx.job_name
                            ),
                        );
                    }
                    JobResult::success("done")
                }
            });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.push(listener.local_addr().unwrap().to_string());
        let app = executor.router();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    }
    (addrs, calls)
}

/// Bytes the database holds for the lines of execution logs (data and indexes, after the
/// statistics are refreshed), and how many lines.
pub async fn log_table_bytes(url: &str) -> (f64, f64) {
    let mut conn = sqlx::MySqlConnection::connect(url).await.unwrap();
    sqlx::query("ANALYZE TABLE job_execution_log_batch")
        .execute(&mut conn)
        .await
        .unwrap();
    let bytes: (i64,) = sqlx::query_as(
        "SELECT CAST(data_length + index_length AS SIGNED) FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name = 'job_execution_log_batch'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    let lines: (i64,) = sqlx::query_as(
        "SELECT CAST(COALESCE(SUM(last_seq - first_seq + 1), 0) AS SIGNED) FROM job_execution_log_batch",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    (bytes.0 as f64, lines.0 as f64)
}

pub struct Database {
    pub url: String,
    /// The server URL without a database, for MySQL/MariaDB.
    pub server: Option<String>,
    /// Dropped (with the database) at the end of the run.
    _mysql: Option<MySqlDb>,
    _dir: Option<tempfile::TempDir>,
}

impl Database {
    /// A temporary SQLite file, or a new database on the MySQL/MariaDB server of
    /// `JOBFLOW_TEST_MYSQL_URL` (default `mysql://root@127.0.0.1:3306`).
    pub async fn create(sqlite: bool) -> Self {
        if sqlite {
            let dir = tempfile::tempdir().unwrap();
            return Self {
                url: format!("sqlite://{}/bench.db", dir.path().display()),
                server: None,
                _mysql: None,
                _dir: Some(dir),
            };
        }
        let db = MySqlDb::create().await;
        Self {
            url: db.url.clone(),
            server: Some(db.server.clone()),
            _mysql: Some(db),
            _dir: None,
        }
    }
}

/// Server-wide statement counters of MySQL/MariaDB (`SHOW GLOBAL STATUS`), to count the
/// statements a run costs. The benchmark is the only client of the server while it runs.
pub async fn server_counters(server: &str) -> HashMap<String, f64> {
    let mut conn = sqlx::MySqlConnection::connect(server).await.unwrap();
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_insert', 'Com_update', \
         'Com_select', 'Com_delete', 'Com_begin', 'Com_commit', 'Com_rollback', 'Com_savepoint', \
         'Com_release_savepoint', 'Com_stmt_prepare', 'Com_stmt_execute', \
         'Com_stmt_close', 'Innodb_data_fsyncs')",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    rows.into_iter()
        .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
        .collect()
}

/// The pid of the local MySQL/MariaDB server, to read its CPU time.
pub fn database_pid() -> Option<u32> {
    ["mariadbd", "mysqld"].iter().find_map(|name| {
        let out = Command::new("pgrep").args(["-x", name]).output().ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    })
}

/// A `jobflow` process started from the release binary.
pub struct Jobflow {
    pub child: Child,
    pub api: String,
    /// From spawning the process to its "listening" log line.
    pub listening_after: Duration,
    _dir: tempfile::TempDir,
}

impl Jobflow {
    /// Standalone, with `executors` as the static instances of service `bench`.
    pub fn start(db: &str, executors: &[String]) -> Self {
        Self::start_with(db, executors, &[])
    }

    /// As [`Jobflow::start`], with extra `JOBFLOW__…` settings (e.g. `[retention]`).
    pub fn start_with(db: &str, executors: &[String], settings: &[(&str, String)]) -> Self {
        let tuned = [
            ("JOBFLOW__DATABASE__MAX_CONNECTIONS", "16".to_string()),
            ("JOBFLOW__LOG__FORMAT", "json".to_string()),
            ("JOBFLOW__LOG__LEVEL", "warn,jobflow::app=info".to_string()),
        ];
        let all: Vec<(&str, String)> = tuned.into_iter().chain(settings.iter().cloned()).collect();
        Self::spawn(db, executors, &all)
    }

    /// As a user runs it: every setting at its default (text logs at INFO, the default
    /// connection pool) but the database, the address and the executors.
    /// `settings` are what the scenario itself needs (a signing secret), nothing tuned.
    pub fn start_default(db: &str, executors: &[String], settings: &[(&str, String)]) -> Self {
        Self::spawn(db, executors, settings)
    }

    fn spawn(db: &str, executors: &[String], settings: &[(&str, String)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("bench.toml");
        let list = executors
            .iter()
            .map(|e| format!("\"{e}\""))
            .collect::<Vec<_>>()
            .join(", ");
        std::fs::write(&config, format!("[executors.static]\nbench = [{list}]\n")).unwrap();
        let started = Instant::now();
        // JOBFLOW_BENCH_BIN measures another build (a baseline) with the same scenario.
        let binary = std::env::var("JOBFLOW_BENCH_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_jobflow").to_string());
        let mut child = Command::new(binary)
            .current_dir(dir.path())
            .args(["--config", config.to_str().unwrap()])
            .env("JOBFLOW__DATABASE__URL", db)
            .env("JOBFLOW__SERVER__HOST", "127.0.0.1")
            .env("JOBFLOW__SERVER__PORT", "0")
            .env_remove("RUST_LOG")
            .envs(settings.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .spawn()
            .expect("start jobflow");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let api = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| listening_addr(&l))
            .expect("jobflow listening");
        let listening_after = started.elapsed();
        std::thread::spawn(move || lines.for_each(drop));
        Self {
            child,
            api,
            listening_after,
            _dir: dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, and waits for the exit.
    pub fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// The address of the "JobFlow listening" line, logged as JSON or as text.
fn listening_addr(line: &str) -> Option<String> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
        if v["message"] != "JobFlow listening" {
            return None;
        }
        return v["addr"].as_str().map(str::to_string);
    }
    if !line.contains("JobFlow listening") {
        return None;
    }
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("addr="))?;
    Some(addr.to_string())
}

impl Drop for Jobflow {
    /// A benchmark that panics must not leave the instance running.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The paths the operator of [`read_api_until`] reads, in turn.
pub const API_READS: [&str; 3] = [
    "/api/v1/jobs/bench-000001",
    "/api/v1/jobs/bench-000002/executions?page=0&size=20",
    "/api/v1/jobs?page=0&size=20",
];

/// One answer of [`read_api_until`]: which path of [`API_READS`], how far into its second
/// the request was sent (ms), and how long the answer took (ms).
#[derive(Debug, Clone, Copy)]
pub struct ApiRead {
    pub path: usize,
    pub sent_ms: u32,
    pub took_ms: f64,
}

/// An operator reading the API while a run goes on: a job, its executions, the job list, one
/// after the other every 50 ms until `stop`; every answer, slowest last. The operator runs on
/// a thread and runtime of its own, as a browser would be a process of its own: on the
/// harness's runtime its answers would wait behind the recording executor's tasks (10,000
/// calls a second at the largest size), and the figure would be the harness's queue.
pub async fn read_api_until(api: String, stop: DateTime<Utc>) -> Vec<ApiRead> {
    apart("api-operator", move || operator_reads(api, stop)).await
}

/// What `work` comes to, run on a thread and current-thread runtime of its own.
async fn apart<T, F>(name: &str, work: impl FnOnce() -> F + Send + 'static) -> T
where
    T: Send + 'static,
    F: std::future::Future<Output = T>,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime of its own");
            let _ = tx.send(rt.block_on(work()));
        })
        .expect("a thread of its own");
    rx.await.expect("the work apart ended")
}

async fn operator_reads(api: String, stop: DateTime<Utc>) -> Vec<ApiRead> {
    let client = reqwest::Client::new();
    in_turn_until(stop, async |i| {
        let path = API_READS[i];
        let ok = client
            .get(format!("http://{api}{path}"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        assert!(ok, "GET {path} failed during the run");
    })
    .await
}

/// Reads path 0, 1, 2 of [`API_READS`] in turn with `read`, 50 ms apart, until `stop`; how
/// long each took, slowest last.
async fn in_turn_until(stop: DateTime<Utc>, mut read: impl AsyncFnMut(usize)) -> Vec<ApiRead> {
    let mut took = Vec::new();
    for i in (0..API_READS.len()).cycle() {
        let sent = Utc::now();
        if sent >= stop {
            break;
        }
        let start = Instant::now();
        read(i).await;
        took.push(ApiRead {
            path: i,
            sent_ms: sent.timestamp_subsec_millis(),
            took_ms: start.elapsed().as_secs_f64() * 1000.0,
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    took.sort_by(|a, b| a.took_ms.total_cmp(&b.took_ms));
    took
}

/// The statements JobFlow's store sends for each path of [`API_READS`] (`SqlStore::get_job`,
/// `list_executions`, `list_jobs` in the default namespace), literals in place of binds.
const DATABASE_READS: [&[&str]; API_READS.len()] = [
    &["SELECT * FROM job_definition WHERE name = 'bench-000001'"],
    &[
        "SELECT COUNT(*) FROM job_execution WHERE job_name = 'bench-000002'",
        "SELECT * FROM job_execution WHERE job_name = 'bench-000002' \
         ORDER BY trigger_time DESC, id DESC LIMIT 20 OFFSET 0",
    ],
    &[
        "SELECT COUNT(*) FROM job_definition WHERE 1 = 1 AND namespace = 'default'",
        "SELECT * FROM job_definition WHERE 1 = 1 AND namespace = 'default' \
         ORDER BY name LIMIT 20 OFFSET 0",
    ],
];

/// The API reads' floor: the statements behind each of [`API_READS`], sent straight to the
/// database by a client of its own (a thread and connection of its own, no JobFlow in the
/// way), on the same rhythm and in the same window. What the database alone answers on the
/// busy box bounds what any API in front of it can.
pub async fn read_database_until(url: String, stop: DateTime<Utc>) -> Vec<ApiRead> {
    apart("db-operator", move || database_reads(url, stop)).await
}

/// One connection to the benchmark's database, either kind.
enum Reader {
    MySql(sqlx::MySqlConnection),
    Sqlite(sqlx::SqliteConnection),
}

impl Reader {
    async fn connect(url: &str) -> Self {
        use sqlx::ConnectOptions;
        if url.starts_with("sqlite:") {
            let opts: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
            Self::Sqlite(opts.read_only(true).connect().await.unwrap())
        } else {
            Self::MySql(sqlx::MySqlConnection::connect(url).await.unwrap())
        }
    }

    async fn read(&mut self, statement: &'static str) {
        let rows = match self {
            Self::MySql(c) => sqlx::raw_sql(statement).fetch_all(c).await.map(|r| r.len()),
            Self::Sqlite(c) => sqlx::raw_sql(statement).fetch_all(c).await.map(|r| r.len()),
        };
        assert!(rows.is_ok_and(|n| n > 0), "{statement} read nothing");
    }
}

async fn database_reads(url: String, stop: DateTime<Utc>) -> Vec<ApiRead> {
    let mut reader = Reader::connect(&url).await;
    in_turn_until(stop, async |i| {
        for statement in DATABASE_READS[i] {
            reader.read(statement).await;
        }
    })
    .await
}

/// The line the benchmark prints for the reads of [`read_api_until`]: all of them, each path,
/// and the slowest five with when in their second they were sent.
pub fn api_reads_line(reads: &[ApiRead]) -> String {
    reads_line("API reads during the window", reads)
}

/// The same for [`read_database_until`]'s reads.
pub fn database_reads_line(reads: &[ApiRead]) -> String {
    reads_line(
        "the same reads straight from the database, no JobFlow in the way",
        reads,
    )
}

fn reads_line(title: &str, reads: &[ApiRead]) -> String {
    let summary = |v: Vec<f64>| {
        format!(
            "{}, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            v.len(),
            percentile(&v, 0.5),
            percentile(&v, 0.99),
            v.last().copied().unwrap_or(f64::NAN)
        )
    };
    let mut line = format!(
        "{title}: {}",
        summary(reads.iter().map(|r| r.took_ms).collect())
    );
    for (i, path) in API_READS.iter().enumerate() {
        let of_path = reads.iter().filter(|r| r.path == i).map(|r| r.took_ms);
        line.push_str(&format!("\n  {path}: {}", summary(of_path.collect())));
    }
    let slowest: Vec<String> = reads
        .iter()
        .rev()
        .take(5)
        .map(|r| {
            format!(
                "{:.0} ms (path {}, sent at +{} ms)",
                r.took_ms, r.path, r.sent_ms
            )
        })
        .collect();
    line.push_str(&format!("\n  slowest: {}", slowest.join(", ")));
    line
}

/// Creates `n` jobs named `bench-000000`… through the API, 16 requests at a time. `cron` may
/// hold `{s}` `{m}` `{h}`: second, minute and hour values derived from the job's index, so
/// every job gets its own expression. `overlap` is the jobs' `overlapPolicy`.
pub async fn create_jobs(api: &str, n: usize, cron: &str, shards: u32, overlap: &str) -> Duration {
    let client = reqwest::Client::new();
    let start = Instant::now();
    let sem = Arc::new(tokio::sync::Semaphore::new(16));
    let mut tasks = Vec::new();
    for i in 0..n {
        let (client, api, cron, sem, overlap) = (
            client.clone(),
            api.to_string(),
            cron.to_string(),
            sem.clone(),
            overlap.to_string(),
        );
        tasks.push(tokio::spawn(async move {
            let _p = sem.acquire().await.unwrap();
            let cron = cron
                .replace("{s}", &(i % 60).to_string())
                .replace("{m}", &(i / 60 % 60).to_string())
                .replace("{h}", &(i / 3600 % 24).to_string());
            let body = json!({"name": format!("bench-{i:06}"), "serviceName": "bench",
                "handler": "noop", "cron": cron, "maxRetry": 0, "shardCount": shards,
                "overlapPolicy": overlap});
            let r = client
                .post(format!("http://{api}/api/v1/jobs"))
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

/// (RSS in MiB, CPU seconds used so far) of a process, from /proc.
pub fn proc_usage(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let ticks = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            let f: Vec<&str> = rest.split_whitespace().collect();
            f[11].parse::<f64>().unwrap_or(0.0) + f[12].parse::<f64>().unwrap_or(0.0)
        })
        .unwrap_or(f64::NAN);
    (rss_kb / 1024.0, ticks / 100.0)
}

/// CPU seconds used so far by this (benchmark) process: the recording executor's share.
pub fn own_cpu() -> f64 {
    proc_usage(std::process::id()).1
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Delay statistics of the calls whose scheduled instant lies in `[from, to)`.
pub struct DelayStats {
    /// Distinct (job, instant, range) executions among them.
    pub executions: usize,
    pub doubled: usize,
    pub delays: Vec<f64>,
    /// Distinct executions delivered for each whole-second instant of the window, in order:
    /// where in it the fires not delivered were.
    pub per_instant: Vec<usize>,
    /// The delays of the calls of each whole-second instant of the window, sorted: when in
    /// it the tail was.
    pub per_instant_delays: Vec<Vec<f64>>,
}

impl DelayStats {
    pub fn of(calls: &[Call], from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        let mut per_execution: HashMap<(&str, DateTime<Utc>, u32), usize> = HashMap::new();
        let mut delays = Vec::new();
        let instants = (to - from).num_seconds().max(0) as usize;
        let mut per_instant_delays = vec![Vec::new(); instants];
        for c in calls.iter().filter(|c| c.fire >= from && c.fire < to) {
            *per_execution
                .entry((c.job.as_str(), c.fire, c.shard_start))
                .or_default() += 1;
            let delay = (c.received - c.fire).num_microseconds().unwrap() as f64 / 1000.0;
            delays.push(delay);
            per_instant_delays[(c.fire - from).num_seconds() as usize].push(delay);
        }
        delays.sort_by(|x, y| x.partial_cmp(y).unwrap());
        for d in &mut per_instant_delays {
            d.sort_by(|x, y| x.partial_cmp(y).unwrap());
        }
        let mut per_instant = vec![0; instants];
        for (_, fire, _) in per_execution.keys() {
            per_instant[(*fire - from).num_seconds() as usize] += 1;
        }
        Self {
            executions: per_execution.len(),
            doubled: per_execution.values().filter(|n| **n > 1).count(),
            delays,
            per_instant,
            per_instant_delays,
        }
    }

    /// "p50/max" of each instant's delays in ms, in order.
    pub fn per_instant_line(&self) -> String {
        let each: Vec<String> = self
            .per_instant_delays
            .iter()
            .map(|d| {
                let max = d.last().copied().unwrap_or(f64::NAN);
                format!("{:.0}/{max:.0}", percentile(d, 0.5))
            })
            .collect();
        each.join(" ")
    }

    pub fn p(&self, p: f64) -> f64 {
        percentile(&self.delays, p)
    }

    pub fn max(&self) -> f64 {
        self.delays.last().copied().unwrap_or(f64::NAN)
    }
}

/// Appends `line` to `{out}/{file}` when the run was given `--out`, for the plot script.
pub fn record(out: Option<&std::path::Path>, file: &str, header: &str, line: &str) {
    let Some(dir) = out else { return };
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(file);
    let fresh = !path.exists();
    let mut text = String::new();
    if fresh {
        text.push_str(header);
        text.push('\n');
    }
    text.push_str(line);
    text.push('\n');
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

/// The sum of every series of a Prometheus counter whose labels contain `label` (e.g.
/// `action="skipped"`), read from the instance's `/metrics`.
pub async fn metric_sum(api: &str, name: &str, label: &str) -> f64 {
    let text = reqwest::get(format!("http://{api}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{') && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// One line of `precision.csv` (the plot's input), the same for JobFlow and the peers.
pub fn record_precision(
    a: &crate::Args,
    scheduler: &str,
    backend: &str,
    stats: &DelayStats,
    cpu: f64,
    cpu_db: Option<f64>,
    rss: f64,
) {
    let expected = a.jobs * a.shards as usize * a.seconds as usize;
    let cpu_db = cpu_db.map(|c| format!("{c:.3}")).unwrap_or_default();
    record(
        a.out.as_deref(),
        "precision.csv",
        "scheduler,backend,jobs,shards,seconds,executions,expected,doubled,p50_ms,p99_ms,max_ms,cpu_scheduler,cpu_db,rss_mib",
        &format!(
            "{scheduler},{backend},{},{},{},{},{expected},{},{:.1},{:.1},{:.1},{cpu:.3},{cpu_db},{rss:.1}",
            a.jobs,
            a.shards,
            a.seconds,
            stats.executions,
            stats.doubled,
            stats.p(0.5),
            stats.p(0.99),
            stats.max(),
        ),
    );
}
