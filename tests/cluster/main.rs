//! Cluster tests (docs/design.md, "Ownership" and "Cluster behaviour, measured"): real `jobflow`
//! processes in nacos mode against an rnacos server and one database (MariaDB; one scenario on a
//! SQLite file shared by the processes), recording executors registered in Nacos. The scenarios run
//! one after another: each starts several processes and watches real one-second schedules.

// Shared with the fault campaign (tests/campaign), which uses other parts of it.
mod backfill;
#[allow(dead_code)]
mod harness;
mod jobs_document;
#[path = "../support/proxy.rs"]
#[allow(dead_code)]
mod proxy;
#[path = "../it/recorder.rs"]
#[allow(dead_code)]
mod recorder;
mod service_group;
mod step_aside;
#[path = "../support/wait.rs"]
mod wait;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use jobflow::config::OwnershipStrategy;
use jobflow::engine::ownership::OwnershipRing;
use serde_json::json;

use harness::{MySqlDb, Rnacos, Scheduler};
use recorder::{RecordedCall, Recorder};
use wait::eventually as wait_for;

const EXECUTOR_SERVICE: &str = "cluster-exec";

/// Two executors: one registered over gRPC by the executor SDK (ephemeral, like a Nacos 2.x
/// client), one over the 1.x HTTP open API (persistent, like an older Spring Cloud service).
/// Both remember their runs as the SDKs do: a scheduler killed between a call and writing
/// RUNNING leaves a PENDING row whose executor says it had the call, and is not called twice.
async fn executors(nacos: &Rnacos) -> (Recorder, Recorder, nacos_sdk::api::naming::NamingService) {
    let (a, b) = (Recorder::remembering().await, Recorder::remembering().await);
    // The SDK's own registration (what a Rust executor uses).
    let (ip, port) = a.addr.rsplit_once(':').unwrap();
    let naming = jobflow_executor::nacos::register(&jobflow_executor::nacos::Registration {
        server_addr: nacos.addr(),
        namespace: String::new(),
        group: None,
        service_name: EXECUTOR_SERVICE.into(),
        ip: ip.into(),
        port: port.parse().unwrap(),
        path_prefix: None,
        username: None,
        password: None,
    })
    .await
    .unwrap();
    nacos.register_http(EXECUTOR_SERVICE, &b.addr).await;
    wait_for(
        Duration::from_secs(10),
        "both executors in Nacos",
        || async { (nacos.instances(EXECUTOR_SERVICE).await.len() == 2).then_some(()) },
    )
    .await;
    (a, b, naming)
}

async fn converge(schedulers: &[&Scheduler]) -> Vec<String> {
    let mut want: Vec<String> = schedulers.iter().map(|s| s.id.clone()).collect();
    want.sort();
    for s in schedulers {
        wait_for(
            Duration::from_secs(20),
            "every instance to see the cluster",
            || async { (s.sees().await == want).then_some(()) },
        )
        .await;
    }
    want
}

fn fire_key(c: &RecordedCall) -> (String, DateTime<Utc>) {
    (
        c.header("x-job-name").to_string(),
        DateTime::parse_from_rfc3339(c.header("x-fire-time"))
            .unwrap()
            .with_timezone(&Utc),
    )
}

/// Per (job, fire): the shard indexes executed, across all executors.
fn shards_per_fire(calls: &[RecordedCall]) -> BTreeMap<(String, DateTime<Utc>), Vec<u32>> {
    let mut m: BTreeMap<(String, DateTime<Utc>), Vec<u32>> = BTreeMap::new();
    for c in calls {
        let (s, e) = c.range();
        m.entry(fire_key(c)).or_default().extend(s..=e);
    }
    for v in m.values_mut() {
        v.sort();
    }
    m
}

/// Every job fired exactly once per second in `[from, to)`, every shard exactly once.
fn assert_exactly_once(
    calls: &[RecordedCall],
    jobs: &[String],
    shards: u32,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> usize {
    let per_fire = shards_per_fire(calls);
    let all: Vec<u32> = (0..shards).collect();
    let mut checked = 0;
    for job in jobs {
        let mut t = from;
        while t < to {
            let got = per_fire.get(&(job.clone(), t));
            assert_eq!(got, Some(&all), "job {job} fire {t}: shards {got:?}");
            checked += 1;
            t += chrono::Duration::seconds(1);
        }
    }
    checked
}

async fn create_jobs(s: &Scheduler, names: &[String], shards: u32) {
    for name in names {
        let r = s
            .client
            .post(s.url("/api/v1/jobs"))
            .json(&json!({"name": name, "serviceName": EXECUTOR_SERVICE, "handler": "tick", "cron": "* * * * * ?", "shardCount": shards, "maxRetry": 0}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    }
}

fn all_calls(a: &Recorder, b: &Recorder) -> Vec<RecordedCall> {
    a.calls().into_iter().chain(b.calls()).collect()
}

fn now_s() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(0)
}

/// The multi-process scenarios run one at a time: each keeps several instances busy on
/// one-second schedules, and two at once on 2 cores would test the box, not the cluster.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// After `newcomer` joined at `joined_at` into the cluster `ids`: it owns some of `jobs`, every
/// (job, fire, range) of the `shards` ranges since ran once in `calls`, and the fires claimed
/// ahead before the join stayed with their claimer (see [`kept_across_join`]). Returns the
/// (job, fire) pairs checked and the fires the previous owners kept.
async fn check_join(
    reader: &Scheduler,
    newcomer: &Scheduler,
    ids: Vec<String>,
    jobs: &[String],
    shards: u32,
    calls: &[RecordedCall],
    joined_at: DateTime<Utc>,
) -> (usize, usize) {
    let ring = OwnershipRing::new(ids, OwnershipStrategy::JavaHash);
    assert!(
        jobs.iter()
            .any(|j| ring.owner_of(j) == Some(newcomer.id.as_str())),
        "the newcomer owns jobs"
    );
    let checked = assert_exactly_once(
        calls,
        jobs,
        shards,
        joined_at - chrono::Duration::seconds(2),
        now_s() - chrono::Duration::seconds(2),
    );
    let kept = kept_across_join(reader, &newcomer.id, jobs, &ring, joined_at).await;
    (checked, kept)
}

/// Fires claimed ahead before `newcomer` joined stay with their claimer: the jobs it now owns
/// still fire from their previous owner, once, then from the newcomer, never the other way
/// back. Read through `reader`; returns how many fires the previous owners kept.
async fn kept_across_join(
    reader: &Scheduler,
    newcomer: &str,
    jobs: &[String],
    ring: &OwnershipRing,
    joined_at: DateTime<Utc>,
) -> usize {
    let mut kept = 0;
    for job in jobs.iter().filter(|j| ring.owner_of(j) == Some(newcomer)) {
        let page = reader
            .get(&format!("/api/v1/jobs/{job}/executions?size=50"))
            .await;
        let mut fires: Vec<(DateTime<Utc>, String)> = page["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["fireTime"].as_str().unwrap().parse().unwrap(),
                    r["schedulerInstance"].as_str().unwrap().to_string(),
                )
            })
            .filter(|(fire, _)| *fire >= joined_at)
            .collect();
        fires.sort();
        fires.dedup();
        if let Some(first_new) = fires.iter().position(|(_, by)| by == newcomer) {
            assert!(
                fires[first_new..].iter().all(|(_, by)| by == newcomer),
                "{job}: {fires:?}"
            );
            kept += first_new;
        }
    }
    kept
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_scenarios() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let nacos = Rnacos::start().await;
    let db = MySqlDb::create().await;
    let (ea, eb, naming) = executors(&nacos).await;
    let mut s1 = Scheduler::start(&db.url, &nacos.addr()).await;
    let s2 = Scheduler::start(&db.url, &nacos.addr()).await;
    let s3 = Scheduler::start(&db.url, &nacos.addr()).await;
    let ids = converge(&[&s1, &s2, &s3]).await;
    let registered = nacos.instances("jobflow-scheduler").await;
    assert_eq!(
        registered, ids,
        "every scheduler registered under jobflow-scheduler"
    );

    let jobs: Vec<String> = (0..9).map(|i| format!("tick-{i}")).collect();
    let ring = OwnershipRing::new(ids.clone(), OwnershipStrategy::JavaHash);
    let owners: BTreeSet<&str> = jobs.iter().filter_map(|j| ring.owner_of(j)).collect();
    assert_eq!(
        owners.len(),
        3,
        "the job names spread over all three instances"
    );
    create_jobs(&s2, &jobs, 4).await;

    // 1. Steady state: 20 s of one-second fires, each (job, fire, shard) exactly once, each job
    //    fired by the instance the Java-compatible hash names.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let from = now_s() + chrono::Duration::seconds(1);
    tokio::time::sleep(Duration::from_secs(21)).await;
    let to = from + chrono::Duration::seconds(20);
    let steady = assert_exactly_once(&all_calls(&ea, &eb), &jobs, 4, from, to);
    for job in &jobs {
        let page = s1
            .get(&format!("/api/v1/jobs/{job}/executions?size=50"))
            .await;
        for row in page["content"].as_array().unwrap() {
            let fire: DateTime<Utc> = row["fireTime"].as_str().unwrap().parse().unwrap();
            if fire >= from && fire < to {
                assert_eq!(
                    row["schedulerInstance"].as_str(),
                    ring.owner_of(job),
                    "{job} fired by the wrong instance"
                );
            }
        }
    }
    // Both executors took part, whichever way they registered.
    assert!(!ea.calls().is_empty() && !eb.calls().is_empty());
    println!("steady state: {steady} (job, fire) pairs checked, 4 shards each");

    // 2. kill -9 of one scheduler: survivors fire its jobs within 5 s; nothing lost or doubled.
    let victim_jobs: Vec<String> = jobs
        .iter()
        .filter(|j| ring.owner_of(j) == Some(s1.id.as_str()))
        .cloned()
        .collect();
    let killed_at = Utc::now();
    s1.kill9();
    let takeover = wait_for(
        Duration::from_secs(15),
        "a survivor firing the victim's jobs",
        || async {
            let rows = s2
                .get(&format!(
                    "/api/v1/jobs/{}/executions?size=20",
                    victim_jobs[0]
                ))
                .await;
            rows["content"].as_array().unwrap().iter().find_map(|r| {
                let fire: DateTime<Utc> = r["fireTime"].as_str().unwrap().parse().unwrap();
                let by = r["schedulerInstance"].as_str().unwrap();
                (fire > killed_at && by != s1.id).then(|| {
                    r["triggerTime"]
                        .as_str()
                        .unwrap()
                        .parse::<DateTime<Utc>>()
                        .unwrap()
                        - killed_at
                })
            })
        },
    )
    .await;
    println!("takeover after kill -9: {} ms", takeover.num_milliseconds());
    assert!(
        takeover < chrono::Duration::seconds(5),
        "takeover took {takeover}"
    );
    // The victim's fires claimed ahead (up to 2 s past the kill) are called by compensation
    // half a lease (5 s) after their instant, once it has left the list.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let gap_from = killed_at.trunc_subsecs(0) - chrono::Duration::seconds(1);
    let gap_to = now_s() - chrono::Duration::seconds(2);
    let across_kill = assert_exactly_once(&all_calls(&ea, &eb), &jobs, 4, gap_from, gap_to);
    println!("across the kill: {across_kill} (job, fire) pairs checked");
    let ids2 = converge(&[&s2, &s3]).await;

    // 3. A fourth instance joins: ownership moves without a lost or doubled fire.
    let s4 = Scheduler::start(&db.url, &nacos.addr()).await;
    let joined_at = now_s();
    let ids3 = converge(&[&s2, &s3, &s4]).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let calls = all_calls(&ea, &eb);
    let (across_join, kept) = check_join(&s2, &s4, ids3, &jobs, 4, &calls, joined_at).await;
    println!("across the join: {across_join} (job, fire) pairs checked");
    println!("fires claimed ahead by the previous owners and kept across the join: {kept}");

    // SIGTERM: the instance deregisters before it exits, survivors take over at once.
    let mut s3 = s3;
    let term_at = now_s();
    let status = s3.terminate();
    assert!(status.success(), "exit status {status:?}");
    let listed = nacos.instances("jobflow-scheduler").await;
    assert!(
        !listed.contains(&s3.id),
        "deregistered by the time it exited: {listed:?}"
    );
    converge(&[&s2, &s4]).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let across_term = assert_exactly_once(
        &all_calls(&ea, &eb),
        &jobs,
        4,
        term_at - chrono::Duration::seconds(1),
        now_s() - chrono::Duration::seconds(2),
    );
    println!("across the SIGTERM: {across_term} (job, fire) pairs checked");
    let _ = ids2;

    // Stable range placement across the steady state, the kill -9, the join and the
    // SIGTERM: whichever instance fired a job, range i ran on executor i of the sorted list.
    let mut sorted = [ea.addr.clone(), eb.addr.clone()];
    sorted.sort();
    for (addr, calls) in [(&ea.addr, ea.calls()), (&eb.addr, eb.calls())] {
        for c in &calls {
            let (start, _) = c.range();
            let planned = &sorted[if start == 0 { 0 } else { 1 }];
            assert_eq!(
                addr,
                planned,
                "range starting at {start} of {:?} ran on {addr}",
                fire_key(c)
            );
        }
    }

    // 4. An executor deregistered: it stops receiving calls; its ranges go to the live one.
    nacos.deregister_http(EXECUTOR_SERVICE, &eb.addr).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cut = Utc::now();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        eb.calls().iter().all(|c| c.received_at < cut),
        "a deregistered executor kept receiving calls"
    );
    let late: Vec<RecordedCall> = ea
        .calls()
        .into_iter()
        .filter(|c| c.received_at >= cut)
        .collect();
    for shards in shards_per_fire(&late).values() {
        assert_eq!(
            shards,
            &vec![0, 1, 2, 3],
            "the live executor runs every shard"
        );
    }
    assert!(!late.is_empty());

    // 5. Nacos down for 10 s and back: scheduling continues on the last known lists, readiness
    //    reports it, and the instances re-register by themselves.
    let mut nacos = nacos;
    let down_at = now_s();
    nacos.stop();
    wait_for(
        Duration::from_secs(15),
        "readiness to report Nacos down",
        || async {
            let r = s2.client.get(s2.url("/health/ready")).send().await.ok()?;
            (r.status() == 503).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    nacos.restart().await;
    let back_at = now_s();
    wait_for(
        Duration::from_secs(30),
        "the schedulers to re-register",
        || async {
            let mut want = vec![s2.id.clone(), s4.id.clone()];
            want.sort();
            (nacos.instances("jobflow-scheduler").await == want).then_some(())
        },
    )
    .await;
    wait_for(Duration::from_secs(30), "readiness back to 200", || async {
        let r = s2.client.get(s2.url("/health/ready")).send().await.ok()?;
        (r.status() == 200).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let across_outage = assert_exactly_once(
        &ea.calls(),
        &jobs,
        4,
        down_at,
        now_s() - chrono::Duration::seconds(2),
    );
    println!(
        "across the Nacos outage ({}s down): {across_outage} (job, fire) pairs checked",
        (back_at - down_at).num_seconds()
    );
    drop(naming);
}

/// An ownership move on SQLite: one database file shared by the instances of one host. Fires
/// claimed ahead before a join stay with their claimer, and every (job, fire, range) runs
/// once across the join.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_ahead_survive_a_join_on_sqlite() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let nacos = Rnacos::start().await;
    let (ea, eb, _naming) = executors(&nacos).await;
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("jobflow.db").display());
    let s1 = Scheduler::start(&db, &nacos.addr()).await;
    converge(&[&s1]).await;
    let jobs: Vec<String> = (0..8).map(|i| format!("lite-{i}")).collect();
    create_jobs(&s1, &jobs, 2).await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    let joined_at = now_s();
    let s2 = Scheduler::start(&db, &nacos.addr()).await;
    let ids = converge(&[&s1, &s2]).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let calls = all_calls(&ea, &eb);
    let (checked, kept) = check_join(&s1, &s2, ids, &jobs, 2, &calls, joined_at).await;
    // At the join the first instance had claimed the next 2 s of every job
    // (`scheduler.claim_ahead_millis`): those fires stay its own.
    assert!(kept > 0, "no fire claimed ahead was kept by its claimer");
    println!(
        "SQLite, across the join: {checked} (job, fire) pairs checked, {kept} fires kept by their claimer"
    );
}
