//! Executors in a Nacos group of their own (job field `serviceGroup`): a team registers its
//! service in its group, and its jobs name that group; a job that names none looks in the
//! scheduler's `nacos.group`.

use std::time::Duration;

use serde_json::json;

use super::harness::{MySqlDb, Rnacos, Scheduler};
use super::recorder::Recorder;
use super::wait::eventually as wait_for;

const SERVICE: &str = "billing-exec";

/// The same service name in two groups, one recorder in each: a job naming the group
/// `payments` reaches the recorder registered there, a job naming no group the one in
/// `DEFAULT_GROUP`, each on every fire; the answer and the overview show the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_reaches_the_executors_of_the_group_it_names() {
    let _alone = super::ONE_AT_A_TIME.lock().await;
    let nacos = Rnacos::start().await;
    let (grouped, plain) = (Recorder::start().await, Recorder::start().await);
    nacos
        .register_http_in(SERVICE, "payments", &grouped.addr)
        .await;
    nacos.register_http(SERVICE, &plain.addr).await;
    wait_for(
        Duration::from_secs(10),
        "both executors in Nacos",
        || async {
            let both = nacos.instances_in(SERVICE, "payments").await.len() == 1
                && nacos.instances(SERVICE).await.len() == 1;
            both.then_some(())
        },
    )
    .await;
    let db = MySqlDb::create().await;
    let s = Scheduler::start(&db.url, &nacos.addr()).await;
    for (name, group) in [
        ("in-payments", json!("payments")),
        ("in-default", json!(null)),
    ] {
        let r = s
            .client
            .post(s.url("/api/v1/jobs"))
            .json(
                &json!({"name": name, "serviceName": SERVICE, "serviceGroup": group,
                "handler": "tick", "cron": "* * * * * ?", "maxRetry": 0}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
        let job: serde_json::Value = r.json().await.unwrap();
        assert_eq!(job["serviceGroup"], group);
    }
    wait_for(
        Duration::from_secs(15),
        "three fires of each job",
        || async {
            let enough = |r: &Recorder, job: &str| {
                r.calls()
                    .iter()
                    .filter(|c| c.body["jobName"] == job)
                    .count()
                    >= 3
            };
            (enough(&grouped, "in-payments") && enough(&plain, "in-default")).then_some(())
        },
    )
    .await;
    let strays = |r: &Recorder, job: &str| {
        r.calls()
            .iter()
            .filter(|c| c.body["jobName"] == job)
            .count()
    };
    assert_eq!(
        strays(&grouped, "in-default"),
        0,
        "a default-group job in payments"
    );
    assert_eq!(
        strays(&plain, "in-payments"),
        0,
        "a payments job in the default group"
    );
    let overview = s.get("/api/v1/overview").await;
    let services = overview["executors"].as_array().unwrap();
    for (group, addr) in [
        (json!("payments"), &grouped.addr),
        (json!(null), &plain.addr),
    ] {
        let entry = services
            .iter()
            .find(|e| e["serviceName"] == SERVICE && e["serviceGroup"] == group)
            .unwrap_or_else(|| panic!("{overview}"));
        assert_eq!(entry["instances"], json!([addr]), "{overview}");
    }
}
