//! A randomized fault campaign with a history checker.
//!
//! Three real `jobflow` processes (nacos mode, one rnacos, one fresh MariaDB database, each
//! scheduler through its own database proxy) run a seeded workload of second-level jobs of
//! every overlap policy, sharded and not, with child chains, retries and short timeouts, on
//! SDK and bare executors, while a seeded plan of faults hits them: `kill -9`, SIGTERM and
//! SIGSTOP of a scheduler, the database link cut or stalled for one scheduler or all, rnacos
//! restarted, executors killed (and restarted fresh) or made slow. API operations (create,
//! edit, enable/disable, delete and re-create, manual triggers, cancels, retries) go to a
//! random live scheduler meanwhile. Then everything is quiet for a settle period, and the
//! database is read.
//!
//! Everything is recorded (every API call with its answer, every handler run with its true
//! start and end, the alerts, the faults, the rows) and [`checker`] judges the history against
//! the README's promises; its module documentation states each invariant exactly.
//!
//! - `JOBFLOW_CAMPAIGN_SEEDS=1,2,3` (default `1,2`) and `JOBFLOW_CAMPAIGN_SECONDS=60` (default
//!   30) pick the seeds and the length of the fault phase; `JOBFLOW_CAMPAIGN_SETTLE` the quiet
//!   tail (default 40 s, enough for the recovery bounds).
//! - `JOBFLOW_CAMPAIGN_REPORT=path` appends one JSON line per seed (counts and examples).
//! - Each seed's history (JSON) and the schedulers' logs are kept under the test target's
//!   temporary directory when a seed finds a violation (always with
//!   `JOBFLOW_CAMPAIGN_KEEP=1`); `JOBFLOW_CAMPAIGN_RECHECK=path/history.json` checks a kept
//!   history again without running anything; `JOBFLOW_CAMPAIGN_LOG=jobflow::dispatch=debug,info`
//!   sets the schedulers' log filter for a seed under study.
//!
//! - `JOBFLOW_CAMPAIGN_GALERA=proxy|multi-primary` runs the seeds on a three-node Galera
//!   cluster (`scripts/galera.sh`, started when it is not up) instead of one server, with
//!   database node faults (a node killed and restarted, a node cut off and rejoining) beside
//!   the others; see [`galera`]. `JOBFLOW_CAMPAIGN_BURST=n` adds `n` one-second jobs, so
//!   hundreds of fires are in flight when a fault lands (default 100 on Galera, else 0).
//!   `JOBFLOW_CAMPAIGN_FAULTS=database` keeps only the database node faults (the API
//!   operations still run), to measure what a node's loss alone costs.
//!
//! A seed always plans the same operations and faults at the same offsets; what the processes
//! do with them varies with real timing. Any violation fails the test, naming the seed, the
//! table, examples and the command that replays it.

#[path = "../cluster/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "../support/proxy.rs"]
#[allow(dead_code)]
mod proxy;
#[path = "../support/wait.rs"]
mod wait;

mod checker;
mod cluster;
mod executors;
mod galera;
mod history;
mod report;
mod workload;

use std::io::Write;
use std::time::Duration;

use chrono::Utc;

use cluster::Cluster;
use history::{Fault, History};
use workload::{Api, FaultOp, Op};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn seeds() -> Vec<u64> {
    match std::env::var("JOBFLOW_CAMPAIGN_SEEDS") {
        Ok(s) => s.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
        Err(_) => vec![1, 2],
    }
}

async fn sleep_until(start: tokio::time::Instant, offset: Duration) {
    tokio::time::sleep_until(start + offset).await;
}

/// Applies one scheduler or infrastructure fault and undoes it; the fault as recorded.
async fn scheduler_fault(cluster: &mut Cluster, fault: &FaultOp) -> Fault {
    let ids = cluster.ids();
    let start = Utc::now();
    let target = match fault {
        FaultOp::Kill9 { scheduler, down } => {
            cluster.kill9(*scheduler);
            tokio::time::sleep(*down).await;
            cluster.start_scheduler(*scheduler).await;
            ids[*scheduler].clone()
        }
        FaultOp::Sigterm { scheduler, down } => {
            cluster.terminate(*scheduler).await;
            tokio::time::sleep(*down).await;
            cluster.start_scheduler(*scheduler).await;
            ids[*scheduler].clone()
        }
        FaultOp::Sigstop { scheduler, down } => {
            cluster.pause(*scheduler);
            tokio::time::sleep(*down).await;
            cluster.resume(*scheduler);
            ids[*scheduler].clone()
        }
        FaultOp::DbCut { scheduler, down } => {
            cluster.db_cut(*scheduler);
            tokio::time::sleep(*down).await;
            cluster.db_heal();
            scheduler.map_or("all".into(), |i| ids[i].clone())
        }
        FaultOp::DbStall { scheduler, down } => {
            cluster.db_stall(*scheduler);
            tokio::time::sleep(*down).await;
            cluster.db_heal();
            scheduler.map_or("all".into(), |i| ids[i].clone())
        }
        FaultOp::NacosRestart { down } => {
            cluster.restart_nacos(*down).await;
            "nacos".into()
        }
        _ => unreachable!("not a scheduler fault: {fault:?}"),
    };
    Fault {
        kind: fault.kind().into(),
        target,
        start,
        end: Utc::now(),
    }
}

async fn executor_fault(executors: &mut [executors::Executor], fault: &FaultOp) -> Fault {
    let start = Utc::now();
    let target = match fault {
        FaultOp::ExecutorKill { executor, down } => {
            let e = &mut executors[*executor];
            e.kill().await;
            tokio::time::sleep(*down).await;
            e.start().await;
            e.name.clone()
        }
        FaultOp::ExecutorSlow { executor, down } => {
            let e = &executors[*executor];
            e.slow_until(Utc::now() + chrono::Duration::from_std(*down).unwrap());
            tokio::time::sleep(*down).await;
            e.name.clone()
        }
        _ => unreachable!(),
    };
    Fault {
        kind: fault.kind().into(),
        target,
        start,
        end: Utc::now(),
    }
}

/// Applies one database node fault and undoes it, waiting for the cluster to be whole again;
/// the fault as recorded. It disturbs every scheduler: a node's loss holds the others'
/// commits until the cluster has evicted it.
async fn database_fault(galera: &galera::Galera, fault: &FaultOp) -> Fault {
    let start = Utc::now();
    let node = match fault {
        FaultOp::DbNodeKill { node, down } => {
            galera.kill_and_restart(*node, *down).await;
            node
        }
        FaultOp::DbNodePartition { node, down } => {
            galera.partition_and_heal(*node, *down).await;
            node
        }
        _ => unreachable!("not a database fault: {fault:?}"),
    };
    Fault {
        kind: fault.kind().into(),
        target: format!("db-node-{node}"),
        start,
        end: Utc::now(),
    }
}

/// Runs seed `seed`: a cluster, the plan, the quiet tail, and the history.
async fn run_seed(
    seed: u64,
    seconds: u64,
    settle: u64,
    galera: Option<&galera::Galera>,
) -> (History, Vec<(String, Vec<String>)>) {
    let mut plan = workload::plan(seed, seconds);
    let burst = env_u64(
        "JOBFLOW_CAMPAIGN_BURST",
        if galera.is_some() { 100 } else { 0 },
    );
    plan.initial.extend(workload::burst(burst as usize));
    let database_faults = match galera {
        Some(_) => workload::database_faults(seed, seconds),
        None => Vec::new(),
    };
    match std::env::var("JOBFLOW_CAMPAIGN_FAULTS").as_deref() {
        Err(_) | Ok("" | "all") => {}
        Ok("database") => {
            assert!(
                galera.is_some(),
                "database node faults need JOBFLOW_CAMPAIGN_GALERA"
            );
            plan.faults.clear();
            plan.executor_faults.clear();
        }
        Ok(other) => panic!("JOBFLOW_CAMPAIGN_FAULTS={other}: expected all or database"),
    }
    let mut cluster = Cluster::start(galera).await;
    let api = Api::new();
    for (i, spec) in plan.initial.iter().enumerate() {
        api.run(&cluster.live, i as u64, &Op::Create(spec.clone()))
            .await;
    }
    let created = api.calls().iter().filter(|c| c.status == Some(201)).count();
    assert_eq!(
        created,
        plan.initial.len(),
        "the initial jobs were created: {:?}",
        api.calls()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;

    let started = Utc::now();
    let start = tokio::time::Instant::now();
    println!(
        "seed {seed}: {} operations, {} scheduler faults, {} executor faults, {} database node \
         faults over {seconds} s; {burst} burst jobs",
        plan.ops.len(),
        plan.faults.len(),
        plan.executor_faults.len(),
        database_faults.len()
    );
    let ops = {
        let (api, live, ops) = (api.clone(), cluster.live.clone(), plan.ops.clone());
        tokio::spawn(async move {
            for (at, pick, op) in ops {
                sleep_until(start, at).await;
                api.run(&live, pick, &op).await;
            }
        })
    };
    let mut executors = std::mem::take(&mut cluster.executors);
    let executor_faults = {
        let faults = plan.executor_faults.clone();
        tokio::spawn(async move {
            let mut done = Vec::new();
            for (at, fault) in faults {
                sleep_until(start, at).await;
                done.push(executor_fault(&mut executors, &fault).await);
            }
            (executors, done)
        })
    };
    let database_faults = {
        let galera = galera.cloned();
        tokio::spawn(async move {
            let mut done = Vec::new();
            for (at, fault) in database_faults {
                sleep_until(start, at).await;
                let galera = galera.as_ref().expect("database faults only on Galera");
                done.push(database_fault(galera, &fault).await);
            }
            done
        })
    };
    let mut faults = Vec::new();
    for (at, fault) in &plan.faults {
        sleep_until(start, *at).await;
        faults.push(scheduler_fault(&mut cluster, fault).await);
    }
    ops.await.unwrap();
    let (executors, done) = executor_faults.await.unwrap();
    cluster.executors = executors;
    faults.extend(done);
    faults.extend(database_faults.await.unwrap());
    faults.sort_by_key(|f| f.start);
    // Everything back, whatever the plan left.
    cluster.db_heal();
    for e in &mut cluster.executors {
        if !e.is_up() {
            e.start().await;
        }
    }
    for i in 0..3 {
        if !cluster.is_up(i) {
            cluster.start_scheduler(i).await;
        }
    }
    let quiet = Utc::now();
    println!("seed {seed}: faults over; {settle} s of quiet");
    tokio::time::sleep(Duration::from_secs(settle)).await;
    // A last look at every job, so no write's outcome stays unknown.
    let names: std::collections::BTreeSet<String> = plan
        .initial
        .iter()
        .map(|s| s.name.clone())
        .chain(plan.ops.iter().filter_map(|(_, _, op)| match op {
            Op::Create(s) => Some(s.name.clone()),
            _ => None,
        }))
        .collect();
    for (i, name) in names.iter().enumerate() {
        if let Some(s) = cluster.live.pick(i as u64) {
            api.send(&s, "GET", &format!("/api/v1/jobs/{name}"), None)
                .await;
        }
    }
    let ended = Utc::now();
    let (rows, fires) = cluster.read_rows().await;
    let mut lives = Vec::new();
    for e in &cluster.executors {
        lives.extend(e.lives());
    }
    let history = History {
        seed,
        seconds,
        database: galera.map_or("mariadb", |g| g.topology.name()).into(),
        started,
        quiet,
        ended,
        api: api.calls(),
        runs: cluster.recorder.runs(),
        alerts: cluster.inbox.alerts(),
        faults,
        lives,
        scheduler_lives: cluster.scheduler_lives(),
        rows,
        fires,
    };
    let logs = cluster.logs();
    for e in &mut cluster.executors {
        e.kill().await;
    }
    (history, logs)
}

/// Where a seed's history, verdict and logs are kept.
fn keep(
    history: &History,
    verdict: &checker::Verdict,
    logs: &[(String, Vec<String>)],
) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("campaign")
        .join(format!(
            "seed-{}-{}",
            history.seed,
            history.started.format("%Y%m%dT%H%M%S")
        ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("history.json"),
        serde_json::to_vec(history).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("verdict.json"),
        serde_json::to_vec_pretty(verdict).unwrap(),
    )
    .unwrap();
    for (n, (id, lines)) in logs.iter().enumerate() {
        let name = format!("scheduler-{n:02}-{}.log", id.replace(':', "_"));
        std::fs::write(dir.join(name), lines.join("\n")).unwrap();
    }
    dir
}

fn report(history: &History, verdict: &checker::Verdict) {
    println!("{}", report::table(history, verdict));
    if let Ok(path) = std::env::var("JOBFLOW_CAMPAIGN_REPORT") {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        // One write per line: seeds run at once append to the same report.
        let line = format!("{}\n", report::json_line(history, verdict));
        f.write_all(line.as_bytes()).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn campaign() {
    if let Ok(path) = std::env::var("JOBFLOW_CAMPAIGN_RECHECK") {
        let history: History = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let verdict = checker::check(&history);
        report(&history, &verdict);
        let out = std::path::Path::new(&path).with_file_name("verdict.json");
        std::fs::write(&out, serde_json::to_vec_pretty(&verdict).unwrap()).unwrap();
        println!("every violation: {}", out.display());
        return;
    }
    let seconds = env_u64("JOBFLOW_CAMPAIGN_SECONDS", 30);
    let settle = env_u64("JOBFLOW_CAMPAIGN_SETTLE", 40);
    let galera = match galera::Topology::from_env() {
        Some(t) => Some(galera::Galera::start(t).await),
        None => None,
    };
    let mut failed = Vec::new();
    for seed in seeds() {
        if let Some(g) = &galera {
            // Whole again after the last seed, whatever it left.
            g.wait_synced().await;
        }
        let (history, logs) = run_seed(seed, seconds, settle, galera.as_ref()).await;
        let verdict = checker::check(&history);
        report(&history, &verdict);
        let kept = (verdict.violations() > 0 || std::env::var("JOBFLOW_CAMPAIGN_KEEP").is_ok())
            .then(|| keep(&history, &verdict, &logs));
        if let Some(dir) = &kept {
            println!(
                "history and scheduler logs of seed {seed}: {}",
                dir.display()
            );
        }
        if verdict.violations() > 0 {
            println!(
                "seed {seed}: {} violations; replay with\n  {}",
                verdict.violations(),
                report::replay_command(seed, seconds, &history.database)
            );
            failed.push(seed);
        }
    }
    assert!(
        failed.is_empty(),
        "promise violations in seeds {failed:?} (tables above); replay one with {}",
        report::replay_command(
            failed.first().copied().unwrap_or(0),
            seconds,
            galera.as_ref().map_or("mariadb", |g| g.topology.name())
        )
    );
}
