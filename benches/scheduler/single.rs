//! One JobFlow instance, standalone: precision and throughput, burst, idle, start-up.

use std::time::{Duration, Instant};

use chrono::{DateTime, SubsecRound, Timelike, Utc};

use crate::Args;
use crate::support::{
    Database, DelayStats, Jobflow, SDK_SECRET, api_reads_line, create_jobs, database_pid,
    database_reads_line, log_table_bytes, metric_sum, own_cpu, percentile, proc_usage,
    read_api_until, read_database_until, record, record_precision, recorder, sdk_recorder,
    server_counters,
};

/// CPU seconds of JobFlow, the database server and the benchmark process (the executor).
struct Cpu {
    jobflow: f64,
    database: f64,
    executor: f64,
}

impl Cpu {
    fn read(jobflow: u32, database: Option<u32>) -> Self {
        Self {
            jobflow: proc_usage(jobflow).1,
            database: database.map(|p| proc_usage(p).1).unwrap_or(f64::NAN),
            executor: own_cpu(),
        }
    }

    fn per_second_since(&self, earlier: &Cpu, seconds: f64) -> Cpu {
        Cpu {
            jobflow: (self.jobflow - earlier.jobflow) / seconds,
            database: (self.database - earlier.database) / seconds,
            executor: (self.executor - earlier.executor) / seconds,
        }
    }
}

/// The next whole second at least `after` from now.
fn whole_second_after(after: Duration) -> DateTime<Utc> {
    (Utc::now() + chrono::Duration::from_std(after).unwrap()).trunc_subsecs(0)
        + chrono::Duration::seconds(1)
}

async fn sleep_until(t: DateTime<Utc>) {
    if let Ok(d) = (t - Utc::now()).to_std() {
        tokio::time::sleep(d).await;
    }
}

pub async fn precision(a: &Args) {
    let (executors, calls) = match a.log_lines {
        Some(lines) => sdk_recorder(a.shards as usize, lines).await,
        None => recorder(a.shards as usize).await,
    };
    let db = Database::create(a.sqlite).await;
    let signed = [("JOBFLOW__EXECUTOR__SIGNING_SECRET", SDK_SECRET.to_string())];
    let settings: &[(&str, String)] = if a.log_lines.is_some() { &signed } else { &[] };
    let jf = Jobflow::start_default(&db.url, &executors, settings);
    let backend = if a.sqlite { "SQLite" } else { "MariaDB" };
    let executor = match a.log_lines {
        Some(n) => format!(", SDK executor logging {n} lines per execution"),
        None => String::new(),
    };
    println!(
        "# {} — {} jobs × {} shards, {} s window, {backend}, overlapPolicy {}{executor}",
        a.scenario, a.jobs, a.shards, a.seconds, a.overlap
    );
    let took = create_jobs(&jf.api, a.jobs, "* * * * * ?", a.shards, &a.overlap).await;
    println!("created {} jobs in {:.1} s", a.jobs, took.as_secs_f64());
    // The window starts on a whole second, once every job has been picked up.
    let from = whole_second_after(Duration::from_secs(3));
    let to = from + chrono::Duration::seconds(a.seconds as i64);
    sleep_until(from).await;
    let misfires0 = metric_sum(&jf.api, "scheduler_misfires_total", r#"action="fired""#).await;
    let db_pid = if a.sqlite { None } else { database_pid() };
    let cpu0 = Cpu::read(jf.pid(), db_pid);
    let counters0 = match &db.server {
        Some(s) => Some(server_counters(s).await),
        None => None,
    };
    // `--no-reads`: neither reader runs.
    let readers = a.reads.then(|| {
        (
            tokio::spawn(read_api_until(jf.api.clone(), to)),
            tokio::spawn(read_database_until(db.url.clone(), to)),
        )
    });
    sleep_until(to).await;
    let cpu = Cpu::read(jf.pid(), db_pid).per_second_since(&cpu0, a.seconds as f64);
    let counters1 = match &db.server {
        Some(s) => Some(server_counters(s).await),
        None => None,
    };
    let (rss, _) = proc_usage(jf.pid());
    // Late calls of the window still count: those of its last instant arrive within the
    // misfire tolerance (5 s) or not at all.
    tokio::time::sleep(Duration::from_secs(7)).await;
    // Instants taken from the schedule later than the tolerance: each such job fired once
    // for its latest missed instant (FIRE_ONCE_NOW), the older ones were not owed.
    let misfires =
        metric_sum(&jf.api, "scheduler_misfires_total", r#"action="fired""#).await - misfires0;
    let stats = DelayStats::of(&calls.lock().unwrap(), from, to);
    let expected = a.jobs * a.shards as usize * a.seconds as usize;
    let fires = (a.jobs * a.seconds as usize) as f64;
    let per_fire = |k: &str| match (&counters0, &counters1) {
        (Some(c0), Some(c1)) if c0.contains_key(k) && c1.contains_key(k) => {
            format!("{:.2}", (c1[k] - c0[k]) / fires)
        }
        _ => "–".into(),
    };
    println!(
        "| jobs | shards | executions | expected | not delivered | misfire catch-ups | doubled | executions/s | p50 delay | p99 delay | max delay | JobFlow CPU | DB CPU | executor CPU | RSS | statements/fire | commits/fire | fsyncs/fire |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {} | {} | {misfires:.0} | {} | {:.0} | {:.1} ms | {:.1} ms | {:.1} ms | {:.2} | {:.2} | {:.2} | {:.0} MiB | {} | {} | {} |",
        a.jobs,
        a.shards,
        stats.executions,
        expected,
        expected.saturating_sub(stats.executions),
        stats.doubled,
        stats.executions as f64 / a.seconds as f64,
        stats.p(0.5),
        stats.p(0.99),
        stats.max(),
        cpu.jobflow,
        cpu.database,
        cpu.executor,
        rss,
        per_fire("Questions"),
        per_fire("Com_commit"),
        per_fire("Innodb_data_fsyncs"),
    );
    if stats
        .per_instant
        .iter()
        .any(|n| *n < a.jobs * a.shards as usize)
    {
        let counts: Vec<String> = stats.per_instant.iter().map(ToString::to_string).collect();
        println!("delivered per instant of the window: {}", counts.join(", "));
    }
    println!(
        "delay per instant of the window, p50/max ms: {}",
        stats.per_instant_line()
    );
    if let (Some(c0), Some(c1)) = (&counters0, &counters1) {
        let mut parts: Vec<String> = c1
            .iter()
            .filter(|(k, _)| k.starts_with("Com_"))
            .map(|(k, v)| format!("{} {:.2}", &k[4..], (v - c0.get(k).unwrap_or(v)) / fires))
            .collect();
        parts.sort();
        println!("per fire: {}", parts.join(", "));
    }
    if let (Some(lines), false) = (a.log_lines, a.sqlite) {
        let (bytes, stored) = log_table_bytes(&db.url).await;
        let fires_per_s = stats.executions as f64 / a.seconds as f64;
        println!(
            "execution logs: {stored:.0} lines stored of {} logged, {:.0} bytes per line in the database; DB CPU per execution {:.0} µs",
            calls.lock().unwrap().len() * lines,
            if stored > 0.0 {
                bytes / stored
            } else {
                f64::NAN
            },
            cpu.database / fires_per_s * 1e6,
        );
    }
    if let Some((api, database)) = readers {
        println!("{}", api_reads_line(&api.await.unwrap()));
        println!("{}", database_reads_line(&database.await.unwrap()));
    }
    record_precision(
        a,
        "JobFlow",
        backend,
        &stats,
        cpu.jobflow,
        Some(cpu.database),
        rss,
    );
    jf.stop();
}

pub async fn burst(a: &Args) {
    let (executors, calls) = recorder(1).await;
    let db = Database::create(a.sqlite).await;
    let jf = Jobflow::start(&db.url, &executors);
    println!("# burst — {} jobs due at one instant", a.jobs);
    let took = create_jobs(&jf.api, a.jobs, "0 * * * * ?", 1, "ALLOW").await;
    println!("created {} jobs in {:.1} s", a.jobs, took.as_secs_f64());
    // The next minute boundary at least 5 s away: every job is loaded by then.
    let now = Utc::now();
    let mut instant =
        now.with_second(0).unwrap().with_nanosecond(0).unwrap() + chrono::Duration::minutes(1);
    if instant - now < chrono::Duration::seconds(5) {
        instant += chrono::Duration::minutes(1);
    }
    sleep_until(instant).await;
    let cpu0 = proc_usage(jf.pid()).1;
    tokio::time::sleep(Duration::from_secs(a.seconds)).await;
    let (rss, cpu1) = proc_usage(jf.pid());
    let calls = calls.lock().unwrap().clone();
    let mut delays: Vec<f64> = calls
        .iter()
        .filter(|c| c.fire == instant)
        .map(|c| (c.received - c.fire).num_microseconds().unwrap() as f64 / 1000.0)
        .collect();
    delays.sort_by(|x, y| x.partial_cmp(y).unwrap());
    let last = delays.last().copied().unwrap_or(f64::NAN);
    println!(
        "| jobs due at one instant | dispatched | missing | first call | p50 | p99 | last call | fires/s drained | CPU (cores, {} s) | RSS |",
        a.seconds
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} | {:.2} | {:.0} MiB |",
        a.jobs,
        delays.len(),
        a.jobs - delays.len().min(a.jobs),
        delays.first().copied().unwrap_or(f64::NAN),
        percentile(&delays, 0.5),
        percentile(&delays, 0.99),
        last,
        delays.len() as f64 / (last / 1000.0),
        (cpu1 - cpu0) / a.seconds as f64,
        rss
    );
    for d in &delays {
        record(
            a.out.as_deref(),
            "burst.csv",
            "delay_ms",
            &format!("{d:.1}"),
        );
    }
    jf.stop();
}

pub async fn idle(a: &Args) {
    let (executors, _calls) = recorder(1).await;
    let db = Database::create(a.sqlite).await;
    let jf = Jobflow::start(&db.url, &executors);
    // Once a year (Jan 1st): nothing fires during the run.
    let cron = if a.distinct {
        "{s} {m} {h} 1 1 ?"
    } else {
        "0 0 3 1 1 ?"
    };
    let took = create_jobs(&jf.api, a.jobs, cron, 1, "ALLOW").await;
    println!(
        "# idle — created {} jobs in {:.1} s",
        a.jobs,
        took.as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (_, cpu0) = proc_usage(jf.pid());
    tokio::time::sleep(Duration::from_secs(a.seconds)).await;
    let (rss, cpu1) = proc_usage(jf.pid());
    println!(
        "| enabled jobs | cron expressions | RSS | CPU (% of one core, {} s idle) | creation through the API |",
        a.seconds
    );
    println!("|---|---|---|---|---|");
    let exprs = if a.distinct {
        a.jobs.to_string()
    } else {
        "1 shared".into()
    };
    let cpu = (cpu1 - cpu0) / a.seconds as f64 * 100.0;
    println!(
        "| {} | {exprs} | {rss:.1} MiB | {cpu:.2} % | {:.1} s |",
        a.jobs,
        took.as_secs_f64()
    );
    record(
        a.out.as_deref(),
        "idle.csv",
        "jobs,distinct,rss_mib,cpu_percent,create_s",
        &format!(
            "{},{},{rss:.1},{cpu:.3},{:.1}",
            a.jobs,
            a.distinct,
            took.as_secs_f64()
        ),
    );
    jf.stop();
}

/// Process start to the "listening" log line and to `/health/ready` answering 200, on an
/// empty database (migrations included), `--runs` times.
pub async fn startup(a: &Args) {
    let (executors, _calls) = recorder(1).await;
    let client = reqwest::Client::new();
    println!("| database | run | to listening | to ready |");
    println!("|---|---|---|---|");
    for sqlite in [true, false] {
        let backend = if sqlite { "SQLite" } else { "MariaDB" };
        for run in 1..=a.runs {
            let db = Database::create(sqlite).await;
            let spawned = Instant::now();
            let jf = Jobflow::start(&db.url, &executors);
            let ready = loop {
                let r = client
                    .get(format!("http://{}/health/ready", jf.api))
                    .send()
                    .await;
                if r.is_ok_and(|r| r.status() == 200) {
                    break spawned.elapsed();
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            };
            let listening = jf.listening_after.as_secs_f64() * 1000.0;
            let ready = ready.as_secs_f64() * 1000.0;
            println!("| {backend} | {run} | {listening:.0} ms | {ready:.0} ms |");
            record(
                a.out.as_deref(),
                "startup.csv",
                "backend,run,listening_ms,ready_ms",
                &format!("{backend},{run},{listening:.1},{ready:.1}"),
            );
            jf.stop();
        }
    }
}
