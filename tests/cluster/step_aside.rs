//! An instance whose own database link is cut steps aside (`scheduler.step_aside_after_millis`,
//! engine/standing.rs): it leaves the scheduler list, the others fire its jobs through the
//! cut, and it takes its share back once its database answers. Without it, the instants of
//! the jobs it owns were missed for the whole cut.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{SubsecRound, Utc};
use jobflow::config::OwnershipStrategy;
use jobflow::engine::ownership::OwnershipRing;

use super::harness::{MySqlDb, Rnacos, Scheduler};
use super::proxy::CutProxy;
use super::wait::eventually as wait_for;

/// How long the victim's link stays cut.
const CUT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_instance_cut_off_its_database_steps_aside_and_the_others_fire_its_jobs() {
    let _alone = super::ONE_AT_A_TIME.lock().await;
    let nacos = Rnacos::start().await;
    let db = MySqlDb::create().await;
    let (ea, eb, _naming) = super::executors(&nacos).await;
    // Each instance through a proxy of its own, so that one instance's link can be cut.
    let mut proxies = Vec::new();
    let mut schedulers = Vec::new();
    for _ in 0..3 {
        let (proxy, url) = CutProxy::in_front_of(&db.url).await;
        schedulers.push(Scheduler::start(&url, &nacos.addr()).await);
        proxies.push(proxy);
    }
    let refs: Vec<&Scheduler> = schedulers.iter().collect();
    let ids = super::converge(&refs).await;
    let victim = schedulers[0].id.clone();
    let jobs: Vec<String> = (0..9).map(|i| format!("aside-{i}")).collect();
    let ring = OwnershipRing::new(ids.clone(), OwnershipStrategy::JavaHash);
    let victims: Vec<&String> = jobs
        .iter()
        .filter(|j| ring.owner_of(j) == Some(victim.as_str()))
        .collect();
    assert!(!victims.is_empty(), "the cut-off instance owns some jobs");
    super::create_jobs(&schedulers[1], &jobs, 1).await;
    tokio::time::sleep(Duration::from_secs(4)).await;

    let cut_at = Utc::now();
    proxies[0].cut();
    let others: Vec<String> = ids.iter().filter(|i| **i != victim).cloned().collect();
    seen(
        &schedulers[1],
        &others,
        15,
        "the others to see the cut-off instance leave",
    )
    .await;
    let left = Utc::now();
    tokio::time::sleep(
        (cut_at + chrono::Duration::from_std(CUT).unwrap() - left)
            .to_std()
            .unwrap(),
    )
    .await;
    proxies[0].restore();
    let healed = Utc::now();
    seen(&schedulers[1], &ids, 20, "the instance back in the list").await;
    let back = Utc::now();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let end = Utc::now();
    println!(
        "left the list {} ms after the cut, back {} ms after the heal",
        (left - cut_at).num_milliseconds(),
        (back - healed).num_milliseconds()
    );

    let calls = super::all_calls(&ea, &eb);
    let per_fire = super::shards_per_fire(&calls);
    // Nothing ran twice, from before the cut to the end.
    let doubled: Vec<_> = per_fire
        .iter()
        .filter(|((_, t), shards)| *t >= cut_at - chrono::Duration::seconds(5) && shards.len() > 1)
        .collect();
    assert!(doubled.is_empty(), "fires run twice: {doubled:?}");
    // From a second after the others saw it leave to the heal, every instant of every job
    // ran once: the cut-off instance's jobs by the others.
    let second = chrono::Duration::seconds(1);
    let during = super::assert_exactly_once(
        &calls,
        &jobs,
        1,
        left.trunc_subsecs(0) + second,
        healed.trunc_subsecs(0),
    );
    // And again once it is back.
    let after = super::assert_exactly_once(
        &calls,
        &jobs,
        1,
        back.trunc_subsecs(0) + second * 2,
        end.trunc_subsecs(0) - second,
    );
    // What the instants between the cut and the others' takeover came to.
    let mut late: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    let mut missed = Vec::new();
    let mut t = cut_at.trunc_subsecs(0) + second;
    while t <= left.trunc_subsecs(0) + second {
        for job in &victims {
            match calls
                .iter()
                .find(|c| super::fire_key(c) == ((*job).clone(), t))
            {
                Some(c) => late
                    .entry(job.as_str())
                    .or_default()
                    .push((c.received_at - t).num_milliseconds()),
                None => missed.push(format!("{job}@{t}")),
            }
        }
        t += second;
    }
    println!(
        "{during} (job, fire) pairs once during the cut, {after} after; the cut-off \
         instance's instants before the takeover, called this late (ms): {late:?}; not \
         called: {missed:?}"
    );
}

/// Waits up to `within` seconds until `s` sees exactly the scheduler list `list`.
async fn seen(s: &Scheduler, list: &[String], within: u64, what: &str) {
    wait_for(Duration::from_secs(within), what, || async {
        (s.sees().await == list).then_some(())
    })
    .await;
}
