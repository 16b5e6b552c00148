//! Scheduler benchmarks against the real `jobflow` binary (release build), a MySQL/MariaDB
//! database on this machine and a recording executor on 127.0.0.1, side by side with the
//! peers users would pick instead. `scripts/bench.sh` runs them all; one scenario at a time:
//!
//! ```text
//! cargo bench --bench scheduler -- precision --jobs 1000 --seconds 20 [--shards 10] [--sqlite] [--overlap SKIP] [--log-lines 10] [--no-reads]
//! cargo bench --bench scheduler -- throughput --jobs 1000 --shards 10      # 300 s window
//! cargo bench --bench scheduler -- burst --jobs 10000
//! cargo bench --bench scheduler -- idle --jobs 10000 [--distinct]
//! cargo bench --bench scheduler -- startup --runs 5
//! cargo bench --bench scheduler -- cluster --instances 3 --strategy rendezvous --jobs 300
//! cargo bench --bench scheduler -- peer-tcs --jobs 1000
//! cargo bench --bench scheduler -- peer-ratchjob --jobs 1000 [--shards 10] [--seconds 300]
//! cargo bench --bench scheduler -- floor --jobs 1000 [--client reqwest]
//! cargo bench --bench scheduler -- retention --rows 10000000 --jobs 1000 --seconds 60 --pairs 3 [--buffer-pool-mib 6144]
//! cargo bench --bench scheduler -- search --rows 20000000 --jobs 1000 --runs 20 [--buffer-pool-mib 6144]
//! ```
//! `--out DIR` appends each result as a CSV line under DIR (the plot script reads them).
//! `JOBFLOW_TEST_MYSQL_URL` picks the server (default `mysql://root@127.0.0.1:3306`; a
//! database is created and dropped per run). `JOBFLOW_BENCH_BIN` measures another `jobflow`
//! build (a baseline) with the same scenario.
//!
//! - precision / throughput: N jobs on a one-second cron with S shards over S executor
//!   instances; delay from each scheduled instant to the executor receiving the call, the
//!   executions per second delivered, fires lost or doubled, CPU of JobFlow, of the database
//!   and of the executor, and the database statements, commits and log fsyncs per fire.
//!   With `--log-lines N` the executor is the Rust SDK's (signed calls), its handler logs N
//!   lines per execution that the SDK ships to the scheduler (0: the same executor logging
//!   nothing, the baseline), and the run also reports the log's database bytes per line.
//! - burst: N jobs due at the same instant: when the last call arrives, how many never do.
//! - idle: N enabled jobs that do not fire during the run; RSS and CPU of the instance.
//! - startup: process start to listening and to ready, on an empty database.
//! - cluster: M instances on rnacos: the share of jobs changing owner when one joins, and
//!   the takeover after `kill -9` of one.
//! - peer-tcs: the one-second schedule fired by tokio-cron-scheduler in-process.
//! - retention: a table of `--rows` executions older than the retention window, purged
//!   while `--jobs` one-second jobs run; their delay with retention off and on, in
//!   alternating windows, and the purge's rate and duration (MySQL/MariaDB only).
//! - search: `GET /api/v1/executions` with each filter on a table of `--rows` executions,
//!   `--runs` times each: the first (cold) answer, median, p90 and max (MySQL/MariaDB only).
//! - peer-ratchjob: the one-second schedule fired by ratchjob (`cargo install ratchjob`) at an
//!   XXL-JOB-protocol executor.
//! - floor: the same calls sent at each second boundary by a process doing nothing else
//!   (hyper's client, JobFlow's; `--client reqwest`: reqwest), the limit every figure is
//!   compared with.

mod cluster;
mod floor;
#[path = "../../tests/cluster/harness.rs"]
#[allow(dead_code)]
mod harness;
mod peers;
mod retention;
mod search;
mod single;
mod support;

use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct Args {
    pub scenario: String,
    pub jobs: usize,
    pub seconds: u64,
    pub shards: u32,
    pub sqlite: bool,
    /// idle: every job gets its own cron expression (no sharing of parsed patterns).
    pub distinct: bool,
    pub runs: usize,
    pub instances: usize,
    pub strategy: String,
    pub out: Option<PathBuf>,
    /// floor-sender: the recorder's address and the first whole second (Unix time).
    pub target: Option<String>,
    pub from: Option<i64>,
    /// retention: rows older than the window in the table at the start; search: rows.
    pub rows: u64,
    /// retention: A/B window pairs before B runs on alone until the purge is done.
    pub pairs: usize,
    /// retention: at most this long with the purge running.
    pub max_seconds: u64,
    /// retention, search: the server's InnoDB buffer pool for the run (MiB; restored after), instead
    /// of whatever it has.
    pub buffer_pool_mib: Option<u64>,
    /// precision: the jobs' `overlapPolicy` (SKIP and COVER jobs are judged and recorded at
    /// their instant; ALLOW jobs are claimed ahead).
    pub overlap: String,
    /// precision: executors built on the Rust SDK whose handlers log this many lines.
    pub log_lines: Option<usize>,
    /// floor: the HTTP client that sends the calls, `hyper` (JobFlow's) or `reqwest`.
    pub client: String,
    /// precision: the operator's reads and the database's beside them (`--no-reads`: none,
    /// to price the fire path alone).
    pub reads: bool,
}

fn args() -> Args {
    let mut a = Args {
        scenario: "precision".into(),
        jobs: 300,
        seconds: 20,
        shards: 1,
        sqlite: false,
        distinct: false,
        runs: 5,
        instances: 3,
        strategy: "java-hash".into(),
        out: None,
        target: None,
        from: None,
        rows: 10_000_000,
        pairs: 3,
        max_seconds: 3600,
        buffer_pool_mib: None,
        overlap: "ALLOW".into(),
        log_lines: None,
        client: "hyper".into(),
        reads: true,
    };
    let mut seconds = None;
    let mut it = std::env::args().skip(1).filter(|s| s != "--bench");
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().unwrap_or_else(|| panic!("{name} needs a value"));
        match arg.as_str() {
            "--jobs" => a.jobs = value("--jobs").parse().expect("--jobs N"),
            "--seconds" => seconds = Some(value("--seconds").parse().expect("--seconds N")),
            "--shards" => a.shards = value("--shards").parse().expect("--shards N"),
            "--runs" => a.runs = value("--runs").parse().expect("--runs N"),
            "--instances" => a.instances = value("--instances").parse().expect("--instances N"),
            "--strategy" => a.strategy = value("--strategy"),
            "--out" => a.out = Some(value("--out").into()),
            "--target" => a.target = Some(value("--target")),
            "--from" => a.from = Some(value("--from").parse().expect("--from SECONDS")),
            "--rows" => a.rows = value("--rows").parse().expect("--rows N"),
            "--no-reads" => a.reads = false,
            "--pairs" => a.pairs = value("--pairs").parse().expect("--pairs N"),
            "--max-seconds" => {
                a.max_seconds = value("--max-seconds").parse().expect("--max-seconds N")
            }
            "--buffer-pool-mib" => {
                a.buffer_pool_mib = Some(
                    value("--buffer-pool-mib")
                        .parse()
                        .expect("--buffer-pool-mib N"),
                )
            }
            "--overlap" => a.overlap = value("--overlap"),
            "--log-lines" => {
                a.log_lines = Some(value("--log-lines").parse().expect("--log-lines N"))
            }
            "--sqlite" => a.sqlite = true,
            "--distinct" => a.distinct = true,
            "--client" => a.client = value("--client"),
            "precision" | "throughput" | "burst" | "idle" | "startup" | "cluster" | "peer-tcs"
            | "peer-ratchjob" | "floor" | "floor-sender" | "retention" | "search" => {
                a.scenario = arg
            }
            other => panic!("unknown argument {other}; see the module docs"),
        }
    }
    a.seconds = seconds.unwrap_or(match a.scenario.as_str() {
        "throughput" => 300,
        "idle" | "burst" => 30,
        "retention" => 60,
        _ => 20,
    });
    a
}

#[tokio::main]
async fn main() {
    let a = args();
    match a.scenario.as_str() {
        "precision" | "throughput" => single::precision(&a).await,
        "burst" => single::burst(&a).await,
        "idle" => single::idle(&a).await,
        "startup" => single::startup(&a).await,
        "cluster" => cluster::run(&a).await,
        "peer-tcs" => peers::tokio_cron_scheduler(&a).await,
        "peer-ratchjob" => peers::ratchjob(&a).await,
        "floor" => floor::floor(&a).await,
        "floor-sender" => floor::sender(&a).await,
        "retention" => retention::run(&a).await,
        "search" => search::run(&a).await,
        _ => unreachable!(),
    }
}
