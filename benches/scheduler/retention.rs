//! Retention under load (issue 13): `job_execution` holds `--rows` final executions older than
//! the retention window, and 1,000 one-second jobs (`--jobs`) run against it in windows of
//! `--seconds`: A with retention off (`execution_days = 0`), B with it on (`execution_days =
//! 1`, a pass every second, the default chunk size). `--pairs` A/B pairs alternate, so both
//! phases see the same table and the same neighbours on the machine; then B runs on until
//! no row older than the window is left (at most `--max-seconds`).
//!
//! The table is filled the fast way, with the same end state as years of inserts: the
//! migrations run through the binary, the secondary indexes are dropped, the rows go in
//! with `INSERT … SELECT` from MariaDB's SEQUENCE engine, and the indexes are rebuilt from
//! their own `SHOW CREATE TABLE` lines (checked identical afterwards). Rows are spread over
//! the jobs, one per job and second, with final statuses (1 % FAILED, 0.1 % TIMEOUT) and
//! random 32-hex trace ids, so deleting them touches the trace-id index at random as in
//! production.
//!
//! Before an A window the server's undo history (delete-marked rows InnoDB still has to
//! clean) is let drain, so B's deletions are not billed to A.

use std::time::{Duration, Instant};

use chrono::{DateTime, SubsecRound, Utc};
use sqlx::{Connection, MySqlConnection};

use crate::Args;
use crate::support::{
    Calls, Database, DelayStats, Jobflow, create_jobs, database_pid, metric_sum, proc_usage,
    record, recorder,
};

/// Rows per `INSERT … SELECT` of the fill.
const FILL_CHUNK: u64 = 250_000;
/// Filled rows end this long before the window's edge, so the purge's cutoff passes them all.
const FILL_MARGIN_DAYS: i64 = 1;
/// An A window starts once InnoDB's history list is this short, or after `DRAIN_MAX`.
const DRAINED: i64 = 1_000;
const DRAIN_MAX: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Retention off.
    A,
    /// Retention on.
    B,
}

/// One measured window.
struct Window {
    name: String,
    phase: Phase,
    seconds: f64,
    stats: DelayStats,
    /// CPU seconds over the window.
    jobflow_cpu: f64,
    db_cpu: f64,
    /// `/proc/loadavg`'s 1-minute figure at the window's end.
    load: f64,
    /// InnoDB history list length at the window's start.
    history: i64,
}

pub async fn run(a: &Args) {
    let (executors, calls) = recorder(1).await;
    let (db, mut conn, pool_before) = sized_database(a).await;
    println!(
        "# retention — {} rows older than the window, {} one-second jobs, {} s windows, {} A/B pairs, {} MiB InnoDB buffer pool",
        a.rows,
        a.jobs,
        a.seconds,
        a.pairs,
        buffer_pool(&mut conn).await >> 20
    );
    // The migrations, through the binary.
    Jobflow::start_with(&db.url, &executors, &off()).stop();
    let fill_end = Utc::now().trunc_subsecs(0) - chrono::Duration::days(1 + FILL_MARGIN_DAYS);
    let filled = Instant::now();
    let rows = fill(&mut conn, a.rows, a.jobs as u64, fill_end).await;
    let fill_secs = filled.elapsed().as_secs_f64();
    println!(
        "filled {rows} rows in {fill_secs:.0} s ({})",
        table_size(&mut conn).await
    );
    // Anything before this instant is a filled row: the jobs only add newer ones.
    let cutoff = fill_end + chrono::Duration::seconds(1);

    let db_pid = database_pid();
    let mut windows: Vec<Window> = Vec::new();
    let mut purge_active = Duration::ZERO;
    let mut first_b: Option<Instant> = None;
    let mut done_after: Option<Duration> = None;
    let mut purged_metric = 0.0;
    let mut jobs_created = false;
    let window = Duration::from_secs(a.seconds);
    let mut pair = 0;
    while done_after.is_none() {
        pair += 1;
        let alternating = pair <= a.pairs;
        if alternating {
            drain(&mut conn).await;
            let history = history_len(&mut conn).await;
            let jf = Jobflow::start_with(&db.url, &executors, &off());
            if !jobs_created {
                create_jobs(&jf.api, a.jobs, "* * * * * ?", 1, "ALLOW").await;
                jobs_created = true;
            }
            let w = measure(&jf, db_pid, window, None, &mut conn).await;
            windows.push(w.into_window(format!("A{pair}"), Phase::A, history, &calls));
            jf.stop();
        }
        // B: alternating windows, then one open-ended window until the purge is done.
        let limit = if alternating {
            window
        } else {
            // Whole seconds: the expected executions are jobs × seconds.
            Duration::from_secs(a.max_seconds.saturating_sub(purge_active.as_secs() + 5))
        };
        if limit.is_zero() {
            break;
        }
        let history = history_len(&mut conn).await;
        let spawned = Instant::now();
        first_b.get_or_insert(spawned);
        let jf = Jobflow::start_with(&db.url, &executors, &on());
        let w = measure(&jf, db_pid, limit, Some(cutoff), &mut conn).await;
        purge_active += w.done.unwrap_or_else(Instant::now) - spawned;
        if let Some(done) = w.done {
            done_after = Some(done - first_b.unwrap());
        }
        purged_metric += metric_sum(
            &jf.api,
            "retention_purged_executions_total",
            r#"reason="age""#,
        )
        .await;
        let name = if alternating {
            format!("B{pair}")
        } else {
            "B…".into()
        };
        windows.push(w.into_window(name, Phase::B, history, &calls));
        jf.stop();
    }

    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM job_execution WHERE trigger_time < ?")
        .bind(cutoff)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM job_execution")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let purged = rows - left as u64;
    if a.buffer_pool_mib.is_some() {
        resize_buffer_pool(&mut conn, pool_before).await;
    }
    report(a, &windows);
    let a_p99 = phase_stats(&windows, Phase::A).p(0.99);
    let b_p99 = phase_stats(&windows, Phase::B).p(0.99);
    println!();
    println!(
        "| rows filled | fill | rows purged | purge running | purge rate | first B start to window reached | old rows left | rows at end | p99 B / A |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let done = done_after
        .map(|d| format!("{:.0} s", d.as_secs_f64()))
        .unwrap_or_else(|| format!("not within {} s", a.max_seconds));
    println!(
        "| {rows} | {fill_secs:.0} s | {purged} (metric, completed passes: {purged_metric:.0}) | {:.0} s | {:.0} rows/s | {done} | {left} | {total} | {:.3} |",
        purge_active.as_secs_f64(),
        purged as f64 / purge_active.as_secs_f64(),
        b_p99 / a_p99,
    );
    record(
        a.out.as_deref(),
        "retention.csv",
        "rows,fill_s,purged,purge_s,done_s,left,rows_end,p99_a_ms,p99_b_ms",
        &format!(
            "{rows},{fill_secs:.0},{purged},{:.0},{},{left},{total},{a_p99:.1},{b_p99:.1}",
            purge_active.as_secs_f64(),
            done_after
                .map(|d| format!("{:.0}", d.as_secs_f64()))
                .unwrap_or_default(),
        ),
    );
}

/// A new database on the MySQL/MariaDB server, a connection to it, and the server's buffer
/// pool size before the run; the pool is resized to `--buffer-pool-mib` when given (restore
/// it with [`resize_buffer_pool`]).
pub(crate) async fn sized_database(a: &Args) -> (Database, MySqlConnection, u64) {
    let db = Database::create(false).await;
    let mut conn = MySqlConnection::connect(&db.url).await.unwrap();
    let pool_before = buffer_pool(&mut conn).await;
    if let Some(mib) = a.buffer_pool_mib {
        resize_buffer_pool(&mut conn, mib << 20).await;
    }
    (db, conn, pool_before)
}

pub(crate) async fn buffer_pool(conn: &mut MySqlConnection) -> u64 {
    sqlx::query_scalar("SELECT @@GLOBAL.innodb_buffer_pool_size")
        .fetch_one(conn)
        .await
        .unwrap()
}

/// Resizes the server's buffer pool (online in MariaDB 10.2+ and MySQL 5.7+) and waits until
/// the resize is done.
pub(crate) async fn resize_buffer_pool(conn: &mut MySqlConnection, bytes: u64) {
    sqlx::query("SET GLOBAL innodb_buffer_pool_size = ?")
        .bind(bytes)
        .execute(&mut *conn)
        .await
        .unwrap();
    for _ in 0..300 {
        let status: Option<(String, String)> =
            sqlx::query_as("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_resize_status'")
                .fetch_optional(&mut *conn)
                .await
                .unwrap();
        let busy = status.is_some_and(|(_, s)| {
            !s.is_empty() && !s.starts_with("Completed") && !s.contains("Size did not change")
        });
        if !busy {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("the buffer pool resize did not complete within 300 s");
}

fn off() -> Vec<(&'static str, String)> {
    vec![("JOBFLOW__RETENTION__EXECUTION_DAYS", "0".into())]
}

fn on() -> Vec<(&'static str, String)> {
    vec![
        ("JOBFLOW__RETENTION__EXECUTION_DAYS", "1".into()),
        ("JOBFLOW__RETENTION__INTERVAL_SECONDS", "1".into()),
    ]
}

/// Fills `job_execution` with `rows` final executions of `jobs` jobs (`bench-000000`…), one
/// per job and second, the last second being `end`. Returns the rows inserted.
pub(crate) async fn fill(
    conn: &mut MySqlConnection,
    rows: u64,
    jobs: u64,
    end: DateTime<Utc>,
) -> u64 {
    let create = show_create(conn).await;
    // Every secondary index, as its own definition line: dropped now, rebuilt after the fill.
    let keys: Vec<&str> = create
        .lines()
        .map(|l| l.trim().trim_end_matches(','))
        .filter(|l| l.starts_with("UNIQUE KEY ") || l.starts_with("KEY "))
        .collect();
    let names: Vec<&str> = keys.iter().map(|k| k.split('`').nth(1).unwrap()).collect();
    alter(
        conn,
        &names
            .iter()
            .map(|n| format!("DROP INDEX `{n}`"))
            .collect::<Vec<_>>(),
    )
    .await;
    let start = end - chrono::Duration::seconds((rows.div_ceil(jobs) - 1) as i64);
    let salt: u32 = rand::random();
    let mut inserted = 0;
    let mut lo = 1;
    while lo <= rows {
        let hi = (lo + FILL_CHUNK - 1).min(rows);
        let sql = format!(
            "INSERT INTO job_execution (execution_id, trace_id, job_name, trigger_type, fire_time, \
             scheduler_instance, executor_instance, shard_start, shard_end, shard_count, \
             trigger_time, due_time, start_time, finish_time, duration_ms, status, retry_count, \
             result_message, error_message) \
             SELECT CONCAT(j, ':', DATE_FORMAT(f, '%Y%m%d%H%i%s'), ':0-0'), \
             MD5(CONCAT('{salt}:', seq)), j, 'CRON', f, '127.0.0.1:8080', \
             CONCAT('10.0.0.', 1 + seq % 4, ':9999'), 0, 0, 1, \
             f + INTERVAL 2000 MICROSECOND, f, f + INTERVAL 3000 MICROSECOND, \
             f + INTERVAL 5000 MICROSECOND, 2, \
             CASE WHEN seq % 1000 = 7 THEN 'TIMEOUT' WHEN seq % 100 = 3 THEN 'FAILED' ELSE 'SUCCESS' END, \
             0, CASE WHEN seq % 100 = 3 OR seq % 1000 = 7 THEN NULL ELSE '{{\"success\":true}}' END, \
             CASE WHEN seq % 1000 = 7 THEN 'no answer within 300 s' \
             WHEN seq % 100 = 3 THEN 'executor answered 500: handler failed' END \
             FROM (SELECT seq, CONCAT('bench-', LPAD((seq - 1) % {jobs}, 6, '0')) AS j, \
             ? + INTERVAL ((seq - 1) DIV {jobs}) SECOND AS f FROM seq_{lo}_to_{hi}) s"
        );
        inserted += sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(start)
            .execute(&mut *conn)
            .await
            .unwrap()
            .rows_affected();
        lo = hi + 1;
    }
    alter(
        conn,
        &keys.iter().map(|k| format!("ADD {k}")).collect::<Vec<_>>(),
    )
    .await;
    let without_counter = |s: &str| {
        s.split(' ')
            .filter(|w| !w.starts_with("AUTO_INCREMENT="))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        without_counter(&show_create(conn).await),
        without_counter(&create),
        "the rebuilt table differs from the migrated one"
    );
    sqlx::query("ANALYZE TABLE job_execution")
        .execute(&mut *conn)
        .await
        .unwrap();
    inserted
}

async fn show_create(conn: &mut MySqlConnection) -> String {
    let (_, create): (String, String) = sqlx::query_as("SHOW CREATE TABLE job_execution")
        .fetch_one(conn)
        .await
        .unwrap();
    create
}

async fn alter(conn: &mut MySqlConnection, clauses: &[String]) {
    if clauses.is_empty() {
        return;
    }
    let sql = format!("ALTER TABLE job_execution {}", clauses.join(", "));
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(conn)
        .await
        .unwrap();
}

pub(crate) async fn table_size(conn: &mut MySqlConnection) -> String {
    let (data, index): (u64, u64) = sqlx::query_as(
        "SELECT CAST(data_length AS UNSIGNED), CAST(index_length AS UNSIGNED) \
         FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'job_execution'",
    )
    .fetch_one(conn)
    .await
    .unwrap();
    format!(
        "{:.1} GiB data + {:.1} GiB indexes",
        data as f64 / 1073741824.0,
        index as f64 / 1073741824.0
    )
}

/// InnoDB's history list length: undo of committed changes (here: deleted rows) not purged yet.
async fn history_len(conn: &mut MySqlConnection) -> i64 {
    sqlx::query_scalar::<_, i64>(
        "SELECT CAST(count AS SIGNED) FROM information_schema.innodb_metrics WHERE name = 'trx_rseg_history_len'",
    )
    .fetch_optional(conn)
    .await
    .unwrap()
    .unwrap_or(-1)
}

async fn drain(conn: &mut MySqlConnection) {
    let started = Instant::now();
    while history_len(conn).await > DRAINED && started.elapsed() < DRAIN_MAX {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A window as measured, before its calls are counted.
struct Measured {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    jobflow_cpu: f64,
    db_cpu: f64,
    load: f64,
    /// When no row before the cutoff was left (B windows only).
    done: Option<Instant>,
}

impl Measured {
    fn into_window(self, name: String, phase: Phase, history: i64, calls: &Calls) -> Window {
        let stats = DelayStats::of(&calls.lock().unwrap(), self.from, self.to);
        Window {
            name,
            phase,
            seconds: (self.to - self.from).num_milliseconds() as f64 / 1000.0,
            stats,
            jobflow_cpu: self.jobflow_cpu,
            db_cpu: self.db_cpu,
            load: self.load,
            history,
        }
    }
}

/// Measures from the next whole second (3 s after start-up) for `limit`, or, when `cutoff`
/// is given, until no row before it is left, whichever comes first. Waits 3 s for the late
/// calls of the window's last instants before returning.
async fn measure(
    jf: &Jobflow,
    db_pid: Option<u32>,
    limit: Duration,
    cutoff: Option<DateTime<Utc>>,
    conn: &mut MySqlConnection,
) -> Measured {
    let from =
        (Utc::now() + chrono::Duration::seconds(3)).trunc_subsecs(0) + chrono::Duration::seconds(1);
    let end = from + chrono::Duration::from_std(limit).unwrap();
    sleep_until(from).await;
    let cpu = |pid: Option<u32>| pid.map(|p| proc_usage(p).1).unwrap_or(f64::NAN);
    let (jf0, db0) = (cpu(Some(jf.pid())), cpu(db_pid));
    let mut done = None;
    let mut to = end;
    if let Some(cutoff) = cutoff {
        while Utc::now() < end {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if !old_rows_left(conn, cutoff).await {
                done = Some(Instant::now());
                // The last whole second the purge ran through.
                to = Utc::now().trunc_subsecs(0).min(end);
                break;
            }
        }
    }
    sleep_until(to).await;
    let (jf1, db1) = (cpu(Some(jf.pid())), cpu(db_pid));
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split(' ').next()?.parse().ok())
        .unwrap_or(f64::NAN);
    tokio::time::sleep(Duration::from_secs(3)).await;
    Measured {
        from,
        to,
        jobflow_cpu: jf1 - jf0,
        db_cpu: db1 - db0,
        load,
        done,
    }
}

async fn old_rows_left(conn: &mut MySqlConnection, cutoff: DateTime<Utc>) -> bool {
    sqlx::query_scalar::<_, i64>(
        "SELECT COUNT(*) FROM (SELECT 1 FROM job_execution WHERE trigger_time < ? LIMIT 1) x",
    )
    .bind(cutoff)
    .fetch_one(conn)
    .await
    .unwrap()
        > 0
}

async fn sleep_until(t: DateTime<Utc>) {
    if let Ok(d) = (t - Utc::now()).to_std() {
        tokio::time::sleep(d).await;
    }
}

/// The calls of every window of `phase`, as one set.
fn phase_stats(windows: &[Window], phase: Phase) -> DelayStats {
    let mut all = DelayStats {
        executions: 0,
        doubled: 0,
        delays: Vec::new(),
        per_instant: Vec::new(),
        per_instant_delays: Vec::new(),
    };
    for w in windows.iter().filter(|w| w.phase == phase) {
        all.executions += w.stats.executions;
        all.doubled += w.stats.doubled;
        all.delays.extend_from_slice(&w.stats.delays);
        all.per_instant.extend_from_slice(&w.stats.per_instant);
        all.per_instant_delays
            .extend_from_slice(&w.stats.per_instant_delays);
    }
    all.delays.sort_by(|x, y| x.partial_cmp(y).unwrap());
    all
}

fn report(a: &Args, windows: &[Window]) {
    println!();
    println!(
        "| window | retention | seconds | delivered / expected | doubled | p50 | p99 | max | JobFlow CPU | DB CPU | load (1 min) | InnoDB history at start |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let line = |name: &str, seconds: f64, s: &DelayStats, jf: f64, dbc: f64| {
        format!(
            "| {name} | {seconds:.0} | {} / {:.0} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.2} | {:.2} |",
            s.executions,
            a.jobs as f64 * seconds,
            s.doubled,
            s.p(0.5),
            s.p(0.99),
            s.max(),
            jf / seconds,
            dbc / seconds,
        )
    };
    for w in windows {
        let retention = if w.phase == Phase::A { "off" } else { "on" };
        let name = format!("{} | {retention}", w.name);
        println!(
            "{} {:.2} | {} |",
            line(&name, w.seconds, &w.stats, w.jobflow_cpu, w.db_cpu),
            w.load,
            w.history
        );
        record(
            a.out.as_deref(),
            "retention-windows.csv",
            "window,seconds,executions,doubled,p50_ms,p99_ms,max_ms,cpu_jobflow,cpu_db,load1",
            &format!(
                "{},{:.0},{},{},{:.1},{:.1},{:.1},{:.3},{:.3},{:.2}",
                w.name,
                w.seconds,
                w.stats.executions,
                w.stats.doubled,
                w.stats.p(0.5),
                w.stats.p(0.99),
                w.stats.max(),
                w.jobflow_cpu / w.seconds,
                w.db_cpu / w.seconds,
                w.load
            ),
        );
    }
    println!();
    println!(
        "| phase | seconds | delivered / expected | doubled | p50 | p99 | max | JobFlow CPU | DB CPU |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for phase in [Phase::A, Phase::B] {
        let of = || windows.iter().filter(move |w| w.phase == phase);
        let seconds: f64 = of().map(|w| w.seconds).sum();
        let jf: f64 = of().map(|w| w.jobflow_cpu).sum();
        let dbc: f64 = of().map(|w| w.db_cpu).sum();
        let s = phase_stats(windows, phase);
        let name = if phase == Phase::A {
            "A (off)"
        } else {
            "B (purging)"
        };
        println!("{}", line(name, seconds, &s, jf, dbc));
    }
}
