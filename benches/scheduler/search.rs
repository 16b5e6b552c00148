//! Execution search on a large table (issue 13): `job_execution` holds `--rows` final
//! executions of `--jobs` jobs (filled as the retention benchmark fills it: one per job and
//! second, 1 % FAILED, 0.1 % TIMEOUT, four executors, random trace ids, every index of the
//! migrations), and `GET /api/v1/executions` is timed through the real binary for each
//! filter an operator uses: `--runs` times each, on the server's buffer pool as it is (the
//! first run is the cold one).
//!
//! A page is an index range scan whatever the table's size; the count that comes with it
//! stops at 100,000 matches (`totalElementsCapped`), so no filter reads the whole table.

use std::time::{Duration, Instant};

use chrono::{DateTime, SubsecRound, Utc};

use crate::Args;
use crate::retention::{buffer_pool, fill, resize_buffer_pool, sized_database, table_size};
use crate::support::{Jobflow, percentile, record};

/// One timed query: its name, its query string, and what was measured.
struct Measured {
    name: &'static str,
    query: String,
    /// Milliseconds per run, in run order.
    ms: Vec<f64>,
    /// `totalElements` and whether it was capped, from the last answer.
    total: u64,
    capped: bool,
}

pub async fn run(a: &Args) {
    let (db, mut conn, pool_before) = sized_database(a).await;
    println!(
        "# search — {} rows over {} jobs, {} runs per query, {} MiB InnoDB buffer pool",
        a.rows,
        a.jobs,
        a.runs,
        buffer_pool(&mut conn).await >> 20
    );
    // The migrations, through the binary.
    Jobflow::start(&db.url, &[]).stop();
    let end = Utc::now().trunc_subsecs(0) - chrono::Duration::hours(1);
    let filled = Instant::now();
    let rows = fill(&mut conn, a.rows, a.jobs as u64, end).await;
    println!(
        "filled {rows} rows in {:.0} s ({})",
        filled.elapsed().as_secs_f64(),
        table_size(&mut conn).await
    );
    let span = chrono::Duration::seconds((rows.div_ceil(a.jobs as u64)) as i64);
    let start = end - span;
    let middle = start + span / 2;
    let at = |t: DateTime<Utc>| {
        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            .replace('+', "%2B")
    };
    let hour = format!(
        "from={}&to={}",
        at(middle),
        at(middle + chrono::Duration::hours(1))
    );
    let job = format!("bench-{:06}", a.jobs / 3);
    let queries: Vec<(&'static str, String)> = vec![
        ("newest page, no filter", String::new()),
        ("one job", format!("jobName={job}")),
        ("status FAILED", "status=FAILED".into()),
        ("status TIMEOUT", "status=TIMEOUT".into()),
        ("one executor", "executor=10.0.0.3:9999".into()),
        ("trigger type CRON (every row)", "triggerType=CRON".into()),
        ("trigger type MANUAL (no row)", "triggerType=MANUAL".into()),
        ("one hour", hour.clone()),
        ("one hour, FAILED", format!("{hour}&status=FAILED")),
        (
            "one job, one hour, FAILED",
            format!("jobName={job}&{hour}&status=FAILED"),
        ),
        (
            "one executor, one hour",
            format!("executor=10.0.0.3:9999&{hour}"),
        ),
        ("page 100 of 20, no filter", "page=100".into()),
    ];

    let jf = Jobflow::start_with(
        &db.url,
        &[],
        &[("JOBFLOW__RETENTION__EXECUTION_DAYS", "0".into())],
    );
    let client = reqwest::Client::new();
    let mut measured = Vec::new();
    for (name, q) in queries {
        let url = format!("http://{}/api/v1/executions?size=20&{q}", jf.api);
        let mut ms = Vec::with_capacity(a.runs);
        let mut page = serde_json::Value::Null;
        for _ in 0..a.runs {
            let t = Instant::now();
            let r = client.get(&url).send().await.unwrap();
            assert_eq!(r.status(), 200, "{url}");
            page = r.json().await.unwrap();
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            page["content"].as_array().is_some(),
            "{name}: not a page: {page}"
        );
        measured.push(Measured {
            name,
            query: q,
            ms,
            total: page["totalElements"].as_u64().unwrap_or(0),
            capped: page["totalElementsCapped"].as_bool().unwrap_or(false),
        });
    }
    jf.stop();
    if a.buffer_pool_mib.is_some() {
        resize_buffer_pool(&mut conn, pool_before).await;
    }

    println!();
    println!("| query | matches | first (cold) | median | p90 | max |");
    println!("|---|---|---|---|---|---|");
    for m in &measured {
        let mut sorted = m.ms.clone();
        sorted.sort_by(f64::total_cmp);
        let (first, median, p90, max) = (
            m.ms[0],
            percentile(&sorted, 0.5),
            percentile(&sorted, 0.9),
            sorted[sorted.len() - 1],
        );
        let matches = if m.capped {
            format!("≥ {} (capped)", m.total)
        } else {
            m.total.to_string()
        };
        println!(
            "| {} | {matches} | {first:.1} ms | {median:.1} ms | {p90:.1} ms | {max:.1} ms |",
            m.name
        );
        record(
            a.out.as_deref(),
            "search.csv",
            "rows,query,matches,capped,first_ms,median_ms,p90_ms,max_ms",
            &format!(
                "{rows},\"{}\",{},{},{first:.2},{median:.2},{p90:.2},{max:.2}",
                m.query, m.total, m.capped
            ),
        );
    }
}
