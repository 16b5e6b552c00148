//! History retention: the store's chunked purges on both backends, and the leader's loop in a
//! running instance.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use jobflow::jobs::{ExecutionStatus, NewExecution, TriggerType, new_trace_id};
use jobflow::store::{self, PageRequest, PurgePace, Store};

use crate::helpers::{Backend, TestApp, TestDb, backend_tests, base_settings, eventually, job};

backend_tests!(
    purge_by_age_spares_young_and_unfinished_rows,
    cap_keeps_the_newest_per_job,
    a_paced_purge_deletes_the_same_rows,
    the_leader_purges_a_running_instance,
    audit_entries_past_their_window_are_purged,
);

/// `retention.audit_days`: the leader deletes older entries, in chunks, and keeps the rest.
async fn audit_entries_past_their_window_are_purged(backend: Backend) {
    use jobflow::audit::{AuditAction, AuditEntry};
    let db = Arc::new(TestDb::create(backend).await);
    let app = TestApp::spawn_with(db, |s| {
        s.retention.audit_days = 7;
        s.retention.chunk_size = std::num::NonZeroU32::new(2).unwrap();
        s.retention.interval_seconds = std::num::NonZeroU64::new(1).unwrap();
    })
    .await;
    let now = Utc::now();
    let entry = |days: i64, target: &str| AuditEntry {
        at: now - chrono::Duration::days(days),
        actor: "ada".into(),
        action: AuditAction::JobTriggered,
        namespace: Some("default".into()),
        target: target.into(),
        detail: None,
    };
    for (days, target) in [
        (30, "a"),
        (9, "b"),
        (8, "c"),
        (8, "d"),
        (8, "e"),
        (6, "kept"),
        (0, "new"),
    ] {
        app.store.record_audit(&entry(days, target)).await.unwrap();
    }
    let targets = |s: Arc<dyn Store>| async move {
        let page = s
            .list_audit(&Default::default(), PageRequest { page: 0, size: 50 })
            .await
            .unwrap();
        page.items.into_iter().map(|e| e.target).collect::<Vec<_>>()
    };
    let direct = app
        .store
        .purge_audit_before(now - chrono::Duration::days(29), 2)
        .await;
    assert_eq!(direct.unwrap(), 1);
    eventually(Duration::from_secs(30), "the purge", || {
        let s = app.store.clone();
        async move { (targets(s).await.len() == 2).then_some(()) }
    })
    .await;
    assert_eq!(targets(app.store.clone()).await, ["new", "kept"]);
    app.stop().await;
}

async fn open(backend: Backend) -> (TestDb, Arc<dyn Store>) {
    let db = TestDb::create(backend).await;
    let s = store::connect(&base_settings(&db.url).database)
        .await
        .unwrap();
    s.migrate().await.unwrap();
    (db, s)
}

fn row(job: &str, n: usize, trigger: DateTime<Utc>, status: ExecutionStatus) -> NewExecution {
    NewExecution {
        execution_id: format!("{job}:{n}"),
        trace_id: new_trace_id(),
        job_name: job.into(),
        trigger_type: TriggerType::Manual,
        fire_time: trigger,
        scheduler_instance: "127.0.0.1:8080".into(),
        executor_instance: None,
        shard_start: 0,
        shard_end: 0,
        shard_count: 1,
        trigger_time: trigger,
        due_time: trigger,
        status,
        retry_count: 0,
        parent_trace_id: None,
        error_message: None,
        job_params: None,
    }
}

/// Execution ids of `job`, newest first.
async fn ids(s: &dyn Store, job: &str) -> Vec<String> {
    let page = s
        .list_executions(job, None, PageRequest { page: 0, size: 200 })
        .await
        .unwrap();
    page.items.into_iter().map(|e| e.execution_id).collect()
}

fn base() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
}

async fn purge_by_age_spares_young_and_unfinished_rows(backend: Backend) {
    let (_db, s) = open(backend).await;
    let hours = |i: usize| base() - chrono::Duration::hours(i as i64);
    // 20 rows an hour apart; two old ones are still PENDING / RUNNING; two share an instant.
    let mut rows: Vec<NewExecution> = (0..20)
        .map(|i| {
            let status = match i {
                12 => ExecutionStatus::Pending,
                17 => ExecutionStatus::Running,
                15 => ExecutionStatus::Skipped,
                16 => ExecutionStatus::Cancelled,
                _ if i % 2 == 0 => ExecutionStatus::Success,
                _ => ExecutionStatus::Failed,
            };
            row("aged", i, hours(i), status)
        })
        .collect();
    rows.push(row("aged", 99, hours(14), ExecutionStatus::Timeout));
    s.record_fire(None, &rows).await.unwrap();

    // Older than 9.5 hours: i = 10..=19 and the twin of 14, less the two unfinished ones.
    let cutoff = base() - chrono::Duration::minutes(570);
    let counted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let pace = PurgePace {
        purged: metrics::Counter::from_arc(counted.clone()),
        ..PurgePace::unpaused(3)
    };
    assert_eq!(s.purge_executions_before(cutoff, pace).await.unwrap(), 9);
    assert_eq!(
        counted.load(std::sync::atomic::Ordering::Relaxed),
        9,
        "the pace's counter counts what the chunks deleted"
    );
    let mut left = ids(s.as_ref(), "aged").await;
    left.sort();
    let mut want: Vec<String> = (0..10)
        .chain([12, 17])
        .map(|i| format!("aged:{i}"))
        .collect();
    want.sort();
    assert_eq!(left, want);
    assert_eq!(
        s.purge_executions_before(cutoff, PurgePace::unpaused(3))
            .await
            .unwrap(),
        0
    );
    // One chunk larger than everything, and a chunk of one, agree.
    assert_eq!(
        s.purge_executions_before(hours(5), PurgePace::unpaused(1))
            .await
            .unwrap(),
        4
    );
    assert_eq!(
        s.purge_executions_before(
            base() + chrono::Duration::hours(1),
            PurgePace::unpaused(1000)
        )
        .await
        .unwrap(),
        6
    );
    assert_eq!(
        ids(s.as_ref(), "aged").await.len(),
        2,
        "PENDING and RUNNING stay"
    );
}

async fn cap_keeps_the_newest_per_job(backend: Backend) {
    let (_db, s) = open(backend).await;
    let minutes = |i: usize| base() - chrono::Duration::minutes(i as i64);
    let mut rows: Vec<NewExecution> = (0..10)
        .map(|i| row("capped", i, minutes(i), ExecutionStatus::Success))
        .collect();
    // A twin of row 3, inserted later (higher id): newer in (trigger_time, id) order.
    rows.push(row("capped", 33, minutes(3), ExecutionStatus::Failed));
    // An old row still running is counted but never deleted.
    rows.push(row("capped", 50, minutes(50), ExecutionStatus::Running));
    let other: Vec<NewExecution> = (0..6)
        .map(|i| row("other", i, minutes(i), ExecutionStatus::Success))
        .collect();
    s.record_fire(None, &rows).await.unwrap();
    s.record_fire(None, &other).await.unwrap();

    assert_eq!(
        s.cap_job_executions("capped", 4, PurgePace::unpaused(2))
            .await
            .unwrap(),
        7
    );
    assert_eq!(
        ids(s.as_ref(), "capped").await,
        ["capped:0", "capped:1", "capped:2", "capped:33", "capped:50"]
    );
    assert_eq!(
        s.cap_job_executions("capped", 4, PurgePace::unpaused(2))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        ids(s.as_ref(), "other").await.len(),
        6,
        "other jobs untouched"
    );
    assert_eq!(
        s.cap_job_executions("other", 6, PurgePace::unpaused(2))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        s.cap_job_executions("other", 1, PurgePace::unpaused(1000))
            .await
            .unwrap(),
        5
    );
    assert_eq!(ids(s.as_ref(), "other").await, ["other:0"]);
    assert_eq!(
        s.cap_job_executions("missing", 1, PurgePace::unpaused(10))
            .await
            .unwrap(),
        0
    );
}

/// The rests between chunks change when rows go, not which: the same rows as back to back.
async fn a_paced_purge_deletes_the_same_rows(backend: Backend) {
    let (_db, s) = open(backend).await;
    let rows: Vec<NewExecution> = (0..7)
        .map(|i| {
            let status = if i == 4 {
                ExecutionStatus::Running
            } else {
                ExecutionStatus::Success
            };
            row(
                "paced",
                i,
                base() - chrono::Duration::minutes(i as i64),
                status,
            )
        })
        .collect();
    s.record_fire(None, &rows).await.unwrap();
    let pace = PurgePace {
        chunk: 2,
        pause_factor: 20,
        ..PurgePace::unpaused(2)
    };
    // Three chunks with a bound (rows 6-5, 4-3, 2-1), each followed by a rest, then one
    // that finds nothing left.
    assert_eq!(
        s.purge_executions_before(base(), pace.clone())
            .await
            .unwrap(),
        5
    );
    assert_eq!(ids(s.as_ref(), "paced").await, ["paced:0", "paced:4"]);
    assert_eq!(s.purge_executions_before(base(), pace).await.unwrap(), 0);
}

fn purged(reason: &str) -> u64 {
    let text = jobflow::telemetry::metrics_handle().render();
    text.lines()
        .find(|l| {
            l.starts_with("retention_purged_executions_total{")
                && l.contains(&format!("reason=\"{reason}\""))
        })
        .and_then(|l| l.rsplit(' ').next())
        .map_or(0, |v| v.parse().unwrap())
}

async fn the_leader_purges_a_running_instance(backend: Backend) {
    let db = Arc::new(TestDb::create(backend).await);
    let app = TestApp::spawn_with(db, |s| {
        s.retention.execution_days = 1;
        s.retention.max_executions_per_job = 3;
        s.retention.interval_seconds = std::num::NonZeroU64::new(1).unwrap();
    })
    .await;
    let (age0, cap0) = (purged("age"), purged("per_job_cap"));
    app.create_job(&job("busy")).await;
    let now = Utc::now();
    let old = now - chrono::Duration::days(2);
    let mut rows: Vec<NewExecution> = (0..4)
        .map(|i| row("gone-job", i, old, ExecutionStatus::Success))
        .collect();
    rows.extend((0..5).map(|i| {
        row(
            "busy",
            i,
            now - chrono::Duration::seconds(i as i64),
            ExecutionStatus::Success,
        )
    }));
    app.store.record_fire(None, &rows).await.unwrap();
    eventually(Duration::from_secs(30), "the purge", || {
        let s = app.store.clone();
        async move {
            let (g, b) = (
                ids(s.as_ref(), "gone-job").await,
                ids(s.as_ref(), "busy").await,
            );
            (g.is_empty() && b.len() == 3).then_some(())
        }
    })
    .await;
    assert_eq!(
        ids(app.store.as_ref(), "busy").await,
        ["busy:0", "busy:1", "busy:2"]
    );
    // The counters are process-wide and this test runs on both backends at once: at least
    // our rows were counted (the exact counts are the store tests').
    assert!(purged("age") - age0 >= 4);
    assert!(purged("per_job_cap") - cap0 >= 2);
    let (status, _) = app.get("/health/ready").await;
    assert_eq!(status, 200);
}
