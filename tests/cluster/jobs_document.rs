//! Jobs as code on a real rnacos with authentication on (docs/jobs-as-code.md): the jobs document
//! is published, changed, broken, fixed, trimmed and removed through the Nacos open API while two
//! schedulers in nacos mode (and one standalone) follow it. Naming and config both log in with
//! `nacos.username` / `nacos.password`; wrong ones stop start-up with a clear message.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::Digest;

use super::harness::{MySqlDb, Rnacos, Scheduler};
use super::recorder::Recorder;
use super::wait::eventually as wait_for;

const DATA_ID: &str = "jobflow-jobs.yaml";
const GROUP: &str = "JOBFLOW";
const USER: &str = "jobflow-ops";
const PASSWORD: &str = "Nacos-Secret-4711";
const SERVICE: &str = "doc-exec";

/// A document of `(name, cron, jobParams)` entries, written as an operator would.
fn document(jobs: &[(&str, &str, Value)]) -> String {
    let mut text = String::from("# JobFlow jobs, reviewed like code\njobs:\n");
    for (name, cron, params) in jobs {
        text.push_str(&format!(
            "  - name: {name}\n    serviceName: {SERVICE}\n    handler: tick\n    cron: \"{cron}\"\n    maxRetry: 0\n    jobParams: {params}\n"
        ));
    }
    text
}

fn sha256(text: &str) -> String {
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// The instances' log lines about the content hashed `hash`: (applied, applied already).
fn outcomes(schedulers: &[&Scheduler], hash: &str, marks: &[usize]) -> (usize, usize) {
    let (mut applied, mut already) = (0, 0);
    for (s, &mark) in schedulers.iter().zip(marks) {
        for line in s.log.lock().unwrap().iter().skip(mark) {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if v["hash"] != hash {
                continue;
            }
            match v["message"].as_str().unwrap_or("") {
                "jobs document applied" => applied += 1,
                m if m.starts_with("jobs document applied already") => already += 1,
                _ => {}
            }
        }
    }
    (applied, already)
}

async fn job(s: &Scheduler, name: &str) -> (u16, Value) {
    let r = s
        .client
        .get(s.url(&format!("/api/v1/jobs/{name}")))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn metric(s: &Scheduler, name: &str) -> f64 {
    let text = s
        .client
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// How many log lines each scheduler has written so far.
fn marks(schedulers: &[&Scheduler]) -> Vec<usize> {
    schedulers
        .iter()
        .map(|s| s.log.lock().unwrap().len())
        .collect()
}

/// Waits until every scheduler has applied or skipped the content published after `marks`
/// (exactly one applied it).
async fn everyone_handled(schedulers: &[&Scheduler], text: &str, marks: &[usize]) {
    let hash = sha256(text);
    let n = schedulers.len();
    wait_for(
        Duration::from_secs(20),
        "every instance to handle the published document",
        || async {
            let (applied, already) = outcomes(schedulers, &hash, marks);
            (applied + already == n).then_some(())
        },
    )
    .await;
    assert_eq!(
        outcomes(schedulers, &hash, marks),
        (1, n - 1),
        "exactly one instance applies a push"
    );
}

/// Calls of `job` received after `since` carrying `params`.
fn calls_with(
    rec: &Recorder,
    job: &str,
    params: &Value,
    since: chrono::DateTime<chrono::Utc>,
) -> usize {
    rec.calls()
        .iter()
        .filter(|c| {
            c.header("x-job-name") == job && &c.body["jobParams"] == params && c.received_at > since
        })
        .count()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_document_on_rnacos_with_auth() {
    let nacos = Rnacos::start_with_auth(USER, PASSWORD).await;
    let db = MySqlDb::create().await;
    let rec = Recorder::start().await;
    // The SDK logs in too, in the namespace `public` as the scheduler names it.
    let (ip, port) = rec.addr.rsplit_once(':').unwrap();
    let _naming = jobflow_executor::nacos::register(&jobflow_executor::nacos::Registration {
        server_addr: nacos.addr(),
        namespace: "public".into(),
        group: None,
        service_name: SERVICE.into(),
        ip: ip.into(),
        port: port.parse().unwrap(),
        path_prefix: None,
        username: Some(USER.into()),
        password: Some(PASSWORD.into()),
    })
    .await
    .unwrap();
    wait_for(Duration::from_secs(10), "the executor in Nacos", || async {
        (nacos.instances(SERVICE).await == [rec.addr.clone()]).then_some(())
    })
    .await;

    let settings = [
        ("JOBFLOW__NACOS__USERNAME", USER),
        ("JOBFLOW__NACOS__PASSWORD", PASSWORD),
        ("JOBFLOW__NACOS__JOBS_DATA_ID", DATA_ID),
        (
            "JOBFLOW__LOG__LEVEL",
            "debug,sqlx=warn,hyper=info,h2=info,tonic=info,tower=info",
        ),
    ];
    let s1 = Scheduler::start_with(&db.url, &nacos.addr(), &settings).await;
    let s2 = Scheduler::start_with(&db.url, &nacos.addr(), &settings[..3]).await;
    let both = [&s1, &s2];
    super::converge(&both).await;

    // 1. Publish: the job appears on both instances as NACOS and fires as defined.
    let v1 = document(&[("doc-tick", "* * * * * ?", json!({"v": 1}))]);
    let mark = marks(&both);
    nacos.publish_config(DATA_ID, GROUP, &v1).await;
    everyone_handled(&both, &v1, &mark).await;
    for s in both {
        let (status, j) = job(s, "doc-tick").await;
        assert_eq!((status, j["source"].as_str()), (200, Some("NACOS")), "{j}");
        assert_eq!(j["createdBy"], format!("nacos:{GROUP}/{DATA_ID}"));
    }
    let t = chrono::Utc::now();
    wait_for(
        Duration::from_secs(10),
        "doc-tick fired with v1",
        || async { (calls_with(&rec, "doc-tick", &json!({"v": 1}), t) > 0).then_some(()) },
    )
    .await;

    // The same content published again: no instance writes anything.
    let applied_before = metric(&s1, "nacos_jobs_document_applied_total").await
        + metric(&s2, "nacos_jobs_document_applied_total").await;
    nacos.publish_config(DATA_ID, GROUP, &v1).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let applied_after = metric(&s1, "nacos_jobs_document_applied_total").await
        + metric(&s2, "nacos_jobs_document_applied_total").await;
    assert_eq!(applied_before, applied_after);
    // The application is in the audit trail once, as `nacos`'s.
    let audit: Value = s1
        .client
        .get(s1.url("/api/v1/audit?action=NACOS_DOCUMENT_APPLIED"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(audit["totalElements"], 1, "{audit}");
    let entry = &audit["content"][0];
    assert_eq!(
        (&entry["actor"], &entry["target"]),
        (&json!("nacos"), &json!(DATA_ID))
    );
    assert_eq!(entry["detail"]["created"], json!(["doc-tick"]));
    assert_eq!(entry["detail"]["contentSha256"], sha256(&v1));

    // A standalone instance with its own database follows the same document.
    let db2 = MySqlDb::create().await;
    let mut standalone_settings = settings[..3].to_vec();
    standalone_settings.push(("JOBFLOW__DISCOVERY__MODE", "standalone"));
    let lone = Scheduler::start_with(&db2.url, &nacos.addr(), &standalone_settings).await;
    let (status, j) = job(&lone, "doc-tick").await;
    assert_eq!((status, j["source"].as_str()), (200, Some("NACOS")), "{j}");

    // 2. Change: new parameters and a second job.
    let v2 = document(&[
        ("doc-tick", "* * * * * ?", json!({"v": 2})),
        ("doc-other", "0 0 3 * * ?", json!({})),
    ]);
    let mark = marks(&both);
    nacos.publish_config(DATA_ID, GROUP, &v2).await;
    everyone_handled(&both, &v2, &mark).await;
    let t = chrono::Utc::now();
    wait_for(
        Duration::from_secs(10),
        "doc-tick fired with v2",
        || async { (calls_with(&rec, "doc-tick", &json!({"v": 2}), t) > 0).then_some(()) },
    )
    .await;
    assert_eq!(job(&s2, "doc-other").await.0, 200);

    // 3. Break: rejected as a whole, the error names entry and field, the old set keeps
    //    firing, readiness stays green.
    let broken = format!(
        "{}  - name: doc-broken\n    serviceName: {SERVICE}\n    handler: tick\n    cron: \"every second\"\n",
        document(&[("doc-tick", "* * * * * ?", json!({"v": 3}))])
    );
    nacos.publish_config(DATA_ID, GROUP, &broken).await;
    let hash = sha256(&broken);
    for s in both {
        let line = wait_for(Duration::from_secs(20), "the rejection", || async {
            s.log
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(&hash) && l.contains("rejected"))
                .cloned()
        })
        .await;
        assert!(line.contains("jobs[1] (`doc-broken`): cron"), "{line}");
        assert!(metric(s, "nacos_jobs_document_rejected_total").await >= 1.0);
        let ready = s.client.get(s.url("/health/ready")).send().await.unwrap();
        assert_eq!(ready.status(), 200);
    }
    assert_eq!(job(&s1, "doc-broken").await.0, 404);
    assert_eq!(job(&s1, "doc-other").await.0, 200);
    let t = chrono::Utc::now();
    wait_for(
        Duration::from_secs(10),
        "doc-tick still firing with v2",
        || async { (calls_with(&rec, "doc-tick", &json!({"v": 2}), t) > 0).then_some(()) },
    )
    .await;

    // 4. Fix, and drop an entry: doc-other is deleted, doc-tick fires with the fix.
    let v4 = document(&[("doc-tick", "* * * * * ?", json!({"v": 4}))]);
    let mark = marks(&both);
    nacos.publish_config(DATA_ID, GROUP, &v4).await;
    everyone_handled(&both, &v4, &mark).await;
    assert_eq!(job(&s1, "doc-other").await.0, 404);
    let t = chrono::Utc::now();
    wait_for(
        Duration::from_secs(10),
        "doc-tick fired with v4",
        || async { (calls_with(&rec, "doc-tick", &json!({"v": 4}), t) > 0).then_some(()) },
    )
    .await;

    // 5. The API refuses to change or delete a NACOS job; operators' switches stay.
    let put = s1
        .client
        .put(s1.url("/api/v1/jobs/doc-tick"))
        .json(&json!({"serviceName": SERVICE, "handler": "tick", "cron": "0 0 1 * * ?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 409);
    let problem: Value = put.json().await.unwrap();
    assert!(
        problem["detail"].as_str().unwrap().contains(DATA_ID),
        "{problem}"
    );
    let del = s2
        .client
        .delete(s2.url("/api/v1/jobs/doc-tick"))
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 409);
    let off = s2
        .client
        .patch(s2.url("/api/v1/jobs/doc-tick/enabled?enabled=false"))
        .send()
        .await
        .unwrap();
    assert_eq!(off.status(), 200);
    let on = s1
        .client
        .patch(s1.url("/api/v1/jobs/doc-tick/enabled?enabled=true"))
        .send()
        .await
        .unwrap();
    assert_eq!(on.status(), 200);

    // 6. Publish to scheduled: the time from the publish request to the owning engine
    //    holding the new job's timer (ownedJobs), over several runs.
    let mut scheduled = Vec::new();
    let mut visible = Vec::new();
    let mut entries: Vec<(String, &str, Value)> =
        vec![("doc-tick".into(), "* * * * * ?", json!({"v": 4}))];
    for run in 0..7 {
        let owned_before = owned(&both).await;
        entries.push((
            format!("doc-latency-{run}"),
            "0 0 2 * * ?",
            json!({"run": run}),
        ));
        let list: Vec<(&str, &str, Value)> = entries
            .iter()
            .map(|(n, c, p)| (n.as_str(), *c, p.clone()))
            .collect();
        let text = document(&list);
        let mark = marks(&both);
        let sent = nacos.publish_config(DATA_ID, GROUP, &text).await;
        let name = format!("doc-latency-{run}");
        let mut seen = None;
        let mut done = false;
        // A sample needs a stable membership: a load spike that makes an instance miss
        // heartbeats moves ownership around, and such a sample is left out, not failed.
        while sent.elapsed() < Duration::from_secs(30) {
            if seen.is_none() && job(&s1, &name).await.0 == 200 {
                seen = Some(sent.elapsed());
            }
            if holds_timer(&both, &name, &owned_before).await {
                done = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if !done {
            println!("run {run}: ownership moved during the sample; left out");
            everyone_handled(&both, &text, &mark).await;
            continue;
        }
        scheduled.push(sent.elapsed());
        visible.push(seen.unwrap_or_else(|| sent.elapsed()));
        everyone_handled(&both, &text, &mark).await;
    }
    assert!(!scheduled.is_empty(), "no stable sample at all");
    println!(
        "publish -> visible in the API: median {:?} (runs {:?}); publish -> scheduled by the owner: median {:?} (runs {:?})",
        median(visible.clone()),
        visible,
        median(scheduled.clone()),
        scheduled
    );

    // 7. The document removed: its jobs go on every instance.
    let mark = marks(&both);
    nacos.remove_config(DATA_ID, GROUP).await;
    everyone_handled(&both, "", &mark).await;
    for s in both {
        assert_eq!(job(s, "doc-tick").await.0, 404);
        assert_eq!(job(s, "doc-latency-0").await.0, 404);
    }
    wait_for(
        Duration::from_secs(20),
        "the standalone instance too",
        || async { (job(&lone, "doc-tick").await.0 == 404).then_some(()) },
    )
    .await;

    // No instance ever wrote the password, even at debug level.
    for s in [&s1, &s2, &lone] {
        let log = s.log.lock().unwrap();
        assert!(
            !log.iter().any(|l| l.contains(PASSWORD)),
            "the Nacos password leaked into {}'s log",
            s.id
        );
    }

    // 8. Namespaces: an instance of namespace `team-a` follows that namespace's document and
    //    not the default one's, which the others follow (published again after its removal:
    //    the SDK passes no push for that, the periodic read sees it).
    let db3 = MySqlDb::create().await;
    let mut team_settings = standalone_settings.clone();
    team_settings.push(("JOBFLOW__NACOS__NAMESPACE", "team-a"));
    let team = Scheduler::start_with(&db3.url, &nacos.addr(), &team_settings).await;
    let team_doc = document(&[("team-a-tick", "* * * * * ?", json!({"team": "a"}))]);
    nacos
        .publish_config_in("team-a", DATA_ID, GROUP, &team_doc)
        .await;
    let public_doc = document(&[("public-tick", "* * * * * ?", json!({"team": "all"}))]);
    nacos.publish_config(DATA_ID, GROUP, &public_doc).await;
    wait_for(
        Duration::from_secs(20),
        "each namespace's job on its instances",
        || async {
            (job(&team, "team-a-tick").await.0 == 200
                && job(&s1, "public-tick").await.0 == 200
                && job(&lone, "public-tick").await.0 == 200)
                .then_some(())
        },
    )
    .await;
    assert_eq!(job(&team, "public-tick").await.0, 404);
    assert_eq!(job(&s1, "team-a-tick").await.0, 404);
    assert_eq!(job(&lone, "team-a-tick").await.0, 404);
    nacos.remove_config_in("team-a", DATA_ID, GROUP).await;
    wait_for(
        Duration::from_secs(20),
        "team-a's document removed",
        || async { (job(&team, "team-a-tick").await.0 == 404).then_some(()) },
    )
    .await;
    assert_eq!(job(&s1, "public-tick").await.0, 200);

    // 9. Wrong credentials: a clear start-up error naming the keys, without the secret.
    for mode in ["nacos", "standalone"] {
        let wrong = "Not-The-Password-99";
        let (status, output) = Scheduler::start_expecting_failure(
            &db.url,
            &nacos.addr(),
            &[
                ("JOBFLOW__DISCOVERY__MODE", mode),
                ("JOBFLOW__NACOS__USERNAME", USER),
                ("JOBFLOW__NACOS__PASSWORD", wrong),
                ("JOBFLOW__NACOS__JOBS_DATA_ID", DATA_ID),
            ],
        );
        assert!(!status.success(), "{mode}: started with a wrong password");
        assert!(
            output.contains(&format!("refused the login of user `{USER}`"))
                && output.contains("nacos.password"),
            "{mode}: {output}"
        );
        assert!(
            !output.contains(wrong),
            "{mode}: the password is in the output"
        );
    }
}

/// Jobs held by the engine of each of `schedulers`.
async fn owned(schedulers: &[&Scheduler]) -> Vec<u64> {
    let mut out = Vec::new();
    for s in schedulers {
        out.push(
            s.get("/api/v1/cluster").await["ownedJobs"]
                .as_u64()
                .unwrap_or(0),
        );
    }
    out
}

/// Whether the instance that owns `job` (by its own view) holds one more timer than before.
async fn holds_timer(schedulers: &[&Scheduler], job: &str, before: &[u64]) -> bool {
    for (s, &was) in schedulers.iter().zip(before) {
        let v = s.get("/api/v1/cluster").await;
        let owns = v["jobs"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|j| j["name"] == job && j["owner"] == v["selfInstance"]);
        if owns && v["ownedJobs"].as_u64().unwrap_or(0) > was {
            return true;
        }
    }
    false
}
