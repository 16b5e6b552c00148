//! A backfill across three instances whose leader is killed (`kill -9`) while it records:
//! every instant of the interval runs once at the executor, none twice, none lost
//! (docs/api.md, "Backfills").

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, DurationRound, Utc};
use serde_json::{Value, json};

use super::harness::{MySqlDb, Rnacos, Scheduler};
use super::wait::eventually as wait_for;

const SERVICE: &str = "backfill-exec";

/// Each run's fire time and execution id, in the order they ran.
type Runs = Arc<Mutex<Vec<(DateTime<Utc>, String)>>>;

/// An executor on the Rust SDK (it answers status and remembers its runs, so a row whose
/// scheduler died after the call is not called again) recording each run's fire time and
/// execution id.
async fn sdk_executor() -> (String, Runs) {
    let runs: Runs = Arc::default();
    let seen = runs.clone();
    let executor = jobflow_executor::JobExecutor::without_signatures()
        .handler("h", move |ctx: jobflow_executor::JobContext| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push((ctx.fire_time, ctx.execution_id.clone()));
                jobflow_executor::JobResult::success("backfilled")
            }
        })
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, executor).await });
    (addr, runs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backfill_runs_each_instant_once_across_a_leader_killed_mid_way() {
    let _alone = super::ONE_AT_A_TIME.lock().await;
    let nacos = Rnacos::start().await;
    let db = MySqlDb::create().await;
    let (addr, runs) = sdk_executor().await;
    nacos.register_http(SERVICE, &addr).await;
    let mut schedulers = vec![
        Scheduler::start(&db.url, &nacos.addr()).await,
        Scheduler::start(&db.url, &nacos.addr()).await,
        Scheduler::start(&db.url, &nacos.addr()).await,
    ];
    let refs: Vec<&Scheduler> = schedulers.iter().collect();
    let ids = super::converge(&refs).await;
    wait_for(Duration::from_secs(10), "the executor in Nacos", || async {
        (nacos.instances(SERVICE).await.len() == 1).then_some(())
    })
    .await;
    // The leader is the first of the sorted list; the job is made and the backfill sent
    // through another instance.
    let leader = schedulers.iter().position(|s| s.id == ids[0]).unwrap();
    let other = (leader + 1) % 3;
    let client = reqwest::Client::new();
    let post = |path: String, body: Value| {
        let (client, url) = (client.clone(), schedulers[other].url(&path));
        async move {
            let r = client.post(url).json(&body).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (status, _) = post(
        "/api/v1/jobs".into(),
        json!({"name": "every-second", "serviceName": SERVICE, "handler": "h",
            "cron": "* * * * * ?", "enabled": false}),
    )
    .await;
    assert_eq!(status, 201);
    let from = Utc::now()
        .duration_trunc(chrono::Duration::minutes(1))
        .unwrap()
        - chrono::Duration::minutes(5);
    let to = from + chrono::Duration::seconds(60);
    let (status, started) = post(
        "/api/v1/jobs/every-second/backfill".into(),
        json!({"from": from.to_rfc3339(), "to": to.to_rfc3339(),
            "backfillId": "after-the-outage", "maxPerSecond": 4}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["fires"], 60);
    let progress = |s: &Scheduler| {
        let (client, url) = (
            client.clone(),
            s.url("/api/v1/jobs/every-second/backfills/after-the-outage"),
        );
        async move {
            client
                .get(url)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    wait_for(Duration::from_secs(30), "a quarter recorded", || async {
        (progress(&schedulers[other]).await["done"].as_u64().unwrap() >= 15).then_some(())
    })
    .await;
    schedulers[leader].kill9();
    println!("leader {} killed mid-backfill", ids[0]);
    let done = wait_for(Duration::from_secs(90), "the backfill done", || async {
        let b = progress(&schedulers[other]).await;
        (b["status"] == "DONE").then_some(b)
    })
    .await;
    assert_eq!(done["done"], 60);
    // Rows the dead leader recorded but had not called are called once their lease is over.
    wait_for(Duration::from_secs(60), "60 runs", || async {
        (runs.lock().unwrap().len() >= 60).then_some(())
    })
    .await;
    // A second run of an instant would come from a row called again; give it the time a
    // recovery pass takes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = runs.lock().unwrap().clone();
    let mut per_instant: BTreeMap<DateTime<Utc>, usize> = BTreeMap::new();
    for (fire, id) in &seen {
        assert!(id.starts_with("every-second:BACKFILL:"), "{id}");
        *per_instant.entry(*fire).or_default() += 1;
    }
    assert_eq!(per_instant.len(), 60, "every instant ran");
    assert!(
        per_instant.values().all(|n| *n == 1),
        "an instant ran twice: {per_instant:?}"
    );
    assert_eq!(per_instant.keys().next(), Some(&from));
    drop(schedulers);
}
