//! M JobFlow instances in nacos mode on rnacos and one MariaDB database, N one-second jobs:
//! the share of jobs that change owner when an instance joins (measured from who fired
//! each job, and computed from the ownership function for the same instance ids), and the
//! takeover after `kill -9` of an instance.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use chrono::{DateTime, SubsecRound, Utc};
use jobflow::config::OwnershipStrategy;
use jobflow::engine::ownership::OwnershipRing;
use sqlx::Connection;

use crate::Args;
use crate::harness::{MySqlDb, Rnacos, Scheduler};
use crate::support::{create_jobs, percentile, record, recorder};

/// Who fired each job at `instant` (from the execution rows).
async fn owners_at(db: &str, instant: DateTime<Utc>) -> HashMap<String, String> {
    let mut conn = sqlx::MySqlConnection::connect(db).await.unwrap();
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT job_name, scheduler_instance FROM job_execution WHERE fire_time = ? AND trigger_type = 'CRON'",
    )
    .bind(instant)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    rows.into_iter().collect()
}

async fn converge(instances: &[&Scheduler]) -> Vec<String> {
    let mut want: Vec<String> = instances.iter().map(|s| s.id.clone()).collect();
    want.sort();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut all = true;
        for s in instances {
            all &= s.sees().await == want;
        }
        if all {
            return want;
        }
        assert!(Instant::now() < deadline, "instances did not converge");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The share of `names` whose owner differs between two instance lists.
fn moved_share(names: &[String], before: &OwnershipRing, after: &OwnershipRing) -> f64 {
    let moved = names
        .iter()
        .filter(|n| before.owner_of(n) != after.owner_of(n))
        .count();
    moved as f64 / names.len() as f64
}

pub async fn run(a: &Args) {
    let strategy: OwnershipStrategy =
        serde_json::from_value(serde_json::Value::String(a.strategy.clone()))
            .expect("--strategy java-hash | rendezvous");
    let nacos = Rnacos::start().await;
    let db = MySqlDb::create().await;
    let (executors, calls) = recorder(1).await;
    nacos.register_http("bench", &executors[0]).await;
    let settings = [
        ("JOBFLOW__SCHEDULER__OWNERSHIP", a.strategy.as_str()),
        ("JOBFLOW__LOG__LEVEL", "warn,jobflow::app=info"),
    ];
    let mut schedulers = Vec::new();
    let mut ready_ms = Vec::new();
    for _ in 0..a.instances {
        let spawned = Instant::now();
        let s = Scheduler::start_with(&db.url, &nacos.addr(), &settings).await;
        while s
            .client
            .get(s.url("/health/ready"))
            .send()
            .await
            .map_or(true, |r| r.status() != 200)
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        ready_ms.push(spawned.elapsed().as_secs_f64() * 1000.0);
        schedulers.push(s);
    }
    let all: Vec<&Scheduler> = schedulers.iter().collect();
    let before_ids = converge(&all).await;
    let api = schedulers[0].id.clone();
    create_jobs(&api, a.jobs, "* * * * * ?", 1, "ALLOW").await;
    let names: Vec<String> = (0..a.jobs).map(|i| format!("bench-{i:06}")).collect();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let t_before = Utc::now().trunc_subsecs(0) - chrono::Duration::seconds(2);
    let owners_before = owners_at(&db.url, t_before).await;

    // One instance joins.
    let joiner = Scheduler::start_with(&db.url, &nacos.addr(), &settings).await;
    let joined_at = Utc::now();
    schedulers.push(joiner);
    let all: Vec<&Scheduler> = schedulers.iter().collect();
    let after_ids = converge(&all).await;
    let converged_ms = (Utc::now() - joined_at).num_milliseconds();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let t_after = Utc::now().trunc_subsecs(0) - chrono::Duration::seconds(2);
    let owners_after = owners_at(&db.url, t_after).await;
    let compared: Vec<&String> = names
        .iter()
        .filter(|n| owners_before.contains_key(*n) && owners_after.contains_key(*n))
        .collect();
    let moved = compared
        .iter()
        .filter(|n| owners_before[**n] != owners_after[**n])
        .count();
    let measured_share = moved as f64 / compared.len().max(1) as f64;
    let ring_before = OwnershipRing::new(before_ids.clone(), strategy);
    let ring_after = OwnershipRing::new(after_ids.clone(), strategy);
    let computed_share = moved_share(&names, &ring_before, &ring_after);
    let many: Vec<String> = (0..100_000).map(|i| format!("job-{i}")).collect();
    let computed_many = moved_share(&many, &ring_before, &ring_after);
    let per_instance: BTreeMap<&str, usize> =
        owners_after.values().fold(BTreeMap::new(), |mut m, o| {
            *m.entry(o.as_str()).or_default() += 1;
            m
        });

    // kill -9 of the instance owning the most jobs; survivors take its jobs over.
    let (victim_id, _) = per_instance
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(k, v)| (k.to_string(), *v))
        .unwrap();
    let victim_jobs: Vec<String> = owners_after
        .iter()
        .filter(|(_, o)| **o == victim_id)
        .map(|(j, _)| j.clone())
        .collect();
    let victim = schedulers.iter().position(|s| s.id == victim_id).unwrap();
    let killed_at = Utc::now();
    schedulers[victim].kill9();
    tokio::time::sleep(Duration::from_secs(12)).await;
    let end = Utc::now().trunc_subsecs(0) - chrono::Duration::seconds(2);
    let calls = calls.lock().unwrap().clone();
    // Per victim job: when its first call for an instant after the kill arrived.
    let mut first: HashMap<&str, DateTime<Utc>> = HashMap::new();
    for c in calls.iter().filter(|c| c.fire > killed_at) {
        let e = first.entry(c.job.as_str()).or_insert(c.received);
        *e = (*e).min(c.received);
    }
    let mut takeover: Vec<f64> = victim_jobs
        .iter()
        .filter_map(|j| first.get(j.as_str()))
        .map(|t| (*t - killed_at).num_milliseconds() as f64)
        .collect();
    takeover.sort_by(|x, y| x.partial_cmp(y).unwrap());
    // Every job, every instant from the second before the kill: exactly one call.
    let window_from = killed_at.trunc_subsecs(0) - chrono::Duration::seconds(1);
    let mut per_fire: HashMap<(&str, DateTime<Utc>), usize> = HashMap::new();
    for c in calls
        .iter()
        .filter(|c| c.fire >= window_from && c.fire < end)
    {
        *per_fire.entry((c.job.as_str(), c.fire)).or_default() += 1;
    }
    let expected = a.jobs * (end - window_from).num_seconds() as usize;
    let doubled = per_fire.values().filter(|n| **n > 1).count();
    let lost = expected.saturating_sub(per_fire.len());

    println!(
        "# cluster — {} instances + 1 joining, {} one-second jobs, {} ownership",
        a.instances, a.jobs, a.strategy
    );
    println!(
        "start-up to ready in nacos mode: {} ms",
        ready_ms
            .iter()
            .map(|m| format!("{m:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("join: all instances saw the new member after {converged_ms} ms");
    println!(
        "| instances | strategy | jobs moved on join (measured) | computed, same ids | computed, 100,000 names | ideal 1/(M+1) | victim's jobs | takeover first | median | last | lost | doubled |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let ideal = 1.0 / (a.instances as f64 + 1.0);
    println!(
        "| {} → {} | {} | {:.1} % ({moved}/{}) | {:.1} % | {:.1} % | {:.1} % | {} | {:.0} ms | {:.0} ms | {:.0} ms | {lost} | {doubled} |",
        a.instances,
        a.instances + 1,
        a.strategy,
        measured_share * 100.0,
        compared.len(),
        computed_share * 100.0,
        computed_many * 100.0,
        ideal * 100.0,
        victim_jobs.len(),
        takeover.first().copied().unwrap_or(f64::NAN),
        percentile(&takeover, 0.5),
        takeover.last().copied().unwrap_or(f64::NAN),
    );
    record(
        a.out.as_deref(),
        "cluster.csv",
        "instances,strategy,jobs,moved_measured,moved_computed,moved_computed_100k,victim_jobs,takeover_first_ms,takeover_median_ms,takeover_last_ms,lost,doubled",
        &format!(
            "{},{},{},{measured_share:.4},{computed_share:.4},{computed_many:.4},{},{:.0},{:.0},{:.0},{lost},{doubled}",
            a.instances,
            a.strategy,
            a.jobs,
            victim_jobs.len(),
            takeover.first().copied().unwrap_or(f64::NAN),
            percentile(&takeover, 0.5),
            takeover.last().copied().unwrap_or(f64::NAN),
        ),
    );
    assert_eq!(
        victim_jobs.len(),
        takeover.len(),
        "some of the victim's jobs never fired again"
    );
}
