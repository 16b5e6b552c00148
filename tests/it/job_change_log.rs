//! The job change log behind incremental reloads: every job write stamps the revision it took
//! on the jobs it writes and leaves a tombstone for each job it deletes, so an engine reads
//! only what changed after the revision it has; when the log cannot answer (its tombstones
//! were pruned), the engine reads every job again.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use jobflow::jobs::{DocumentFormat, JobChange, JobDocument, JobRequest, JobSpec, TimeZoneName};
use jobflow::store::{DocumentApply, JobChanges, Store, TOMBSTONE_KEEP_SECONDS};
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestDb, backend_tests, open_store as open};
use crate::wait::eventually;

backend_tests!(
    the_log_answers_what_changed_after_a_revision,
    the_log_keeps_every_write_not_only_the_last,
    writes_that_find_no_job_leave_the_log_alone,
    concurrent_creations_each_get_their_own_answer,
    a_jobs_document_writes_into_the_log,
    a_log_pruned_past_a_revision_cannot_answer_for_it,
    an_engine_applies_edits_disables_and_deletes_from_the_log,
    an_engine_behind_a_pruned_log_reads_every_job_again,
);

fn spec(name: &str, cron: &str) -> JobSpec {
    let req: JobRequest = serde_json::from_value(
        json!({"name": name, "serviceName": "s", "handler": "h", "cron": cron}),
    )
    .unwrap();
    JobSpec::parse(req, None, None, TimeZoneName::UTC, Utc::now()).unwrap()
}

/// The changed jobs' names and the removed names, each sorted.
fn names(c: &JobChanges) -> (Vec<String>, Vec<String>) {
    let mut changed: Vec<String> = c.changed.iter().map(|j| j.name().to_string()).collect();
    changed.sort();
    (changed, c.removed.iter().map(|r| r.name.clone()).collect())
}

fn list(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

async fn changes_since(s: &dyn Store, since: i64) -> JobChanges {
    s.job_changes_since(since)
        .await
        .unwrap()
        .expect("the log answers")
}

async fn the_log_answers_what_changed_after_a_revision(backend: Backend) {
    let (_db, s) = open(backend).await;
    let r0 = s.job_revision().await.unwrap();
    for name in ["a", "b", "c"] {
        s.create_job(&spec(name, "0 0 2 * * ?"), None, Utc::now())
            .await
            .unwrap();
    }
    let r1 = s.job_revision().await.unwrap();
    assert_eq!(r1, r0 + 3, "one revision a write");
    let all = changes_since(&*s, r0).await;
    assert_eq!(all.revision, r1);
    assert_eq!(names(&all), (list(&["a", "b", "c"]), list(&[])));

    let nothing = changes_since(&*s, r1).await;
    assert_eq!(
        (nothing.revision, names(&nothing)),
        (r1, (list(&[]), list(&[])))
    );

    // An edit, a disable and a delete: just those three, as they are now.
    s.update_job(&spec("a", "0 30 2 * * ?"), None, None, Utc::now())
        .await
        .unwrap()
        .unwrap();
    s.set_job_enabled("b", false, None, Utc::now())
        .await
        .unwrap()
        .unwrap();
    assert!(s.delete_job("c", Utc::now()).await.unwrap());
    let delta = changes_since(&*s, r1).await;
    assert_eq!(delta.revision, r1 + 3);
    assert_eq!(names(&delta), (list(&["a", "b"]), list(&["c"])));
    let a = delta
        .changed
        .iter()
        .find(|j| j.name().as_str() == "a")
        .unwrap();
    assert_eq!(a.spec.timing.cron().unwrap().as_str(), "0 30 2 * * ?");
    let b = delta
        .changed
        .iter()
        .find(|j| j.name().as_str() == "b")
        .unwrap();
    assert!(!b.spec.enabled);
    // From the revision of the edit on, the edit is not repeated.
    assert_eq!(
        names(&changes_since(&*s, r1 + 1).await),
        (list(&["b"]), list(&["c"]))
    );

    // A job deleted and created again is a change, not a removal.
    s.create_job(&spec("c", "0 0 4 * * ?"), None, Utc::now())
        .await
        .unwrap();
    let again = changes_since(&*s, r1).await;
    assert_eq!(names(&again), (list(&["a", "b", "c"]), list(&[])));

    // A revision the store has not reached (a database restored from a backup): no answer.
    let now = s.job_revision().await.unwrap();
    assert!(s.job_changes_since(now + 1).await.unwrap().is_none());
}

async fn writes_that_find_no_job_leave_the_log_alone(backend: Backend) {
    let (_db, s) = open(backend).await;
    s.create_job(&spec("a", "0 0 2 * * ?"), None, Utc::now())
        .await
        .unwrap();
    let r = s.job_revision().await.unwrap();
    assert!(
        s.update_job(&spec("missing", "0 0 2 * * ?"), None, None, Utc::now())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        s.set_job_enabled("missing", false, None, Utc::now())
            .await
            .unwrap()
            .is_none()
    );
    assert!(!s.delete_job("missing", Utc::now()).await.unwrap());
    assert_eq!(s.job_revision().await.unwrap(), r);
    assert_eq!(names(&changes_since(&*s, r).await), (list(&[]), list(&[])));
}

async fn concurrent_creations_each_get_their_own_answer(backend: Backend) {
    let (_db, s) = open(backend).await;
    let r0 = s.job_revision().await.unwrap();
    // 40 creations at once (they are written in groups), five names asked for twice.
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let s = s.clone();
            let name = format!("job-{}", if i < 10 { i / 2 } else { i });
            tokio::spawn(async move {
                let cron = format!("0 0 {} * * ?", i % 24);
                (
                    name.clone(),
                    s.create_job(&spec(&name, &cron), Some("ops"), Utc::now())
                        .await,
                )
            })
        })
        .collect();
    let mut created = Vec::new();
    let mut refused = 0;
    for t in tasks {
        let (name, answer) = t.await.unwrap();
        match answer {
            Ok(job) => {
                assert_eq!(job.name().as_str(), name, "each caller gets its own job");
                created.push(name);
            }
            Err(jobflow::store::StoreError::Duplicate(jobflow::store::UniqueKey::JobName)) => {
                refused += 1
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
    created.sort();
    created.dedup();
    assert_eq!((created.len(), refused), (35, 5));
    let log = changes_since(&*s, r0).await;
    assert_eq!(names(&log).0, created, "every created job is in the log");
    for job in &log.changed {
        assert_eq!(job.created_by.as_deref(), Some("ops"));
    }
}

async fn a_jobs_document_writes_into_the_log(backend: Backend) {
    let (_db, s) = open(backend).await;
    let apply = |text: &'static str, hash: &'static str| {
        let s = s.clone();
        async move {
            let document =
                JobDocument::parse(text, DocumentFormat::Yaml, TimeZoneName::UTC, Utc::now())
                    .unwrap();
            s.apply_job_document(&DocumentApply {
                data_id: "jobflow-jobs.yaml",
                group: "JOBFLOW",
                content_hash: hash,
                document: &document,
                actor: "nacos:JOBFLOW/jobflow-jobs.yaml",
                now: Utc::now(),
            })
            .await
            .unwrap()
        }
    };
    let r0 = s.job_revision().await.unwrap();
    apply(
        "jobs:\n  - {name: a, serviceName: s, handler: h, cron: '0 0 2 * * ?'}\n  - {name: b, serviceName: s, handler: h, cron: '0 0 3 * * ?'}\n",
        "v1",
    )
    .await;
    let created = changes_since(&*s, r0).await;
    assert_eq!(names(&created), (list(&["a", "b"]), list(&[])));
    // b edited, a dropped from the document.
    apply(
        "jobs:\n  - {name: b, serviceName: s, handler: h, cron: '0 0 4 * * ?'}\n",
        "v2",
    )
    .await;
    let edited = changes_since(&*s, created.revision).await;
    assert_eq!(names(&edited), (list(&["b"]), list(&["a"])));
    assert_eq!(
        edited.changed[0].spec.timing.cron().unwrap().as_str(),
        "0 0 4 * * ?"
    );
}

async fn a_log_pruned_past_a_revision_cannot_answer_for_it(backend: Backend) {
    let (_db, s) = open(backend).await;
    for name in ["a", "b", "c"] {
        s.create_job(&spec(name, "0 0 2 * * ?"), None, Utc::now())
            .await
            .unwrap();
    }
    let before = s.job_revision().await.unwrap();
    let now = Utc::now();
    assert!(s.delete_job("a", now).await.unwrap());
    let after_a = s.job_revision().await.unwrap();
    // The next deletion, a tombstone lifetime later, prunes a's tombstone.
    let later = now + chrono::Duration::seconds(TOMBSTONE_KEEP_SECONDS + 1);
    assert!(s.delete_job("b", later).await.unwrap());
    assert!(
        s.job_changes_since(before).await.unwrap().is_none(),
        "a's deletion is no longer in the log"
    );
    assert_eq!(
        names(&changes_since(&*s, after_a).await),
        (list(&[]), list(&["b"]))
    );
}

/// The jobs the engine of `app` schedules now.
async fn owned(app: &TestApp) -> usize {
    let (status, body): (u16, Value) = app.get("/api/v1/cluster").await;
    assert_eq!(status, 200, "{body}");
    body["ownedJobs"].as_u64().unwrap() as usize
}

async fn wait_owned(app: &TestApp, n: usize, what: &str) {
    eventually(Duration::from_secs(10), what, || async {
        (owned(app).await == n).then_some(())
    })
    .await;
}

/// An instance scheduling x, y and z (created through its API; once a year).
async fn three_jobs_scheduled(backend: Backend) -> TestApp {
    let db = Arc::new(TestDb::create(backend).await);
    let app = TestApp::spawn_with(db, |_| {}).await;
    for name in ["x", "y", "z"] {
        let (status, body) = app
            .post(
                "/api/v1/jobs",
                &json!({"name": name, "serviceName": "s", "handler": "h", "cron": "0 0 3 1 1 ?"}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }
    wait_owned(&app, 3, "three jobs scheduled").await;
    app
}

async fn an_engine_applies_edits_disables_and_deletes_from_the_log(backend: Backend) {
    let app = three_jobs_scheduled(backend).await;
    // Written straight into the database, as another instance's API would.
    let s = &app.store;
    s.set_job_enabled("x", false, None, Utc::now())
        .await
        .unwrap();
    wait_owned(&app, 2, "the disabled job dropped").await;
    assert!(s.delete_job("y", Utc::now()).await.unwrap());
    wait_owned(&app, 1, "the deleted job dropped").await;
    s.set_job_enabled("x", true, None, Utc::now())
        .await
        .unwrap();
    s.update_job(&spec("z", "0 0 4 1 1 ?"), None, None, Utc::now())
        .await
        .unwrap();
    wait_owned(
        &app,
        2,
        "the enabled job scheduled again, the edited one kept",
    )
    .await;
}

async fn an_engine_behind_a_pruned_log_reads_every_job_again(backend: Backend) {
    let app = three_jobs_scheduled(backend).await;
    // Two deletions a tombstone lifetime apart, (almost always) between two polls of the
    // engine: the second prunes the first's tombstone, so the log cannot say that x is gone.
    let now = Utc::now();
    let later = now + chrono::Duration::seconds(TOMBSTONE_KEEP_SECONDS + 1);
    assert!(app.store.delete_job("x", now).await.unwrap());
    assert!(app.store.delete_job("y", later).await.unwrap());
    wait_owned(&app, 1, "both deleted jobs dropped").await;
}

/// Every write is kept with its revision and time, not only the last one a job's row shows:
/// a fire is judged against every change since it was planned.
async fn the_log_keeps_every_write_not_only_the_last(backend: Backend) {
    use chrono::SubsecRound;
    let (_db, s) = open(backend).await;
    let t0 = Utc::now().trunc_subsecs(3);
    let created = s
        .create_job(&spec("a", "0 0 2 * * ?"), None, t0)
        .await
        .unwrap();
    let edited = s
        .update_job(
            &spec("a", "0 30 2 * * ?"),
            None,
            None,
            t0 + chrono::Duration::seconds(1),
        )
        .await
        .unwrap()
        .unwrap();
    let disabled = s
        .set_job_enabled("a", false, None, t0 + chrono::Duration::seconds(2))
        .await
        .unwrap()
        .unwrap();
    s.create_job(&spec("b", "0 0 2 * * ?"), None, t0)
        .await
        .unwrap();
    assert!(
        s.delete_job("b", t0 + chrono::Duration::seconds(3))
            .await
            .unwrap()
    );
    let change = |name: &str, revision, secs| JobChange {
        name: name.into(),
        revision,
        at: t0 + chrono::Duration::seconds(secs),
    };
    let b_deleted = s.job_revision().await.unwrap();
    let mut expected = vec![
        change("a", edited.revision, 1),
        change("a", disabled.revision, 2),
        change("b", b_deleted - 1, 0),
        change("b", b_deleted, 3),
    ];
    let mut history = changes_since(&*s, created.revision).await.history;
    history.sort_by_key(|c| c.revision);
    assert_eq!(history, expected);
    let mut told = s
        .jobs_changed_since(created.revision)
        .await
        .unwrap()
        .unwrap();
    told.sort_by_key(|c| c.revision);
    told.dedup();
    expected.sort_by_key(|c| c.revision);
    assert_eq!(told, expected, "what the check at an instant reads");
}
