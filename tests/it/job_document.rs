//! Jobs from the Nacos jobs document, at the store and API level: applying is compare-and-set
//! on the content hash, the result depends only on the content and the stored jobs, and the
//! API refuses to change or delete `NACOS` jobs. (The Nacos side runs in the cluster suite.)

use std::sync::Arc;

use chrono::Utc;
use jobflow::jobs::{DocumentFormat, JobDocument, TimeZoneName};
use jobflow::store::{self, DocumentApply, DocumentChanges, DocumentOutcome, Store};
use serde_json::json;

use crate::helpers::{
    Backend, TestApp, TestDb, backend_tests, base_settings, job, open_store as open,
};

backend_tests!(
    applying_makes_nacos_jobs_match_the_document,
    the_same_content_is_applied_once_by_concurrent_instances,
    api_refuses_to_change_or_delete_nacos_jobs,
    deleting_a_job_keeps_its_executions,
    a_document_entry_may_name_its_namespace,
);

/// The same name in two namespaces is two jobs; a child names a job of its own namespace.
async fn a_document_entry_may_name_its_namespace(backend: Backend) {
    let (_db, s) = open(backend).await;
    let text = "
jobs:
  - {name: a, serviceName: s, handler: h, cron: '0 0 2 * * ?'}
  - {name: a, namespace: team-a, serviceName: s, handler: h, cron: '0 0 3 * * ?', childJobs: [b]}
  - {name: b, namespace: team-a, serviceName: s, handler: h, cron: '0 0 4 * * ?'}
";
    assert_eq!(
        apply(s.as_ref(), text).await,
        changes(&["a", "team-a/a", "team-a/b"], &[], &[])
    );
    let a = s.get_job("team-a/a").await.unwrap().unwrap();
    assert_eq!((a.name().namespace(), a.name().local()), ("team-a", "a"));
    assert_eq!(a.spec.child_jobs[0].key(), "team-a/b");
    assert_eq!(
        s.get_job("a")
            .await
            .unwrap()
            .unwrap()
            .spec
            .timing
            .cron()
            .unwrap()
            .as_str(),
        "0 0 2 * * ?"
    );
    // Twice the same name in one namespace is refused.
    let twice = "
jobs:
  - {name: a, namespace: team-a, serviceName: s, handler: h, cron: '0 0 3 * * ?'}
  - {name: a, namespace: team-a, serviceName: s, handler: h, cron: '0 0 4 * * ?'}
";
    let err = JobDocument::parse(
        twice,
        DocumentFormat::Yaml,
        TimeZoneName::parse("UTC").unwrap(),
        Utc::now(),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("the same name as jobs[0]"),
        "{err}"
    );
}

fn doc(text: &str) -> JobDocument {
    JobDocument::parse(
        text,
        DocumentFormat::Yaml,
        TimeZoneName::parse("UTC").unwrap(),
        Utc::now(),
    )
    .unwrap()
}

async fn apply(s: &dyn Store, text: &str) -> DocumentOutcome {
    let hash = hex_sha256(text);
    s.apply_job_document(&DocumentApply {
        data_id: "jobflow-jobs.yaml",
        group: "JOBFLOW",
        content_hash: &hash,
        document: &doc(text),
        actor: "nacos:JOBFLOW/jobflow-jobs.yaml",
        now: Utc::now(),
    })
    .await
    .unwrap()
}

fn hex_sha256(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text))
}

fn changes(created: &[&str], updated: &[&str], deleted: &[&str]) -> DocumentOutcome {
    let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
    DocumentOutcome::Applied(DocumentChanges {
        created: v(created),
        updated: v(updated),
        deleted: v(deleted),
    })
}

const V1: &str = "
jobs:
  - {name: a, serviceName: s, handler: h, cron: '0 0 2 * * ?'}
  - {name: b, serviceName: s, handler: h, cron: '0 0 3 * * ?'}
";

async fn applying_makes_nacos_jobs_match_the_document(backend: Backend) {
    let (_db, s) = open(backend).await;
    let spec = |name: &str| {
        jobflow::jobs::JobSpec::parse(
            serde_json::from_value(job(name)).unwrap(),
            None,
            None,
            TimeZoneName::parse("UTC").unwrap(),
            Utc::now(),
        )
        .unwrap()
    };
    s.create_job(&spec("by-api"), Some("ops"), Utc::now())
        .await
        .unwrap();
    s.create_job(&spec("taken-over"), Some("ops"), Utc::now())
        .await
        .unwrap();

    let rev = s.job_revision().await.unwrap();
    assert_eq!(apply(&*s, V1).await, changes(&["a", "b"], &[], &[]));
    let rev1 = s.job_revision().await.unwrap();
    assert!(rev1 > rev, "the engines must see the change");
    let a = s.get_job("a").await.unwrap().unwrap();
    assert_eq!(a.source.as_str(), "NACOS");
    assert_eq!(
        a.created_by.as_deref(),
        Some("nacos:JOBFLOW/jobflow-jobs.yaml")
    );

    // The same content again: nothing is written.
    assert_eq!(apply(&*s, V1).await, DocumentOutcome::Unchanged);
    assert_eq!(s.job_revision().await.unwrap(), rev1);

    // An operator disables b; a new document changes a only and names an API job.
    s.set_job_enabled("b", false, Some("ops"), Utc::now())
        .await
        .unwrap();
    let v2 = "
jobs:
  - {name: a, serviceName: s, handler: h, cron: '0 30 2 * * ?'}
  - {name: b, serviceName: s, handler: h, cron: '0 0 3 * * ?'}
  - {name: taken-over, serviceName: s2, handler: h2, cron: '0 0 4 * * ?'}
";
    assert_eq!(
        apply(&*s, v2).await,
        changes(&[], &["a", "taken-over"], &[])
    );
    assert_eq!(
        s.get_job("a")
            .await
            .unwrap()
            .unwrap()
            .spec
            .timing
            .cron()
            .unwrap()
            .as_str(),
        "0 30 2 * * ?"
    );
    let b = s.get_job("b").await.unwrap().unwrap();
    assert!(
        !b.spec.enabled,
        "an unchanged entry keeps the operator's switch"
    );
    let t = s.get_job("taken-over").await.unwrap().unwrap();
    assert_eq!(
        (t.source.as_str(), t.spec.service_name.as_str()),
        ("NACOS", "s2")
    );

    // b's entry changes: the document's `enabled` (default true) applies again.
    let v3 = "
jobs:
  - {name: a, serviceName: s, handler: h, cron: '0 30 2 * * ?'}
  - {name: b, serviceName: s, handler: h, cron: '0 0 3 * * ?', maxRetry: 1}
";
    assert_eq!(apply(&*s, v3).await, changes(&[], &["b"], &["taken-over"]));
    let b = s.get_job("b").await.unwrap().unwrap();
    assert!(b.spec.enabled);
    assert_eq!(b.spec.max_retry, 1);
    assert!(s.get_job("taken-over").await.unwrap().is_none());

    // The document removed: every NACOS job goes, API jobs stay.
    assert_eq!(apply(&*s, "").await, changes(&[], &[], &["a", "b"]));
    let names: Vec<String> = s
        .load_jobs()
        .await
        .unwrap()
        .iter()
        .map(|j| j.name().to_string())
        .collect();
    assert_eq!(names, ["by-api"]);
    assert_eq!(
        s.get_job("by-api").await.unwrap().unwrap().source.as_str(),
        "API"
    );
}

async fn the_same_content_is_applied_once_by_concurrent_instances(backend: Backend) {
    let (db, s1) = open(backend).await;
    // A second pool on the same database stands for a second instance.
    let s2 = store::connect(&base_settings(&db.url).database)
        .await
        .unwrap();
    for round in 0..5 {
        let text = format!(
            "jobs:\n  - {{name: j{round}, serviceName: s, handler: h, cron: '0 0 2 * * ?'}}\n"
        );
        let (x, y) = tokio::join!(apply(&*s1, &text), apply(&*s2, &text));
        let applied = [&x, &y]
            .iter()
            .filter(|o| matches!(o, DocumentOutcome::Applied(_)))
            .count();
        assert_eq!(applied, 1, "round {round}: {x:?} / {y:?}");
        let names: Vec<String> = s1
            .load_jobs()
            .await
            .unwrap()
            .iter()
            .map(|j| j.name().to_string())
            .collect();
        assert_eq!(names, [format!("j{round}")]);
    }
}

async fn api_refuses_to_change_or_delete_nacos_jobs(backend: Backend) {
    let db = Arc::new(TestDb::create(backend).await);
    let app = TestApp::spawn_with(db, |s| {
        s.nacos.jobs_data_id = "jobflow-jobs.yaml".into();
    })
    .await;
    app.create_job(&job("from-api")).await;
    apply(&*app.store, V1).await;

    let (status, a) = app.get("/api/v1/jobs/a").await;
    assert_eq!(status, 200);
    assert_eq!(a["source"], "NACOS");
    let (_, api_job) = app.get("/api/v1/jobs/from-api").await;
    assert_eq!(api_job["source"], "API");

    let (status, problem) = app.put("/api/v1/jobs/a", &job("a")).await;
    assert_eq!(status, 409, "{problem}");
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("Nacos config centre")
            && detail.contains("jobflow-jobs.yaml")
            && detail.contains("JOBFLOW"),
        "{detail}"
    );
    let (status, _) = app.delete("/api/v1/jobs/a").await;
    assert_eq!(status, 409);
    assert!(app.store.get_job("a").await.unwrap().is_some());

    // Operators' switches stay.
    let (status, off) = app.patch("/api/v1/jobs/a/enabled?enabled=false").await;
    assert_eq!((status, &off["enabled"]), (200, &json!(false)));
    let (status, triggered) = app.post("/api/v1/jobs/a/trigger", &json!({})).await;
    assert_eq!(status, 200, "{triggered}");
    assert_eq!(triggered[0]["jobName"], "a");

    // API jobs are changed and deleted as before.
    let mut changed = job("from-api");
    changed["maxRetry"] = json!(0);
    let (status, _) = app.put("/api/v1/jobs/from-api", &changed).await;
    assert_eq!(status, 200);
    let (status, _) = app.delete("/api/v1/jobs/from-api").await;
    assert_eq!(status, 204);
}

async fn deleting_a_job_keeps_its_executions(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_job(&job("short-lived")).await;
    let (status, triggered) = app
        .post("/api/v1/jobs/short-lived/trigger", &json!({}))
        .await;
    assert_eq!(status, 200, "{triggered}");
    let trace = triggered[0]["traceId"].as_str().unwrap().to_string();
    let (status, _) = app.delete("/api/v1/jobs/short-lived").await;
    assert_eq!(status, 204);
    let (status, execution) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
    assert_eq!(status, 200, "{execution}");
    assert_eq!(execution["jobName"], "short-lived");
    // The history stays searchable by the job's name (with any retries of that execution).
    let (status, page) = app.get("/api/v1/executions?jobName=short-lived").await;
    assert_eq!(status, 200, "{page}");
    let history = page["content"].as_array().unwrap();
    assert!(
        history.iter().any(|e| e["traceId"] == trace.as_str()),
        "{history:?}"
    );
}
