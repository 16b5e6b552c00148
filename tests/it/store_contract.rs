//! The storage contract both backends must honour: typed duplicates, atomic fire records,
//! compare-and-set transitions.

use chrono::{Duration, TimeZone, Utc};
use jobflow::jobs::{
    Execution, ExecutionStatus, JobRequest, JobSpec, NewExecution, TimeZoneName, TriggerType,
    execution_id, new_trace_id,
};
use jobflow::store::{
    self, Applied, FireClaim, FireOutcome, FireRecord, StoreError, Transition, UniqueKey,
};

/// A batch of cron fires as the store records them.
fn records(batch: &[(FireClaim, Vec<NewExecution>)]) -> Vec<FireRecord> {
    batch
        .iter()
        .map(|(claim, rows)| FireRecord {
            claim: Some(claim.clone()),
            rows: rows.clone(),
        })
        .collect()
}

use crate::helpers::{Backend, TestDb, backend_tests, base_settings, migrate_until};

backend_tests!(
    one_range_admitted_alone_is_not_judged_against_its_own_fire,
    batched_fires_are_independent,
    large_batches_return_what_was_stored,
    a_batch_of_results_gives_each_row_its_own_values,
    a_batch_of_results_set_by_row_id_gives_each_row_its_own_values,
    each_change_of_a_batch_is_judged_by_its_own_guards,
    each_change_of_a_batch_set_by_row_id_is_judged_by_its_own_guards,
    duplicates_are_typed,
    fire_claims_are_exclusive_and_atomic,
    transitions_are_compare_and_set,
    execution_search_counts_up_to_the_cap,
    a_lease_guards_its_row_and_hands_over_once,
    a_failure_and_its_retry_are_written_together,
    stale_rows_are_paged_by_key,
    children_are_written_once_with_the_success_that_completes_their_fire,
    a_running_row_without_a_start_is_swept,
    an_unreadable_row_is_passed_over_not_fatal,
    guarded_fires_are_judged_under_their_job,
    a_fire_is_judged_against_every_change_since_it_was_planned,
    a_backfill_records_each_instant_once_whoever_advances_it,
    a_cancelled_run_counts_for_its_job_until_its_stop_is_confirmed,
    a_fire_taken_over_by_compensation_is_not_withdrawn,
    a_fire_that_found_no_executor_is_withdrawn_whole,
    a_run_taken_while_a_cover_fire_is_admitted_is_waited_for,
    a_fire_judged_ahead_is_a_run_for_every_admission_after_it,
    the_api_pool_answers_while_the_scheduling_pool_waits,
    a_fire_ends_when_its_last_row_is_final_at_that_rows_finish,
    a_fixed_delay_fire_is_recorded_only_its_interval_after_the_latest_fire_ended,
    a_fire_with_a_range_cancelled_before_its_call_is_withdrawn_whole,
    a_jobs_lock_is_a_write_to_its_row,
    the_cancel_count_is_kept_across_the_upgrade_that_gave_it_its_own_row
);

async fn open(backend: Backend) -> (TestDb, std::sync::Arc<dyn store::Store>) {
    let db = TestDb::create(backend).await;
    let s = store::connect(&base_settings(&db.url).database)
        .await
        .unwrap();
    s.migrate().await.unwrap();
    // Migrating twice is a no-op.
    s.migrate().await.unwrap();
    (db, s)
}

fn row(job: &str, fire: chrono::DateTime<Utc>, start: u32, end: u32) -> NewExecution {
    NewExecution {
        execution_id: execution_id(job, fire, start, end),
        trace_id: new_trace_id(),
        job_name: job.into(),
        trigger_type: TriggerType::Cron,
        fire_time: fire,
        scheduler_instance: "127.0.0.1:8080".into(),
        executor_instance: None,
        shard_start: start,
        shard_end: end,
        shard_count: 10,
        trigger_time: fire,
        due_time: fire,
        status: ExecutionStatus::Pending,
        retry_count: 0,
        parent_trace_id: None,
        error_message: None,
        job_params: None,
    }
}

async fn duplicates_are_typed(backend: Backend) {
    let (_db, s) = open(backend).await;
    let req: JobRequest = serde_json::from_value(serde_json::json!({
        "name": "j", "serviceName": "s", "handler": "h", "cron": "0 * * * * ?"
    }))
    .unwrap();
    let spec = JobSpec::parse(
        req,
        None,
        None,
        TimeZoneName::parse("UTC").unwrap(),
        Utc::now(),
    )
    .unwrap();
    let rev0 = s.job_revision().await.unwrap();
    s.create_job(&spec, Some("alice"), Utc::now())
        .await
        .unwrap();
    assert!(matches!(
        s.create_job(&spec, None, Utc::now()).await,
        Err(StoreError::Duplicate(UniqueKey::JobName))
    ));
    assert_eq!(s.job_revision().await.unwrap(), rev0 + 1);
    assert_eq!(
        s.get_job("j").await.unwrap().unwrap().created_by.as_deref(),
        Some("alice")
    );

    let fire = Utc.with_ymd_and_hms(2024, 5, 1, 2, 0, 0).unwrap();
    let a = row("j", fire, 0, 4);
    s.record_fire(None, std::slice::from_ref(&a)).await.unwrap();
    let mut same_id = row("j", fire, 0, 4);
    same_id.trigger_type = TriggerType::Manual;
    assert!(matches!(
        s.record_fire(None, &[same_id]).await,
        Err(StoreError::Duplicate(UniqueKey::ExecutionId))
    ));
    let mut same_trace = row("j", fire, 5, 9);
    same_trace.trace_id = a.trace_id.clone();
    assert!(matches!(
        s.record_fire(None, &[same_trace]).await,
        Err(StoreError::Duplicate(UniqueKey::TraceId))
    ));
}

async fn fire_claims_are_exclusive_and_atomic(backend: Backend) {
    let (_db, s) = open(backend).await;
    let fire = Utc.with_ymd_and_hms(2024, 5, 1, 2, 0, 0).unwrap();
    let claim = FireClaim {
        fixed_delay: None,
        claimed_at: Utc::now(),
        job_name: "j".into(),
        fire_time: fire,
        scheduler_instance: "a:1".into(),
    };
    let rows = [row("j", fire, 0, 4), row("j", fire, 5, 9)];
    let FireOutcome::Recorded(recorded) = s.record_fire(Some(&claim), &rows).await.unwrap() else {
        panic!("first claim must win")
    };
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].execution_id, "j:20240501020000:0-4");
    assert_eq!(recorded[0].fire_time, fire);
    assert_eq!(recorded[0].status, ExecutionStatus::Pending);
    // What record_fire returns is exactly what is stored.
    for e in &recorded {
        assert_eq!(
            Some(e),
            s.get_execution(&e.trace_id).await.unwrap().as_ref()
        );
    }

    // A second scheduler with another executor view (other ranges) still loses the fire.
    let other = FireClaim {
        fixed_delay: None,
        claimed_at: Utc::now(),
        scheduler_instance: "b:2".into(),
        ..claim.clone()
    };
    let outcome = s
        .record_fire(Some(&other), &[row("j", fire, 0, 9)])
        .await
        .unwrap();
    assert!(matches!(outcome, FireOutcome::AlreadyFired));
    assert_eq!(s.last_fire_time("j").await.unwrap(), Some(fire));
    let page = s
        .list_executions("j", None, store::PageRequest { page: 0, size: 50 })
        .await
        .unwrap();
    assert_eq!(page.total, 2);

    // A failed row insert rolls the claim back, so the fire can still be recorded later.
    let fire2 = fire + Duration::minutes(1);
    let claim2 = FireClaim {
        fixed_delay: None,
        claimed_at: Utc::now(),
        fire_time: fire2,
        ..claim.clone()
    };
    let mut clash = row("j", fire2, 0, 9);
    clash.trace_id = rows[0].trace_id.clone();
    assert!(
        s.record_fire(Some(&claim2), &[row("j", fire2, 0, 4), clash])
            .await
            .is_err()
    );
    assert_eq!(s.last_fire_time("j").await.unwrap(), Some(fire));
    assert!(matches!(
        s.record_fire(Some(&claim2), &[row("j", fire2, 0, 9)])
            .await
            .unwrap(),
        FireOutcome::Recorded(_)
    ));
    assert_eq!(
        s.purge_fire_claims(Utc::now() + Duration::seconds(1))
            .await
            .unwrap(),
        2
    );
}

async fn transitions_are_compare_and_set(backend: Backend) {
    let (_db, s) = open(backend).await;
    let fire = Utc::now() - Duration::minutes(10);
    let r = row("j", fire, 0, 9);
    s.record_fire(None, std::slice::from_ref(&r)).await.unwrap();
    assert_eq!(
        s.pending_before(Utc::now(), None, 10).await.unwrap().len(),
        1
    );

    let mut start = Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Running);
    start.executor_instance = Some("127.0.0.1:9001".into());
    start.start_time = Some(fire);
    assert!(s.transition(&r.trace_id, &start).await.unwrap().applied());
    assert!(
        !s.transition(&r.trace_id, &start).await.unwrap().applied(),
        "second start must lose"
    );
    assert!(
        s.pending_before(Utc::now(), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.running_before(Utc::now(), None, 10).await.unwrap().len(),
        1
    );

    let mut timeout = Transition::to(&[ExecutionStatus::Running], ExecutionStatus::Timeout);
    timeout.error_message = Some("no answer".into());
    assert!(s.transition(&r.trace_id, &timeout).await.unwrap().applied());
    // A late success does not overwrite the compensator's verdict.
    let mut late = Transition::to(&[ExecutionStatus::Running], ExecutionStatus::Success);
    late.result_message = Some("done".into());
    assert!(!s.transition(&r.trace_id, &late).await.unwrap().applied());
    let e = s.get_execution(&r.trace_id).await.unwrap().unwrap();
    assert_eq!(e.status, ExecutionStatus::Timeout);
    assert_eq!(e.executor_instance.as_deref(), Some("127.0.0.1:9001"));
    assert_eq!(e.error_message.as_deref(), Some("no answer"));
    assert_eq!(e.result_message, None);
}

async fn batched_fires_are_independent(backend: Backend) {
    let (_db, s) = open(backend).await;
    let fire = Utc.with_ymd_and_hms(2024, 5, 1, 2, 0, 0).unwrap();
    let claim = |job: &str, by: &str| FireClaim {
        fixed_delay: None,
        claimed_at: Utc::now(),
        job_name: job.into(),
        fire_time: fire,
        scheduler_instance: by.into(),
    };
    // Another scheduler fired `b` already.
    s.record_fire(Some(&claim("b", "other:1")), &[row("b", fire, 0, 9)])
        .await
        .unwrap();
    let batch = vec![
        (
            claim("a", "me:1"),
            vec![row("a", fire, 0, 4), row("a", fire, 5, 9)],
        ),
        (claim("b", "me:1"), vec![row("b", fire, 0, 9)]),
        (claim("c", "me:1"), vec![row("c", fire, 0, 9)]),
    ];
    let outcomes = s.record_fires(&records(&batch)).await.unwrap();
    let kinds: Vec<Option<usize>> = outcomes
        .iter()
        .map(|o| match o {
            FireOutcome::Recorded(rows) => Some(rows.len()),
            FireOutcome::AlreadyFired | FireOutcome::Behind(_) => None,
        })
        .collect();
    assert_eq!(kinds, [Some(2), None, Some(1)]);
    let page =
        |job: &'static str| s.list_executions(job, None, store::PageRequest { page: 0, size: 10 });
    assert_eq!(page("a").await.unwrap().total, 2);
    assert_eq!(page("b").await.unwrap().total, 1, "the loser wrote nothing");
    let FireOutcome::Recorded(a_rows) = &outcomes[0] else {
        unreachable!()
    };
    for e in a_rows {
        assert_eq!(
            Some(e),
            s.get_execution(&e.trace_id).await.unwrap().as_ref()
        );
    }
}

/// A burst larger than one multi-row statement: every fire recorded, each returned row equal
/// to the stored one (ids included), and results written as one batch with a per-row answer.
async fn large_batches_return_what_was_stored(backend: Backend) {
    let (_db, s) = open(backend).await;
    let fire = Utc.with_ymd_and_hms(2024, 5, 1, 3, 0, 0).unwrap();
    let batch: Vec<_> = (0..400)
        .map(|i| {
            let job = format!("job-{i:03}");
            let claim = FireClaim {
                fixed_delay: None,
                claimed_at: Utc::now(),
                job_name: job.clone(),
                fire_time: fire,
                scheduler_instance: "me:1".into(),
            };
            (claim, vec![row(&job, fire, 0, 4), row(&job, fire, 5, 9)])
        })
        .collect();
    let outcomes = s.record_fires(&records(&batch)).await.unwrap();
    let mut recorded = Vec::new();
    for ((claim, rows), outcome) in batch.iter().zip(&outcomes) {
        let FireOutcome::Recorded(got) = outcome else {
            panic!("{} not recorded", claim.job_name)
        };
        assert_eq!(got.len(), rows.len());
        for (want, got) in rows.iter().zip(got) {
            assert_eq!(got.trace_id, want.trace_id, "rows come back in order");
            recorded.push(got.clone());
        }
    }
    let mut ids: Vec<i64> = recorded.iter().map(|e| e.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 800, "every row has its own id");
    for e in recorded.iter().step_by(37) {
        assert_eq!(
            Some(e),
            s.get_execution(&e.trace_id).await.unwrap().as_ref()
        );
    }
    // The same fires again: all of them are claimed already, none is written twice.
    let again = s.record_fires(&records(&batch)).await.unwrap();
    assert!(again.iter().all(|o| matches!(o, FireOutcome::AlreadyFired)));

    // Results in one batch: each answer is its own compare-and-set.
    let traces: Vec<String> = recorded.iter().map(|e| e.trace_id.clone()).collect();
    let start = || Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Running);
    let started = s
        .transitions(&[(traces[0].clone(), start()), (traces[1].clone(), start())])
        .await
        .unwrap();
    assert_eq!(started, [Applied::yes(), Applied::yes()]);
    let done = |to| {
        let mut t = Transition::to(&[ExecutionStatus::Running], to);
        t.finish_time = Some(Utc::now());
        t
    };
    let answers = s
        .transitions(&[
            (traces[0].clone(), done(ExecutionStatus::Success)),
            (traces[2].clone(), done(ExecutionStatus::Success)),
            (traces[1].clone(), done(ExecutionStatus::Failed)),
            (traces[0].clone(), done(ExecutionStatus::Failed)),
        ])
        .await
        .unwrap();
    assert_eq!(
        answers.iter().map(Applied::applied).collect::<Vec<_>>(),
        [true, false, true, false],
        "a PENDING row and a second verdict do not apply"
    );
    let status = |i: usize| {
        let s = s.clone();
        let t = traces[i].clone();
        async move { s.get_execution(&t).await.unwrap().unwrap().status }
    };
    assert_eq!(status(0).await, ExecutionStatus::Success);
    assert_eq!(status(1).await, ExecutionStatus::Failed);
    assert_eq!(status(2).await, ExecutionStatus::Pending);

    // Purging takes claims by instant, more than one chunk of them.
    let start = Utc.with_ymd_and_hms(2024, 6, 1, 0, 0, 0).unwrap();
    let many: Vec<_> = (0..6000)
        .map(|i| {
            let at = start + Duration::seconds(i);
            let claim = FireClaim {
                fixed_delay: None,
                claimed_at: Utc::now(),
                job_name: "many".into(),
                fire_time: at,
                scheduler_instance: "me:1".into(),
            };
            (claim, vec![row("many", at, 0, 9)])
        })
        .collect();
    s.record_fires(&records(&many)).await.unwrap();
    assert_eq!(
        s.purge_fire_claims(start + Duration::seconds(5500))
            .await
            .unwrap(),
        400 + 5500,
        "the 400 claims of May and the first 5,500 of June"
    );
    assert_eq!(
        s.last_fire_time("many").await.unwrap(),
        Some(start + Duration::seconds(5999)),
        "later claims stay"
    );
    assert_eq!(
        s.purge_fire_claims(start + Duration::days(1))
            .await
            .unwrap(),
        500
    );
}

/// Which changes of a batch applied.
fn winners(applied: &[Applied]) -> Vec<bool> {
    applied.iter().map(Applied::applied).collect()
}

/// A batch of changes to rows of their own is decided row by row, as the changes would be
/// alone: one change whose guard fails (its row's state, holder or due time, or a row that is
/// not there) leaves it alone and takes nothing from the others. Each guard is tried beside
/// changes that do apply, so a batch that let one through would show a wrong winner.
async fn each_change_of_a_batch_is_judged_by_its_own_guards(backend: Backend) {
    judged_by_their_own_guards(backend, false).await;
}

/// The same, every change naming its row's primary key as the dispatcher's results do (and a
/// row that is not there a key no row has); and a key that names another row changes
/// neither row.
async fn each_change_of_a_batch_set_by_row_id_is_judged_by_its_own_guards(backend: Backend) {
    use ExecutionStatus::{Pending, Running};
    judged_by_their_own_guards(backend, true).await;
    let (_db, s) = open(backend).await;
    let fire = Utc.with_ymd_and_hms(2024, 7, 3, 0, 0, 0).unwrap();
    let rows: Vec<NewExecution> = (0..3)
        .map(|i| row(&format!("ids-{i}"), fire, 0, 0))
        .collect();
    s.record_fire(None, &rows).await.unwrap();
    let ids: Vec<i64> = stored(&s, &rows).await.iter().map(|e| e.id).collect();
    let start = |row_id| Transition {
        executor_instance: Some("10.0.0.1:9000".into()),
        row_id: Some(row_id),
        ..Transition::to(&[Pending], Running)
    };
    // Row 0's change names row 2's key; row 1's its own.
    let batch = vec![
        (rows[0].trace_id.clone(), start(ids[2])),
        (rows[1].trace_id.clone(), start(ids[1])),
    ];
    assert_eq!(winners(&s.transitions(&batch).await.unwrap()), [true, true]);
    assert_eq!(
        statuses(&s, &rows).await,
        [Running, Running, Pending],
        "each change is applied to the row its trace id names"
    );
}

/// The stored row of each of `rows`, in order.
async fn stored(s: &std::sync::Arc<dyn store::Store>, rows: &[NewExecution]) -> Vec<Execution> {
    let mut stored = Vec::with_capacity(rows.len());
    for r in rows {
        stored.push(s.get_execution(&r.trace_id).await.unwrap().unwrap());
    }
    stored
}

/// The status of each of `rows`, in order.
async fn statuses(
    s: &std::sync::Arc<dyn store::Store>,
    rows: &[NewExecution],
) -> Vec<ExecutionStatus> {
    stored(s, rows).await.iter().map(|e| e.status).collect()
}

/// `batch` as the store is given it: with each row's primary key when `by_id` (a row that is
/// not there gets a key no row has), as is otherwise.
async fn named(
    s: &std::sync::Arc<dyn store::Store>,
    batch: &[(String, Transition)],
    by_id: bool,
) -> Vec<(String, Transition)> {
    let mut named = batch.to_vec();
    if by_id {
        for (trace, t) in &mut named {
            let row = s.get_execution(trace).await.unwrap();
            t.row_id = Some(row.map_or(i64::MAX - 1, |e| e.id));
        }
    }
    named
}

async fn judged_by_their_own_guards(backend: Backend, by_id: bool) {
    use ExecutionStatus::{Failed, Pending, Running, Success};
    let (_db, s) = open(backend).await;
    let apply = |batch: Vec<(String, Transition)>| {
        let s = s.clone();
        async move { s.transitions(&named(&s, &batch, by_id).await).await }
    };
    let fire = Utc.with_ymd_and_hms(2024, 7, 2, 0, 0, 0).unwrap();
    let holder = "127.0.0.1:8080";
    let held = |due| Some((holder.to_string(), due));
    let start = |held_by| Transition {
        held_by,
        executor_instance: Some("10.0.0.1:9000".into()),
        ..Transition::to(&[Pending], Running)
    };
    let finish = |to| Transition {
        finish_time: Some(fire + Duration::seconds(1)),
        ..Transition::to(&[Running], to)
    };
    // Each case: a change that must lose, beside two that must win.
    type Losing<'a> = Box<dyn Fn(&NewExecution) -> Transition + 'a>;
    let cases: Vec<(&str, Losing)> = vec![
        ("a row in another state", Box::new(|_| finish(Success))),
        (
            "a row held by another instance",
            Box::new(|r| Transition {
                held_by: Some(("127.0.0.1:9999".into(), r.due_time)),
                ..start(None)
            }),
        ),
        (
            "a row held until another due time",
            Box::new(|r| start(held(r.due_time + Duration::seconds(1)))),
        ),
    ];
    for (n, (case, losing)) in cases.into_iter().enumerate() {
        let fire = fire + Duration::minutes(n as i64);
        let rows: Vec<NewExecution> = (0..3)
            .map(|i| row(&format!("guards-{i}"), fire, 0, 0))
            .collect();
        s.record_fire(None, &rows).await.unwrap();
        let batch = vec![
            (rows[0].trace_id.clone(), start(held(rows[0].due_time))),
            (rows[1].trace_id.clone(), losing(&rows[1])),
            (rows[2].trace_id.clone(), start(None)),
        ];
        let applied = apply(batch.clone()).await.unwrap();
        assert_eq!(winners(&applied), [true, false, true], "{case}");
        assert_eq!(
            statuses(&s, &rows).await,
            [Running, Pending, Running],
            "{case}"
        );
    }
    // Changes that share their guards (the same `from` states, no lease): the rows not in
    // those states lose, alone.
    let rows: Vec<NewExecution> = (0..3)
        .map(|i| row(&format!("guards-{i}"), fire + Duration::minutes(30), 0, 0))
        .collect();
    s.record_fire(None, &rows).await.unwrap();
    s.transition(&rows[1].trace_id, &start(None)).await.unwrap();
    let results: Vec<(String, Transition)> = rows
        .iter()
        .map(|r| (r.trace_id.clone(), finish(Success)))
        .collect();
    let applied = apply(results.clone()).await.unwrap();
    assert_eq!(
        winners(&applied),
        [false, true, false],
        "only the RUNNING row takes a result"
    );
    let starts: Vec<(String, Transition)> = rows
        .iter()
        .map(|r| (r.trace_id.clone(), start(None)))
        .collect();
    let applied = apply(starts.clone()).await.unwrap();
    assert_eq!(
        winners(&applied),
        [true, false, true],
        "the row that has ended does not start again"
    );
    // A RUNNING queued after its own row's verdict, in the same batch: the verdict applies
    // under its lease, the RUNNING is refused, and the row keeps the verdict's values.
    let rows: Vec<NewExecution> = (0..2)
        .map(|i| row(&format!("guards-{i}"), fire + Duration::minutes(45), 0, 0))
        .collect();
    s.record_fire(None, &rows).await.unwrap();
    let verdict = Transition {
        held_by: held(rows[0].due_time),
        finish_time: Some(fire + Duration::seconds(3)),
        ..Transition::to(&[Pending, Running], Success)
    };
    let batch = vec![
        (rows[0].trace_id.clone(), verdict),
        (rows[1].trace_id.clone(), start(None)),
        (rows[0].trace_id.clone(), start(held(rows[0].due_time))),
    ];
    let applied = apply(batch.clone()).await.unwrap();
    assert_eq!(winners(&applied), [true, true, false]);
    let ended = s.get_execution(&rows[0].trace_id).await.unwrap().unwrap();
    assert_eq!(ended.status, Success);
    assert_eq!(
        ended.executor_instance, None,
        "nothing of the refused RUNNING"
    );
    let started = s.get_execution(&rows[1].trace_id).await.unwrap().unwrap();
    assert_eq!(started.status, Running);
    // A row that is not there, beside results for rows that are: several `from` states, a
    // lease, no lease.
    let rows: Vec<NewExecution> = (0..3)
        .map(|i| row(&format!("guards-{i}"), fire + Duration::hours(1), 0, 0))
        .collect();
    s.record_fire(None, &rows).await.unwrap();
    let either = |to| Transition {
        finish_time: Some(fire + Duration::seconds(2)),
        ..Transition::to(&[Pending, Running], to)
    };
    let batch = vec![
        (rows[0].trace_id.clone(), either(Failed)),
        (new_trace_id(), either(Success)),
        (
            rows[1].trace_id.clone(),
            Transition {
                held_by: held(rows[1].due_time),
                ..either(Success)
            },
        ),
        (rows[2].trace_id.clone(), either(Success)),
    ];
    let applied = apply(batch.clone()).await.unwrap();
    assert_eq!(winners(&applied), [true, false, true, true]);
    for (r, status) in rows.iter().zip([Failed, Success, Success]) {
        let e = s.get_execution(&r.trace_id).await.unwrap().unwrap();
        assert_eq!(e.status, status);
        assert_eq!(e.finish_time, Some(fire + Duration::seconds(2)));
    }
    // And a batch whose every change applies, held and not, is written as one.
    let rows: Vec<NewExecution> = (0..4)
        .map(|i| row(&format!("guards-{i}"), fire + Duration::hours(2), 0, 0))
        .collect();
    s.record_fire(None, &rows).await.unwrap();
    let batch: Vec<(String, Transition)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let held_by = (i % 2 == 0).then(|| (holder.to_string(), r.due_time));
            (r.trace_id.clone(), start(held_by))
        })
        .collect();
    assert!(
        apply(batch.clone())
            .await
            .unwrap()
            .iter()
            .all(Applied::applied)
    );
    for r in &rows {
        let e = s.get_execution(&r.trace_id).await.unwrap().unwrap();
        assert_eq!(
            (e.status, e.executor_instance.as_deref()),
            (Running, Some("10.0.0.1:9000"))
        );
    }
}

/// 600 results in one batch (more than one statement's worth), every other one setting
/// different columns: each row gets exactly its own values, to the millisecond, and keeps
/// the columns its change leaves unset.
async fn a_batch_of_results_gives_each_row_its_own_values(backend: Backend) {
    each_row_its_own_values(backend, false).await;
}

/// The same with three results in four naming their row's primary key, as the dispatcher's
/// do: the batch is set by key and by trace id, each row still with its own values.
async fn a_batch_of_results_set_by_row_id_gives_each_row_its_own_values(backend: Backend) {
    each_row_its_own_values(backend, true).await;
}

async fn each_row_its_own_values(backend: Backend, by_id: bool) {
    let (_db, s) = open(backend).await;
    let fire = Utc.with_ymd_and_hms(2024, 7, 1, 0, 0, 0).unwrap();
    let rows: Vec<NewExecution> = (0..600)
        .map(|i| row(&format!("batch-{i:03}"), fire, 0, 0))
        .collect();
    s.record_fire(None, &rows).await.unwrap();
    // Every third row has been started by another executor already: a result that does not
    // name one keeps it.
    let started: Vec<(String, Transition)> = rows
        .iter()
        .step_by(3)
        .map(|r| {
            let mut t = Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Running);
            t.executor_instance = Some("10.0.0.9:9999".into());
            (r.trace_id.clone(), t)
        })
        .collect();
    assert!(
        s.transitions(&started)
            .await
            .unwrap()
            .iter()
            .all(Applied::applied)
    );
    let at = |i: usize| fire + Duration::milliseconds(1_000 + i as i64 * 7);
    let results: Vec<(String, Transition)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let from: &'static [ExecutionStatus] =
                &[ExecutionStatus::Pending, ExecutionStatus::Running];
            let mut t = if i % 2 == 0 {
                let mut t = Transition::to(from, ExecutionStatus::Success);
                t.start_time = Some(at(i) - Duration::milliseconds(3));
                t.duration_ms = Some(i as i64);
                t.result_message = Some(format!("ok {i} ✓"));
                if i % 3 != 0 {
                    t.executor_instance = Some(format!("10.0.0.{}:8080", i % 7));
                }
                t
            } else {
                let mut t = Transition::to(from, ExecutionStatus::Failed);
                t.error_message = Some(format!("failed {i}"));
                t
            };
            t.finish_time = Some(at(i));
            (r.trace_id.clone(), t)
        })
        .collect();
    // A failure first: its unset start is the first value of that column in the batch.
    let mut results: Vec<(String, Transition)> = results.into_iter().rev().collect();
    if by_id {
        let keyed = named(&s, &results, true).await;
        for (i, (item, keyed)) in results.iter_mut().zip(keyed).enumerate() {
            if i % 4 != 3 {
                *item = keyed;
            }
        }
    }
    let applied = s.transitions(&results).await.unwrap();
    assert_eq!(applied.len(), 600);
    assert!(applied.iter().all(Applied::applied));
    for (i, r) in rows.iter().enumerate() {
        let e = s.get_execution(&r.trace_id).await.unwrap().unwrap();
        let executor = match (i % 2, i % 3) {
            (_, 0) => Some("10.0.0.9:9999".to_string()),
            (0, _) => Some(format!("10.0.0.{}:8080", i % 7)),
            _ => None,
        };
        assert_eq!(e.executor_instance, executor, "row {i}");
        assert_eq!(e.finish_time, Some(at(i)), "row {i}");
        if i % 2 == 0 {
            assert_eq!(e.status, ExecutionStatus::Success, "row {i}");
            assert_eq!(e.start_time, Some(at(i) - Duration::milliseconds(3)));
            assert_eq!(e.duration_ms, Some(i as i64));
            assert_eq!(
                e.result_message.as_deref(),
                Some(format!("ok {i} ✓").as_str())
            );
            assert_eq!(e.error_message, None);
        } else {
            assert_eq!(e.status, ExecutionStatus::Failed, "row {i}");
            assert_eq!(e.start_time, None);
            assert_eq!(e.duration_ms, None);
            assert_eq!(e.result_message, None);
            assert_eq!(
                e.error_message.as_deref(),
                Some(format!("failed {i}").as_str())
            );
        }
    }
}

async fn execution_search_counts_up_to_the_cap(backend: Backend) {
    let (_db, s) = open(backend).await;
    let t0 = Utc.with_ymd_and_hms(2026, 1, 31, 0, 0, 0).unwrap();
    let rows: Vec<_> = (0..5)
        .map(|i| row("capped", t0 + Duration::seconds(i), 0, 0))
        .collect();
    s.record_fire(None, &rows).await.unwrap();
    let all = store::ExecutionFilter::default();
    let first = store::PageRequest { page: 0, size: 2 };
    let page = s.search_executions(&all, first, 3).await.unwrap();
    assert_eq!((page.total, page.capped), (3, true));
    assert_eq!(page.items[0].trace_id, rows[4].trace_id);
    // Paging goes on past the counted window.
    let last = store::PageRequest { page: 2, size: 2 };
    let page = s.search_executions(&all, last, 3).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].trace_id, rows[0].trace_id);
    let page = s.search_executions(&all, first, 6).await.unwrap();
    assert_eq!((page.total, page.capped), (5, false));
    let page = s.search_executions(&all, first, 5).await.unwrap();
    assert_eq!((page.total, page.capped), (5, false));
    let page = s.search_executions(&all, first, 4).await.unwrap();
    assert_eq!((page.total, page.capped), (4, true));
}

/// The dispatch lease: a guarded transition applies only while the row still names its
/// holder and due time, and a hand-over moves both, so the old holder's guard then fails.
async fn a_lease_guards_its_row_and_hands_over_once(backend: Backend) {
    let (_db, s) = open(backend).await;
    let due = Utc.with_ymd_and_hms(2024, 5, 1, 4, 0, 0).unwrap();
    let r = row("j", due, 0, 9);
    s.record_fire(None, std::slice::from_ref(&r)).await.unwrap();
    let holder = ("127.0.0.1:8080".to_string(), due);
    let later = due + Duration::seconds(30);
    let take = Transition {
        held_by: Some(holder.clone()),
        hand_to: Some(("127.0.0.1:8081".into(), later)),
        ..Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Pending)
    };
    assert!(s.transition(&r.trace_id, &take).await.unwrap().applied());
    assert!(
        !s.transition(&r.trace_id, &take).await.unwrap().applied(),
        "a second take-over finds the row moved"
    );
    let old_holder_starts = Transition {
        held_by: Some(holder),
        start_time: Some(later),
        ..Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Running)
    };
    assert!(
        !s.transition(&r.trace_id, &old_holder_starts)
            .await
            .unwrap()
            .applied()
    );
    let e = s.get_execution(&r.trace_id).await.unwrap().unwrap();
    assert_eq!(
        (e.status, e.scheduler_instance.as_deref(), e.due_time),
        (ExecutionStatus::Pending, Some("127.0.0.1:8081"), later)
    );
    let new_holder_starts = Transition {
        held_by: Some(("127.0.0.1:8081".into(), later)),
        ..old_holder_starts.clone()
    };
    // In a group-committed batch the guards decide the same way, each move seeing the row
    // as the moves before it left it.
    let old_holder_ends = Transition {
        held_by: Some(("127.0.0.1:8080".into(), due)),
        ..Transition::to(&[ExecutionStatus::Running], ExecutionStatus::Timeout)
    };
    let batch = [
        (r.trace_id.clone(), old_holder_starts),
        (r.trace_id.clone(), new_holder_starts),
        (r.trace_id.clone(), old_holder_ends),
    ];
    assert_eq!(
        s.transitions(&batch).await.unwrap(),
        [Applied::No, Applied::yes(), Applied::No]
    );
    let e = s.get_execution(&r.trace_id).await.unwrap().unwrap();
    assert_eq!(e.status, ExecutionStatus::Running);
    // A hand-over earlier in the batch moves the lease for the guards after it.
    let again = later + Duration::seconds(30);
    let batch = [
        (
            r.trace_id.clone(),
            Transition {
                hand_to: Some(("127.0.0.1:8082".into(), again)),
                ..Transition::to(&[ExecutionStatus::Running], ExecutionStatus::Pending)
            },
        ),
        (
            r.trace_id.clone(),
            Transition {
                held_by: Some(("127.0.0.1:8082".into(), again)),
                ..Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Running)
            },
        ),
    ];
    assert_eq!(
        s.transitions(&batch).await.unwrap(),
        [Applied::yes(), Applied::yes()]
    );
    let e = s.get_execution(&r.trace_id).await.unwrap().unwrap();
    assert_eq!(
        (e.status, e.scheduler_instance.as_deref(), e.due_time),
        (ExecutionStatus::Running, Some("127.0.0.1:8082"), again)
    );
}

/// A failure's retry row is inserted with the failure, in batches and alone, and only when
/// the failure applies.
async fn a_failure_and_its_retry_are_written_together(backend: Backend) {
    let (_db, s) = open(backend).await;
    let fire = Utc.with_ymd_and_hms(2024, 5, 1, 5, 0, 0).unwrap();
    let (a, b) = (row("a", fire, 0, 9), row("b", fire, 0, 9));
    s.record_fire(None, &[a.clone(), b.clone()]).await.unwrap();
    let retry_of = |r: &NewExecution| NewExecution {
        execution_id: format!("{}#r1", r.execution_id),
        trace_id: new_trace_id(),
        trigger_type: TriggerType::Retry,
        retry_count: 1,
        parent_trace_id: Some(r.trace_id.clone()),
        ..r.clone()
    };
    let fail = |r: &NewExecution| Transition {
        error_message: Some("boom".into()),
        retry: Some(Box::new(retry_of(r))),
        ..Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Failed)
    };
    let batch = s
        .transitions(&[
            (a.trace_id.clone(), fail(&a)),
            (a.trace_id.clone(), fail(&a)),
        ])
        .await
        .unwrap();
    let Some(retry) = (match &batch[0] {
        Applied::Yes(f) => f.retry.as_ref(),
        Applied::No => None,
    }) else {
        panic!("the failure applies with its retry: {batch:?}")
    };
    assert_eq!(
        batch[1],
        Applied::No,
        "the second failure loses, and writes no retry"
    );
    assert_eq!(
        Some(&**retry),
        s.get_execution(&retry.trace_id).await.unwrap().as_ref()
    );
    assert_eq!(retry.parent_trace_id.as_deref(), Some(a.trace_id.as_str()));
    let alone = s.transition(&b.trace_id, &fail(&b)).await.unwrap();
    let Some(retry_b) = (match &alone {
        Applied::Yes(f) => f.retry.clone(),
        Applied::No => None,
    }) else {
        panic!("a single failure applies with its retry: {alone:?}")
    };
    assert_eq!(retry_b.retry_count, 1);
    let history = s
        .list_executions("a", None, store::PageRequest { page: 0, size: 10 })
        .await
        .unwrap();
    assert_eq!(history.total, 2, "one failure, one retry");
}

/// Compensation reads stale rows in keyset pages: every row due before the bound once, in
/// the order they were triggered.
async fn stale_rows_are_paged_by_key(backend: Backend) {
    let (_db, s) = open(backend).await;
    let base = Utc.with_ymd_and_hms(2024, 5, 1, 6, 0, 0).unwrap();
    // Five rows on two due times, so ties are broken by id.
    let rows: Vec<NewExecution> = (0..5)
        .map(|i| {
            row(
                &format!("j{i}"),
                base + Duration::seconds(i64::from(i / 3)),
                0,
                9,
            )
        })
        .collect();
    s.record_fire(None, &rows).await.unwrap();
    // Triggered within the bound but due after it (a fire claimed ahead, a retry in its
    // backoff): still held.
    let ahead = NewExecution {
        due_time: base + Duration::hours(2),
        ..row("ahead", base, 0, 9)
    };
    s.record_fire(None, &[ahead]).await.unwrap();
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = s
            .pending_before(base + Duration::hours(1), cursor, 2)
            .await
            .unwrap();
        let page: Vec<Execution> = page.into_iter().map(Result::unwrap).collect();
        let Some(last) = page.last() else { break };
        cursor = Some((last.trigger_time, last.id));
        seen.extend(page.into_iter().map(|e| e.job_name));
    }
    assert_eq!(seen, ["j0", "j1", "j2", "j3", "j4"]);
    assert!(
        s.pending_before(base, None, 10).await.unwrap().is_empty(),
        "only rows due before the bound"
    );
}

/// The body of a job `name` firing every second under overlap policy `policy`.
fn every_second(name: &str, policy: &str) -> serde_json::Value {
    serde_json::json!({"name": name, "serviceName": "s", "handler": "h",
        "cron": "* * * * * ?", "overlapPolicy": policy})
}

async fn create(s: &std::sync::Arc<dyn store::Store>, body: serde_json::Value) -> i64 {
    let req: JobRequest = serde_json::from_value(body).unwrap();
    let spec = JobSpec::parse(
        req,
        None,
        None,
        TimeZoneName::parse("UTC").unwrap(),
        Utc::now(),
    )
    .unwrap();
    s.create_job(&spec, None, Utc::now())
        .await
        .unwrap()
        .revision
}

fn success() -> Transition {
    Transition {
        finish_time: Some(Utc::now()),
        ..Transition::to(
            &[ExecutionStatus::Pending, ExecutionStatus::Running],
            ExecutionStatus::Success,
        )
    }
}

/// A fire of `parent` at `fire` recorded in two ranges, 0-4 and 5-9.
async fn parent_fire(
    s: &std::sync::Arc<dyn store::Store>,
    fire: chrono::DateTime<Utc>,
) -> Vec<Execution> {
    match s
        .record_fire(
            None,
            &[row("parent", fire, 0, 4), row("parent", fire, 5, 9)],
        )
        .await
        .unwrap()
    {
        FireOutcome::Recorded(ranges) => ranges,
        other => unreachable!("{other:?}"),
    }
}

/// A child planned for `parent_fire` over `ranges`, as a completing SUCCESS carries it.
fn child_trigger(parent_fire: &str, ranges: &[(u32, u32)]) -> store::ChildTrigger {
    let rows = ranges
        .iter()
        .map(|&(start, end)| NewExecution {
            execution_id: jobflow::jobs::child_execution_id("child", parent_fire, start, end),
            trigger_type: TriggerType::Child,
            shard_count: 4,
            ..row("child", Utc::now(), start, end)
        })
        .collect();
    store::ChildTrigger {
        parent_job: "parent".into(),
        parent_fire: parent_fire.into(),
        rows,
    }
}

/// Children are triggered by the SUCCESS that completes a fire, in its transaction, once: a
/// SUCCESS of one range of two triggers nothing; the second range's, planned over another
/// executor count (other child ranges), triggers them; a later re-run's SUCCESS does not
/// trigger them again.
async fn children_are_written_once_with_the_success_that_completes_their_fire(backend: Backend) {
    let (_db, s) = open(backend).await;
    let fire = Utc.with_ymd_and_hms(2024, 5, 1, 8, 0, 0).unwrap();
    let ranges = parent_fire(&s, fire).await;
    let key = jobflow::jobs::fire_key(&ranges[0].execution_id).to_string();
    let with_children = |plan: &[(u32, u32)]| Transition {
        lock_job: Some("parent".into()),
        children: Some(Box::new(child_trigger(&key, plan))),
        ..success()
    };
    let first = s
        .transition(&ranges[0].trace_id, &with_children(&[(0, 3)]))
        .await
        .unwrap();
    assert_eq!(first, Applied::yes(), "one range of two: no children yet");
    let second = s
        .transitions(&[(ranges[1].trace_id.clone(), with_children(&[(0, 1), (2, 3)]))])
        .await
        .unwrap();
    let Applied::Yes(follow) = &second[0] else {
        panic!("{second:?}")
    };
    assert_eq!(
        follow.children.len(),
        2,
        "the completing SUCCESS triggers the child"
    );
    for child in &follow.children {
        assert_eq!(
            Some(child),
            s.get_execution(&child.trace_id).await.unwrap().as_ref()
        );
        assert_eq!(child.status, ExecutionStatus::Pending);
    }
    // A re-run of a range completes the fire again: the child is not triggered twice.
    let FireOutcome::Recorded(rerun) = s
        .record_fire(
            None,
            &[NewExecution {
                execution_id: jobflow::jobs::rerun_execution_id(&ranges[0].execution_id, "x1"),
                retry_count: 1,
                ..row("parent", fire, 0, 4)
            }],
        )
        .await
        .unwrap()
    else {
        unreachable!()
    };
    let again = s
        .transition(&rerun[0].trace_id, &with_children(&[(0, 3)]))
        .await
        .unwrap();
    assert_eq!(again, Applied::yes());
    let children = s
        .list_executions("child", None, store::PageRequest { page: 0, size: 10 })
        .await
        .unwrap();
    assert_eq!(children.total, 2, "{:?}", children.items);
}

/// A RUNNING row written without a start (an older version did, for failovers and notes) is
/// still found by the sweep, counted from its due time.
async fn a_running_row_without_a_start_is_swept(backend: Backend) {
    let (_db, s) = open(backend).await;
    let due = Utc.with_ymd_and_hms(2024, 5, 1, 9, 0, 0).unwrap();
    let r = row("j", due, 0, 9);
    s.record_fire(None, std::slice::from_ref(&r)).await.unwrap();
    let no_start = Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Running);
    assert!(
        s.transition(&r.trace_id, &no_start)
            .await
            .unwrap()
            .applied()
    );
    let swept = s
        .running_before(due + Duration::minutes(1), None, 10)
        .await
        .unwrap();
    assert_eq!(swept.len(), 1);
    assert_eq!(swept[0].as_ref().unwrap().trace_id, r.trace_id);
    assert!(s.running_before(due, None, 10).await.unwrap().is_empty());
}

/// A row that does not read (here a trigger type a newer version wrote) is returned as
/// unreadable with its place in the sweep; the rows after it are still swept.
async fn an_unreadable_row_is_passed_over_not_fatal(backend: Backend) {
    let (db, s) = open(backend).await;
    let due = Utc.with_ymd_and_hms(2024, 5, 1, 10, 0, 0).unwrap();
    let rows: Vec<NewExecution> = (0..3)
        .map(|i| row(&format!("j{i}"), due + Duration::seconds(i), 0, 9))
        .collect();
    s.record_fire(None, &rows).await.unwrap();
    db.execute("UPDATE job_execution SET trigger_type = 'FROM_THE_FUTURE' WHERE job_name = 'j1'")
        .await;
    let page = s
        .pending_before(due + Duration::minutes(1), None, 10)
        .await
        .unwrap();
    assert_eq!(page.len(), 3);
    assert_eq!(page[0].as_ref().unwrap().job_name, "j0");
    let bad = page[1].as_ref().unwrap_err();
    assert_eq!(bad.trace_id, rows[1].trace_id);
    assert_eq!(bad.key, due + Duration::seconds(1));
    assert!(bad.error.contains("trigger_type"), "{}", bad.error);
    assert_eq!(page[2].as_ref().unwrap().job_name, "j2");
}

/// `job`'s cron fire at `at`, claimed and recorded.
async fn claimed(
    s: &std::sync::Arc<dyn store::Store>,
    job: &str,
    at: chrono::DateTime<Utc>,
) -> Vec<Execution> {
    let claim = FireClaim {
        fixed_delay: None,
        job_name: job.into(),
        fire_time: at,
        scheduler_instance: "127.0.0.1:8080".into(),
        claimed_at: at,
    };
    match s
        .record_fire(Some(&claim), &[row(job, at, 0, 9)])
        .await
        .unwrap()
    {
        FireOutcome::Recorded(rows) => rows,
        other => unreachable!("{job} {at}: {other:?}"),
    }
}

/// The cron fire `rows` of `job` as admission sees it, started when admitted.
fn guarded(
    job: &str,
    policy: jobflow::jobs::OverlapPolicy,
    revision: Option<i64>,
    rows: &[Execution],
) -> store::GuardedFire {
    store::GuardedFire {
        job: job.into(),
        revision,
        policy,
        rows: rows.to_vec(),
        withdrawal: store::Withdrawal {
            instance: "127.0.0.1:8080".into(),
            job: job.into(),
            claimed: Some(rows[0].fire_time),
            traces: rows.iter().map(|r| r.trace_id.clone()).collect(),
        },
        scheduled: true,
    }
}

/// Guarded fires are judged at their instant under their job's lock: a fire of a job edited,
/// disabled or deleted since it was planned, at or before its instant, is withdrawn (its
/// claim and rows deleted), one changed after its instant is not; under
/// SKIP a fire beside an open run is recorded SKIPPED, naming the run; under COVER the open
/// run is cancelled and returned to be stopped; a claimed fire not due yet is not a run.
async fn guarded_fires_are_judged_under_their_job(backend: Backend) {
    let (_db, s) = open(backend).await;
    let skip_rev = create(&s, every_second("skip", "SKIP")).await;
    create(&s, every_second("cover", "COVER")).await;
    let now = Utc.with_ymd_and_hms(2024, 5, 1, 11, 0, 0).unwrap();
    use jobflow::jobs::OverlapPolicy::{Cover, Skip};
    // The first fire of each runs; a fire claimed for a later instant is not a run.
    let (first, later) = (
        claimed(&s, "skip", now).await,
        claimed(&s, "skip", now + Duration::seconds(2)).await,
    );
    let cover_first = claimed(&s, "cover", now).await;
    let admitted = s
        .admit(
            &[
                guarded("skip", Skip, Some(skip_rev), &first),
                guarded("cover", Cover, None, &cover_first),
            ],
            now,
        )
        .await
        .unwrap();
    assert!(
        matches!(&admitted[0], store::Admitted::Run { rows, covered } if rows[0].status == ExecutionStatus::Pending && covered.is_empty()),
        "{admitted:?}"
    );
    assert!(matches!(&admitted[1], store::Admitted::Run { covered, .. } if covered.is_empty()));
    // The next instant: SKIP skips beside the running first fire, COVER cancels it.
    let (skip_next, cover_next) = (
        claimed(&s, "skip", now + Duration::seconds(1)).await,
        claimed(&s, "cover", now + Duration::seconds(1)).await,
    );
    let t1 = now + Duration::seconds(1);
    let admitted = s
        .admit(
            &[
                guarded("skip", Skip, None, &skip_next),
                guarded("cover", Cover, None, &cover_next),
            ],
            t1,
        )
        .await
        .unwrap();
    let store::Admitted::Skipped { rows, running } = &admitted[0] else {
        panic!("{admitted:?}")
    };
    assert_eq!(
        running,
        &vec![first[0].trace_id.clone()],
        "the fire claimed for later is no run"
    );
    assert_eq!(rows[0].status, ExecutionStatus::Skipped);
    let stored = s
        .get_execution(&skip_next[0].trace_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, ExecutionStatus::Skipped);
    assert!(stored.error_message.unwrap().contains(&first[0].trace_id));
    let store::Admitted::Run { covered, .. } = &admitted[1] else {
        panic!("{admitted:?}")
    };
    assert_eq!(covered[0].trace_id, cover_first[0].trace_id);
    let cancelled = s
        .get_execution(&cover_first[0].trace_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cancelled.status, ExecutionStatus::Cancelled);
    // The later SKIP fire was planned under revision `skip_rev`; the job is disabled before
    // its instant: withdrawn.
    s.set_job_enabled("skip", false, None, now + Duration::seconds(1))
        .await
        .unwrap();
    let admitted = s
        .admit(
            &[guarded("skip", Skip, Some(skip_rev), &later)],
            now + Duration::seconds(2),
        )
        .await
        .unwrap();
    assert_eq!(admitted, [store::Admitted::Withdrawn]);
    assert_eq!(
        s.get_execution(&later[0].trace_id).await.unwrap(),
        None,
        "its row is deleted"
    );
    assert_eq!(
        s.last_fire_time("skip").await.unwrap(),
        Some(now + Duration::seconds(1)),
        "its claim too"
    );
    // A deleted job's fire is withdrawn too, never inserted.
    let orphan = claimed(&s, "cover", now + Duration::seconds(3)).await;
    s.delete_job("cover", Utc::now()).await.unwrap();
    let admitted = s
        .admit(
            &[guarded("cover", Cover, None, &orphan)],
            now + Duration::seconds(3),
        )
        .await
        .unwrap();
    assert_eq!(admitted, [store::Admitted::Withdrawn]);
    // A job deleted after a fire's instant: the fire was due under it, and is admitted.
    let late_rev = create(&s, every_second("gone-late", "COVER")).await;
    let due = claimed(&s, "gone-late", now + Duration::seconds(5)).await;
    s.delete_job("gone-late", Utc::now()).await.unwrap();
    let admitted = s
        .admit(
            &[guarded("gone-late", Cover, Some(late_rev), &due)],
            now + Duration::seconds(5),
        )
        .await
        .unwrap();
    assert!(
        matches!(&admitted[0], store::Admitted::Run { rows, .. } if rows[0].trace_id == due[0].trace_id),
        "{admitted:?}"
    );
}

/// Guarded cron fires are judged `ADMIT_AHEAD` before their instant, writing nothing: idle
/// only when the job is at the fire's revision, its rows PENDING and no other run open, and
/// never earlier than `ADMIT_AHEAD`. From then the fire is a run of its job for every other
/// admission: a manual SKIP run is skipped for it, a manual COVER run covers it as a run that
/// may have been called, and the cancel is counted for the launchers. A cron fire admitted
/// when a later instant of its job is a run already is superseded (SKIPPED), never covers it.
async fn a_fire_judged_ahead_is_a_run_for_every_admission_after_it(backend: Backend) {
    use jobflow::jobs::OverlapPolicy::{Cover, Skip};
    let (_db, s) = open(backend).await;
    let skip_rev = create(&s, every_second("skip", "SKIP")).await;
    let cover_rev = create(&s, every_second("cover", "COVER")).await;
    let busy_rev = create(&s, every_second("busy", "SKIP")).await;
    let edited_rev = create(&s, every_second("edited", "SKIP")).await;
    let t0 = Utc.with_ymd_and_hms(2024, 5, 1, 13, 0, 0).unwrap();
    let ahead = t0 - store::ADMIT_AHEAD;
    let (skip, cover, edited) = (
        claimed(&s, "skip", t0).await,
        claimed(&s, "cover", t0).await,
        claimed(&s, "edited", t0).await,
    );
    s.set_job_enabled("edited", false, None, t0 - Duration::seconds(1))
        .await
        .unwrap();
    // `busy` still runs its fire of the second before.
    let busy_before = claimed(&s, "busy", t0 - Duration::seconds(1)).await;
    let busy = claimed(&s, "busy", t0).await;
    let fires = [
        guarded("skip", Skip, Some(skip_rev), &skip),
        guarded("cover", Cover, Some(cover_rev), &cover),
        guarded("busy", Skip, Some(busy_rev), &busy),
        guarded("edited", Skip, Some(edited_rev), &edited),
        // Planned under an earlier revision: the job's last write (its creation, at the
        // wall clock's now) came after the instant.
        guarded("skip", Skip, Some(skip_rev - 1), &skip),
    ];
    let too_early = s
        .admit_ahead(&fires, ahead - Duration::milliseconds(1))
        .await
        .unwrap();
    assert_eq!(too_early, [false; 5], "judged before ADMIT_AHEAD");
    let judged = s.admit_ahead(&fires, ahead).await.unwrap();
    assert_eq!(
        judged,
        [true, true, false, false, true],
        "idle, idle, beside {}, disabled before its instant, changed after it",
        busy_before[0].trace_id
    );
    for fire in [&skip, &cover, &busy] {
        let row = s.get_execution(&fire[0].trace_id).await.unwrap().unwrap();
        assert_eq!(row.status, ExecutionStatus::Pending, "nothing written");
    }
    // A manual run between the judgment and the instant finds the judged fire running.
    let manual = |job: &str| NewExecution {
        trigger_type: TriggerType::Manual,
        execution_id: format!("{job}:manual:0-9"),
        ..row(job, ahead + Duration::milliseconds(100), 0, 9)
    };
    let now = ahead + Duration::milliseconds(100);
    let cancels_before = s.instant_counters().await.unwrap().cancels;
    let admitted = s
        .record_guarded(Skip, &[manual("skip")], now)
        .await
        .unwrap();
    assert!(
        matches!(&admitted, store::Admitted::Skipped { running, .. } if *running == [skip[0].trace_id.clone()]),
        "{admitted:?}"
    );
    let admitted = s
        .record_guarded(Cover, &[manual("cover")], now)
        .await
        .unwrap();
    let store::Admitted::Run {
        covered,
        rows: manual_rows,
    } = &admitted
    else {
        panic!("{admitted:?}")
    };
    assert_eq!(covered[0].trace_id, cover[0].trace_id);
    let manual_run = manual_rows[0].trace_id.clone();
    let stopping = s.stopping(100).await.unwrap();
    assert_eq!(
        stopping.iter().map(|e| &e.trace_id).collect::<Vec<_>>(),
        [&cover[0].trace_id],
        "it may have been called at its instant: its stop is waited for"
    );
    // The manual COVER run's cancel is counted, so the launcher holding the covered fire
    // reads its rows again at the instant and does not call it.
    assert!(s.instant_counters().await.unwrap().cancels > cancels_before);
    // `busy`'s fire admitted late, when the fire of the second after it is a run already:
    // superseded, SKIPPED, and it does not cover that fire.
    s.transition(&busy_before[0].trace_id, &success())
        .await
        .unwrap();
    let busy_next = claimed(&s, "busy", t0 + Duration::seconds(1)).await;
    let late = t0 + Duration::milliseconds(900);
    let admitted = s
        .admit(&[guarded("busy", Skip, Some(busy_rev), &busy)], late)
        .await
        .unwrap();
    assert!(
        matches!(&admitted[0], store::Admitted::Skipped { running, .. } if *running == [busy_next[0].trace_id.clone()]),
        "{admitted:?}"
    );
    // Three instants of a COVER job admitted together (their instance was paused): the
    // newest runs, the older two are superseded, nothing is covered or cancelled.
    let burst: Vec<Vec<Execution>> = futures::future::join_all(
        [10, 11, 14].map(|n| claimed(&s, "cover", t0 + Duration::seconds(n))),
    )
    .await;
    let fires: Vec<store::GuardedFire> = burst
        .iter()
        .map(|rows| guarded("cover", Cover, Some(cover_rev), rows))
        .collect();
    s.stops_confirmed(&[cover[0].trace_id.clone()])
        .await
        .unwrap();
    s.transition(&manual_run, &success()).await.unwrap();
    let admitted = s
        .admit(
            &fires,
            t0 + Duration::seconds(14) + Duration::milliseconds(500),
        )
        .await
        .unwrap();
    assert!(
        matches!(&admitted[0], store::Admitted::Skipped { .. }),
        "{admitted:?}"
    );
    assert!(
        matches!(&admitted[1], store::Admitted::Skipped { .. }),
        "{admitted:?}"
    );
    assert!(
        matches!(&admitted[2], store::Admitted::Run { covered, .. } if covered.is_empty()),
        "{admitted:?}"
    );
    let first = s
        .get_execution(&burst[0][0].trace_id)
        .await
        .unwrap()
        .unwrap();
    assert!(
        first.error_message.unwrap().contains("replaced it"),
        "superseded, said so"
    );
}

/// A run cancelled while it may still go on at its executor (covered under COVER, or by an
/// operator's cancel) counts as a run of its job until the stop is confirmed: a COVER fire
/// after it covers it too, a SKIP fire beside it is skipped. A covered fire that was never
/// called (PENDING) is not stopping.
async fn a_cancelled_run_counts_for_its_job_until_its_stop_is_confirmed(backend: Backend) {
    use jobflow::jobs::OverlapPolicy::{Cover, Skip};
    let (_db, s) = open(backend).await;
    create(&s, every_second("cover", "COVER")).await;
    create(&s, every_second("skip", "SKIP")).await;
    let t0 = Utc.with_ymd_and_hms(2024, 5, 1, 11, 0, 0).unwrap();
    let at = |n: i64| t0 + Duration::seconds(n);
    let traces = |runs: &[Execution]| runs.iter().map(|e| e.trace_id.clone()).collect::<Vec<_>>();
    let stopping = |s: std::sync::Arc<dyn store::Store>| async move {
        let all = s.stopping(100).await.unwrap();
        all.into_iter().map(|e| e.trace_id).collect::<Vec<_>>()
    };
    let mut fires = Vec::new();
    for n in 0..5 {
        fires.push(claimed(&s, "cover", at(n)).await);
    }
    let admit = |n: usize| {
        let s = s.clone();
        let fire = guarded("cover", Cover, None, &fires[n]);
        async move { s.admit(&[fire], at(n as i64)).await.unwrap().remove(0) }
    };
    let covered = |a: store::Admitted| match a {
        store::Admitted::Run { covered, .. } => covered,
        other => panic!("{other:?}"),
    };
    assert!(covered(admit(0).await).is_empty());
    // Fire 1 covers fire 0, which was called: it is cancelled and stopping.
    assert_eq!(traces(&covered(admit(1).await)), traces(&fires[0]));
    assert_eq!(stopping(s.clone()).await, traces(&fires[0]));
    // Fire 2 covers fire 1 and still waits for fire 0, which has not confirmed its stop.
    let c = covered(admit(2).await);
    assert_eq!(traces(&c), [traces(&fires[0]), traces(&fires[1])].concat());
    assert_eq!(c[0].status, ExecutionStatus::Cancelled, "stopping already");
    assert_eq!(c[1].status, ExecutionStatus::Pending, "as it was found");
    assert_eq!(stopping(s.clone()).await.len(), 2);
    // Both stops confirmed: fire 3 covers just fire 2.
    s.stops_confirmed(&[traces(&fires[0]), traces(&fires[1])].concat())
        .await
        .unwrap();
    assert!(stopping(s.clone()).await.is_empty());
    assert_eq!(traces(&covered(admit(3).await)), traces(&fires[2]));
    // Fire 3 cancelled by an operator: fire 4 finds only runs still stopping, nothing to
    // cancel, and waits for both.
    let cancel = Transition {
        finish_time: Some(at(4)),
        stopping: Some(at(4)),
        ..Transition::to(
            &[ExecutionStatus::Pending, ExecutionStatus::Running],
            ExecutionStatus::Cancelled,
        )
    };
    let fire3 = &fires[3][0].trace_id;
    assert!(s.transition(fire3, &cancel).await.unwrap().applied());
    let c = covered(admit(4).await);
    assert_eq!(traces(&c), [traces(&fires[2]), traces(&fires[3])].concat());
    assert!(c.iter().all(|e| e.status == ExecutionStatus::Cancelled));

    // An operator's cancel of a running SKIP run: a fire beside it is skipped until the stop
    // is confirmed.
    let first = claimed(&s, "skip", at(0)).await;
    s.admit(&[guarded("skip", Skip, None, &first)], at(0))
        .await
        .unwrap();
    let cancel = Transition {
        finish_time: Some(at(1)),
        stopping: Some(at(1)),
        ..Transition::to(
            &[ExecutionStatus::Pending, ExecutionStatus::Running],
            ExecutionStatus::Cancelled,
        )
    };
    assert!(
        s.transition(&first[0].trace_id, &cancel)
            .await
            .unwrap()
            .applied()
    );
    let next = claimed(&s, "skip", at(1)).await;
    let admitted = s
        .admit(&[guarded("skip", Skip, None, &next)], at(1))
        .await
        .unwrap();
    assert!(
        matches!(&admitted[0], store::Admitted::Skipped { running, .. } if *running == traces(&first)),
        "{admitted:?}"
    );
    s.stops_confirmed(&traces(&first)).await.unwrap();
    let after = claimed(&s, "skip", at(2)).await;
    let admitted = s
        .admit(&[guarded("skip", Skip, None, &after)], at(2))
        .await
        .unwrap();
    assert!(
        matches!(&admitted[0], store::Admitted::Run { .. }),
        "{admitted:?}"
    );
}

/// A fire is withdrawn (claim and rows deleted, so its instant can be fired again) only while
/// every row is PENDING and held by its instance. A fire one of whose rows compensation took
/// over after its lease stands as recorded.
async fn a_fire_taken_over_by_compensation_is_not_withdrawn(backend: Backend) {
    let (_db, s) = open(backend).await;
    let t0 = Utc.with_ymd_and_hms(2024, 5, 1, 12, 0, 0).unwrap();
    let (kept, taken) = (
        claimed(&s, "j", t0).await,
        claimed(&s, "j", t0 + Duration::seconds(1)).await,
    );
    let me = "127.0.0.1:8080".to_string();
    let take = Transition {
        held_by: Some((me.clone(), taken[0].due_time)),
        hand_to: Some(("127.0.0.1:8081".into(), t0 + Duration::seconds(30))),
        ..Transition::to(&[ExecutionStatus::Pending], ExecutionStatus::Pending)
    };
    assert!(
        s.transition(&taken[0].trace_id, &take)
            .await
            .unwrap()
            .applied()
    );
    let withdrawal = |rows: &[Execution]| store::Withdrawal {
        instance: me.clone(),
        job: "j".into(),
        claimed: Some(rows[0].fire_time),
        traces: rows.iter().map(|r| r.trace_id.clone()).collect(),
    };
    let outcome = s
        .withdraw_fires(&[withdrawal(&kept), withdrawal(&taken)])
        .await
        .unwrap();
    assert_eq!(outcome, [true, false]);
    assert_eq!(s.get_execution(&kept[0].trace_id).await.unwrap(), None);
    assert!(s.get_execution(&taken[0].trace_id).await.unwrap().is_some());
    assert_eq!(
        s.last_fire_time("j").await.unwrap(),
        Some(t0 + Duration::seconds(1)),
        "the taken fire keeps its claim, the other one's is gone"
    );
}

/// A COVER fire's admission reads the job's open runs, then cancels them. A manual run taken
/// (PENDING → RUNNING, its call on the way) between that read and the cancel is covered as
/// a run that may have been called: stopping, to be waited for, never taken for an uncalled
/// PENDING row. On MariaDB the take holds the row while the admission reads; on SQLite the
/// single writer orders them, and the admission finds the run RUNNING.
async fn a_run_taken_while_a_cover_fire_is_admitted_is_waited_for(backend: Backend) {
    let (db, s) = open(backend).await;
    create(
        &s,
        serde_json::json!({"name": "cover", "serviceName": "s", "handler": "h",
            "cron": "* * * * * ?", "overlapPolicy": "COVER"}),
    )
    .await;
    let t0 = Utc.with_ymd_and_hms(2024, 5, 1, 11, 0, 0).unwrap();
    let manual = NewExecution {
        trigger_type: TriggerType::Manual,
        execution_id: "cover:MANUAL:m:0-9".into(),
        ..row("cover", t0, 0, 9)
    };
    let manual = match s.record_fire(None, &[manual]).await.unwrap() {
        FireOutcome::Recorded(mut rows) => rows.remove(0),
        other => unreachable!("{other:?}"),
    };
    let next = claimed(&s, "cover", t0 + Duration::seconds(1)).await;
    let take = Transition::started("127.0.0.1:9".into(), t0);
    let covered = match backend {
        Backend::MySql => {
            use sqlx::Connection;
            // The take, begun before the admission and committed while it waits.
            let mut conn = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
            let mut taker = conn.begin().await.unwrap();
            sqlx::query(
                "UPDATE job_execution SET status = 'RUNNING', start_time = ? WHERE trace_id = ?",
            )
            .bind(t0.naive_utc())
            .bind(&manual.trace_id)
            .execute(&mut *taker)
            .await
            .unwrap();
            let admission = {
                let (s, fire) = (s.clone(), guarded("cover", Cover, None, &next));
                tokio::spawn(async move { s.admit(&[fire], t0 + Duration::seconds(1)).await })
            };
            // Time for the admission to read the job's runs and meet the taken row's lock.
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            taker.commit().await.unwrap();
            admission.await.unwrap().unwrap().remove(0)
        }
        Backend::Sqlite => {
            assert!(
                s.transition(&manual.trace_id, &take)
                    .await
                    .unwrap()
                    .applied()
            );
            s.admit(
                &[guarded("cover", Cover, None, &next)],
                t0 + Duration::seconds(1),
            )
            .await
            .unwrap()
            .remove(0)
        }
    };
    use jobflow::jobs::OverlapPolicy::Cover;
    let store::Admitted::Run { covered, .. } = covered else {
        panic!("{covered:?}")
    };
    let found: Vec<_> = covered
        .iter()
        .map(|e| (e.trace_id.clone(), e.status))
        .collect();
    assert_eq!(found, [(manual.trace_id.clone(), ExecutionStatus::Running)]);
    let stopping: Vec<String> = s
        .stopping(10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.trace_id)
        .collect();
    assert_eq!(
        stopping,
        std::slice::from_ref(&manual.trace_id),
        "waited for until its stop is confirmed"
    );
    let now = s.get_execution(&manual.trace_id).await.unwrap().unwrap();
    assert_eq!(now.status, ExecutionStatus::Cancelled);
}

/// The API reads through a pool of its own: with the scheduling path's only connection stuck
/// behind a lock, the API's still reads. On MySQL the lock is a job's row, and the scheduling
/// store cannot read meanwhile; on SQLite it is the one write lock, which the API's read-only
/// connections do not wait for (WAL).
async fn the_api_pool_answers_while_the_scheduling_pool_waits(backend: Backend) {
    let db = TestDb::create(backend).await;
    let mut settings = base_settings(&db.url).database;
    settings.max_connections = 1u32.try_into().unwrap();
    let s = store::connect(&settings).await.unwrap();
    s.migrate().await.unwrap();
    let api = store::connect_beside(&settings, &s, 2).await.unwrap();
    create(
        &s,
        serde_json::json!({"name": "j", "serviceName": "s", "handler": "h", "cron": "0 * * * * ?", "overlapPolicy": "SKIP"}),
    )
    .await;
    use sqlx::Connection;
    // Another session holds what the fire below must write: the job's row on MySQL, SQLite's
    // one write lock.
    enum Other {
        MySql(sqlx::MySqlConnection),
        Sqlite(sqlx::SqliteConnection),
    }
    let other = match backend {
        Backend::MySql => {
            let mut other = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
            sqlx::query("BEGIN").execute(&mut other).await.unwrap();
            sqlx::query("SELECT * FROM job_definition WHERE name = 'j' FOR UPDATE")
                .execute(&mut other)
                .await
                .unwrap();
            Other::MySql(other)
        }
        Backend::Sqlite => {
            let mut other = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
            sqlx::query("BEGIN IMMEDIATE")
                .execute(&mut other)
                .await
                .unwrap();
            Other::Sqlite(other)
        }
    };
    // A guarded fire locks its job's row first: the scheduling pool's one connection waits.
    let now = Utc::now();
    let waiting = {
        let s = s.clone();
        let rows = vec![row("j", now, 0, 9)];
        tokio::spawn(async move {
            s.record_guarded(jobflow::jobs::OverlapPolicy::Skip, &rows, now)
                .await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "the guarded fire waits for the lock"
    );
    let read = api
        .get_job("j")
        .await
        .unwrap()
        .expect("the API reads the job");
    assert_eq!(read.name().as_str(), "j");
    match other {
        Other::MySql(mut other) => {
            assert!(
                s.get_job("j").await.is_err(),
                "the scheduling pool has no connection to give (acquire timeout)"
            );
            sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
        }
        Other::Sqlite(mut other) => {
            sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
        }
    }
    waiting.await.unwrap().unwrap();
}

/// Compensation dispatches the ranges of an abandoned fire one by one: a range of a COVER
/// job admitted alone runs beside its fire's other ranges, which are the same fire, not runs
/// it replaces (it neither cancels them nor waits for them).
async fn one_range_admitted_alone_is_not_judged_against_its_own_fire(backend: Backend) {
    use jobflow::jobs::OverlapPolicy::Cover;
    let (_db, s) = open(backend).await;
    let body = serde_json::json!({"name": "cover", "serviceName": "s", "handler": "h",
        "cron": "* * * * * ?", "overlapPolicy": "COVER", "shardCount": 10});
    create(&s, body).await;
    let at = Utc.with_ymd_and_hms(2024, 5, 1, 14, 0, 0).unwrap();
    let claim = FireClaim {
        fixed_delay: None,
        job_name: "cover".into(),
        fire_time: at,
        scheduler_instance: "127.0.0.1:8080".into(),
        claimed_at: at,
    };
    let ranges = [
        row("cover", at, 0, 2),
        row("cover", at, 3, 5),
        row("cover", at, 6, 9),
    ];
    let FireOutcome::Recorded(rows) = s.record_fire(Some(&claim), &ranges).await.unwrap() else {
        panic!("recorded once");
    };
    for (i, range) in rows.iter().enumerate() {
        let admitted = s
            .admit(
                &[guarded("cover", Cover, None, std::slice::from_ref(range))],
                at + Duration::seconds(12),
            )
            .await
            .unwrap();
        assert!(
            matches!(&admitted[0], store::Admitted::Run { covered, .. } if covered.is_empty()),
            "range {i}: {admitted:?}"
        );
    }
    for range in &rows {
        let stored = s.get_execution(&range.trace_id).await.unwrap().unwrap();
        assert_eq!(
            stored.status,
            ExecutionStatus::Pending,
            "{}",
            stored.execution_id
        );
    }
}

/// A fire is withdrawn when any change since it was planned was made at or before its
/// instant, even when a later change (here a disable after the instant) is what the job's
/// row shows when the fire is admitted (its instance could not read the database at the
/// instant, and admits it late).
async fn a_fire_is_judged_against_every_change_since_it_was_planned(backend: Backend) {
    use chrono::SubsecRound;
    let (_db, s) = open(backend).await;
    let body = serde_json::json!({"name": "edited", "serviceName": "s", "handler": "h",
        "cron": "* * * * * ?", "overlapPolicy": "SKIP"});
    let handed = create(&s, body.clone()).await;
    let instant = Utc::now().trunc_subsecs(0) + Duration::seconds(10);
    let fire = claimed(&s, "edited", instant).await;
    let mut edited = body;
    edited["jobParams"] = serde_json::json!({"v": 2});
    let req: JobRequest = serde_json::from_value(edited).unwrap();
    let edit = JobSpec::parse(
        req,
        None,
        None,
        TimeZoneName::parse("UTC").unwrap(),
        Utc::now(),
    )
    .unwrap();
    s.update_job(&edit, None, None, instant - Duration::seconds(1))
        .await
        .unwrap()
        .unwrap();
    s.set_job_enabled("edited", false, None, instant + Duration::seconds(1))
        .await
        .unwrap()
        .unwrap();
    let admitted = s
        .admit(
            &[guarded(
                "edited",
                jobflow::jobs::OverlapPolicy::Skip,
                Some(handed),
                &fire,
            )],
            instant + Duration::seconds(2),
        )
        .await
        .unwrap();
    assert_eq!(admitted, [store::Admitted::Withdrawn]);
    assert_eq!(s.get_execution(&fire[0].trace_id).await.unwrap(), None);
}

/// Two leaders advancing one backfill from the same cursor (the old one paused, the new one
/// taking over): one records the instants with the cursor, the other writes nothing; the
/// same backfill started again is answered as it is.
async fn a_backfill_records_each_instant_once_whoever_advances_it(backend: Backend) {
    use jobflow::jobs::backfill::{Backfill, BackfillStatus};
    let (_db, s) = open(backend).await;
    let at = Utc.with_ymd_and_hms(2024, 5, 1, 0, 0, 0).unwrap();
    let b = Backfill {
        job_name: "j".into(),
        backfill_id: "fix-1".into(),
        from: at,
        to: at + Duration::minutes(3),
        max_per_second: 2,
        fires: 3,
        done: 0,
        next: Some(at),
        status: BackfillStatus::Running,
        created_at: at,
        created_by: Some("otto".into()),
        updated_at: at,
    };
    let (stored, created) = s.start_backfill(&b).await.unwrap();
    assert!(created);
    assert_eq!(stored, b);
    let again = Backfill {
        to: at + Duration::hours(9),
        ..b.clone()
    };
    assert_eq!(s.start_backfill(&again).await.unwrap(), (b.clone(), false));
    let rows = |n: i64| -> Vec<NewExecution> {
        (0..n)
            .map(|m| NewExecution {
                trigger_type: TriggerType::Backfill,
                ..row("j", at + Duration::minutes(m), 0, 0)
            })
            .collect()
    };
    let (first, second) = (rows(2), rows(2));
    let next = Some(at + Duration::minutes(2));
    let (a, b2) = tokio::join!(
        s.record_backfill(&b, next, 2, &first, at),
        s.record_backfill(&b, next, 2, &second, at),
    );
    let (a, b2) = (a.unwrap(), b2.unwrap());
    assert!(
        a.is_some() != b2.is_some(),
        "exactly one records: {a:?} {b2:?}"
    );
    let now = s.get_backfill("j", "fix-1").await.unwrap().unwrap();
    assert_eq!(
        (now.done, now.next, now.status),
        (2, next, BackfillStatus::Running)
    );
    // The last instant ends it.
    let last = rows(3).split_off(2);
    assert!(
        s.record_backfill(&now, None, 1, &last, at)
            .await
            .unwrap()
            .is_some()
    );
    let done = s.get_backfill("j", "fix-1").await.unwrap().unwrap();
    assert_eq!(
        (done.done, done.next, done.status),
        (3, None, BackfillStatus::Done)
    );
    assert!(s.running_backfills().await.unwrap().is_empty());
    // Cancelling an ended backfill leaves it as it is.
    let still = s.cancel_backfill("j", "fix-1", at).await.unwrap().unwrap();
    assert_eq!(still.status, BackfillStatus::Done);
    assert_eq!(s.cancel_backfill("j", "none", at).await.unwrap(), None);
}

/// A fire that found no executor is recorded FAILED (never started) with its retry. Withdrawn
/// (its job edited before its instant), both rows and its claim go, so its instant is fired
/// again once, under the edit; a FAILED row that was called stands.
async fn a_fire_that_found_no_executor_is_withdrawn_whole(backend: Backend) {
    let (_db, s) = open(backend).await;
    let t0 = Utc.with_ymd_and_hms(2024, 5, 1, 13, 0, 0).unwrap();
    let me = "127.0.0.1:8080".to_string();
    let record = |at: chrono::DateTime<Utc>| {
        let failed = NewExecution {
            status: ExecutionStatus::Failed,
            error_message: Some("no executor instance available".into()),
            ..row("j", at, 0, 9)
        };
        let retry = NewExecution {
            execution_id: format!("{}#r1", failed.execution_id),
            trace_id: new_trace_id(),
            trigger_type: TriggerType::Retry,
            retry_count: 1,
            parent_trace_id: Some(failed.trace_id.clone()),
            ..row("j", at, 0, 9)
        };
        let claim = FireClaim {
            fixed_delay: None,
            job_name: "j".into(),
            fire_time: at,
            scheduler_instance: me.clone(),
            claimed_at: at,
        };
        (claim, vec![failed, retry])
    };
    let mut fires = Vec::new();
    for at in [t0, t0 + Duration::seconds(1)] {
        let (claim, rows) = record(at);
        match s.record_fire(Some(&claim), &rows).await.unwrap() {
            FireOutcome::Recorded(rows) => fires.push(rows),
            other => unreachable!("{other:?}"),
        }
    }
    // The second fire's FAILED row was called after all (a start): it stands.
    s.transition(
        &fires[1][0].trace_id,
        &Transition {
            start_time: Some(t0),
            ..Transition::to(&[ExecutionStatus::Failed], ExecutionStatus::Failed)
        },
    )
    .await
    .unwrap();
    let withdrawal = |rows: &[Execution]| store::Withdrawal {
        instance: me.clone(),
        job: "j".into(),
        claimed: Some(rows[0].fire_time),
        traces: rows.iter().map(|r| r.trace_id.clone()).collect(),
    };
    let outcome = s
        .withdraw_fires(&[withdrawal(&fires[0]), withdrawal(&fires[1])])
        .await
        .unwrap();
    assert_eq!(outcome, [true, false]);
    for r in &fires[0] {
        assert_eq!(s.get_execution(&r.trace_id).await.unwrap(), None);
    }
    assert_eq!(
        s.last_fire_time("j").await.unwrap(),
        Some(t0 + Duration::seconds(1))
    );
}

/// What a `FIXED_DELAY` job waits for: a fire with a range still open has not ended; once
/// every range (and retry) is final, its end is the latest finish; a recorded fire whose rows
/// are gone ended (when, nobody knows); a fire never recorded has not.
async fn a_fixed_delay_fire_is_recorded_only_its_interval_after_the_latest_fire_ended(
    backend: Backend,
) {
    let (_db, s) = open(backend).await;
    let at = Utc.with_ymd_and_hms(2024, 5, 1, 8, 0, 0).unwrap();
    let secs = |n| at + Duration::seconds(n);
    // Every claim of `delay` is a FIXED_DELAY fire with a 2 s interval, made by whichever
    // scheduler believes it owns the job.
    let fire = |job: &str, t, by: &str| FireRecord {
        claim: Some(FireClaim {
            fixed_delay: (job == "delay").then_some(2),
            job_name: job.into(),
            fire_time: t,
            scheduler_instance: by.into(),
            claimed_at: t,
        }),
        rows: vec![row(job, t, 0, 9)],
    };
    let outcome = |o: &FireOutcome| match o {
        FireOutcome::Recorded(rows) => format!("recorded {}", rows.len()),
        FireOutcome::AlreadyFired => "already fired".to_string(),
        FireOutcome::Behind(t) => format!("behind {}", (*t - at).num_seconds()),
    };
    let record = |fires: Vec<FireRecord>| {
        let s = s.clone();
        async move {
            let out = s.record_fires(&fires).await.unwrap();
            let kinds: Vec<String> = out.iter().map(outcome).collect();
            (kinds, out)
        }
    };
    // The job's first fire has nothing to wait for.
    let (kinds, first) = record(vec![fire("delay", at, "a:1")]).await;
    assert_eq!(kinds, ["recorded 1"]);
    let FireOutcome::Recorded(first) = &first[0] else {
        unreachable!()
    };
    // Another scheduler that missed it (it gained the job from an older reading) fires
    // while it is open: refused, naming the fire to wait for.
    assert_eq!(
        record(vec![fire("delay", secs(3), "b:1")]).await.0,
        ["behind 0"]
    );
    // Ended at +1.25 s: the next may come at +4 s (the end rounded up, plus 2 s), not before.
    // A fire's only row ends SUCCESS `ms` after the first instant.
    let end = |row: &Execution, ms: i64| {
        let (s, trace) = (s.clone(), row.trace_id.clone());
        let ended = Transition {
            finish_time: Some(at + Duration::milliseconds(ms)),
            ..Transition::to(
                &[ExecutionStatus::Pending, ExecutionStatus::Running],
                ExecutionStatus::Success,
            )
        };
        async move { assert!(s.transition(&trace, &ended).await.unwrap().applied()) }
    };
    end(&first[0], 1_250).await;
    assert_eq!(
        record(vec![fire("delay", secs(3), "b:1")]).await.0,
        ["behind 0"]
    );
    let (kinds, fourth) = record(vec![fire("delay", secs(4), "b:1")]).await;
    assert_eq!(kinds, ["recorded 1"]);
    let FireOutcome::Recorded(fourth) = &fourth[0] else {
        unreachable!()
    };
    // A scheduler still waiting on the first fire computes an earlier instant: refused, the
    // later fire named.
    assert_eq!(
        record(vec![fire("delay", secs(2), "a:1")]).await.0,
        ["behind 4"]
    );
    // In a batch, the refused fire holds back no other; the same instant again is a
    // duplicate, as for any fire, and the batch is redone fire by fire around it.
    assert_eq!(
        record(vec![
            fire("delay", secs(9), "a:1"),
            fire("other", secs(9), "a:1")
        ])
        .await
        .0,
        ["behind 4", "recorded 1"]
    );
    assert_eq!(
        record(vec![
            fire("other", secs(9), "b:1"),
            fire("delay", secs(9), "b:1"),
            fire("other", secs(10), "b:1"),
        ])
        .await
        .0,
        ["already fired", "behind 4", "recorded 1"]
    );
    // Several of the job's instants in one batch (owed back at once after the database was
    // cut): the fire at +4 ended at +5.5, so +8 may be recorded, and every later one of the
    // batch waits for it, not yet begun; the same instant twice is a duplicate. A batch
    // redone fire by fire (another fire of it was recorded elsewhere) judges alike.
    end(&fourth[0], 5_500).await;
    let (kinds, batch) = record(vec![
        fire("other", secs(11), "b:1"),
        fire("delay", secs(8), "b:1"),
        fire("delay", secs(9), "b:1"),
        fire("delay", secs(10), "b:1"),
    ])
    .await;
    assert_eq!(kinds, ["recorded 1", "recorded 1", "behind 8", "behind 8"]);
    let FireOutcome::Recorded(eighth) = &batch[1] else {
        unreachable!()
    };
    end(&eighth[0], 8_100).await;
    assert_eq!(
        record(vec![
            fire("other", secs(11), "a:1"),
            fire("delay", secs(11), "a:1"),
            fire("delay", secs(12), "a:1"),
        ])
        .await
        .0,
        ["already fired", "recorded 1", "behind 11"]
    );
}

async fn a_fire_ends_when_its_last_row_is_final_at_that_rows_finish(backend: Backend) {
    let (_db, s) = open(backend).await;
    let at = Utc.with_ymd_and_hms(2024, 5, 1, 8, 0, 0).unwrap();
    let claim = |t| FireClaim {
        fixed_delay: None,
        job_name: "delay".into(),
        fire_time: t,
        scheduler_instance: "127.0.0.1:8080".into(),
        claimed_at: t,
    };
    let FireOutcome::Recorded(ranges) = s
        .record_fire(
            Some(&claim(at)),
            &[row("delay", at, 0, 4), row("delay", at, 5, 9)],
        )
        .await
        .unwrap()
    else {
        unreachable!()
    };
    let fire = [("delay".to_string(), at)];
    assert_eq!(s.fire_ends(&fire).await.unwrap(), []);
    let finish = |secs| at + Duration::milliseconds(secs);
    let end = |status, ms| Transition {
        finish_time: Some(finish(ms)),
        ..Transition::to(
            &[ExecutionStatus::Pending, ExecutionStatus::Running],
            status,
        )
    };
    let first = end(ExecutionStatus::Failed, 4_250);
    assert!(
        s.transition(&ranges[1].trace_id, &first)
            .await
            .unwrap()
            .applied()
    );
    assert_eq!(
        s.fire_ends(&fire).await.unwrap(),
        [],
        "one range still open"
    );
    let second = end(ExecutionStatus::Success, 2_125);
    assert!(
        s.transition(&ranges[0].trace_id, &second)
            .await
            .unwrap()
            .applied()
    );
    let ended = store::FireEnd {
        job: "delay".into(),
        fire_time: at,
        end: Some(finish(4_250)),
    };
    assert_eq!(
        s.fire_ends(&fire).await.unwrap(),
        std::slice::from_ref(&ended)
    );
    // A recorded fire without rows, and one never recorded, asked with it.
    let later = at + Duration::seconds(30);
    let never = at + Duration::seconds(60);
    assert!(matches!(
        s.record_fire(Some(&claim(later)), &[]).await.unwrap(),
        FireOutcome::Recorded(_)
    ));
    let asked = [
        ("delay".to_string(), at),
        ("delay".to_string(), later),
        ("delay".to_string(), never),
    ];
    assert_eq!(
        s.fire_ends(&asked).await.unwrap(),
        [
            ended,
            store::FireEnd {
                job: "delay".into(),
                fire_time: later,
                end: None,
            }
        ]
    );
}

/// Seed 30 of the 50-seed run on 6d62829: an operator cancelled one range of a claimed fire
/// before its call (its instance then forgets the row), the job was edited before the
/// instant, and the withdrawal took back only the rows the instance still held; the fire was
/// recorded again under the new shard count beside the cancelled range, overlapping it. The
/// withdrawal takes every row of the instant, the cancelled one too, and the instant is
/// recorded again cleanly.
async fn a_fire_with_a_range_cancelled_before_its_call_is_withdrawn_whole(backend: Backend) {
    let (_db, s) = open(backend).await;
    let at = Utc.with_ymd_and_hms(2024, 5, 1, 14, 0, 0).unwrap();
    let me = "127.0.0.1:8080".to_string();
    let claim = FireClaim {
        fixed_delay: None,
        job_name: "j".into(),
        fire_time: at,
        scheduler_instance: me.clone(),
        claimed_at: at - Duration::seconds(1),
    };
    let FireOutcome::Recorded(rows) = s
        .record_fire(Some(&claim), &[row("j", at, 0, 4), row("j", at, 5, 9)])
        .await
        .unwrap()
    else {
        unreachable!()
    };
    let cancel = Transition {
        finish_time: Some(at - Duration::milliseconds(500)),
        stopping: Some(at - Duration::milliseconds(500)),
        ..Transition::to(
            &[ExecutionStatus::Pending, ExecutionStatus::Running],
            ExecutionStatus::Cancelled,
        )
    };
    assert!(
        s.transition(&rows[1].trace_id, &cancel)
            .await
            .unwrap()
            .applied()
    );
    let withdrawal = store::Withdrawal {
        instance: me.clone(),
        job: "j".into(),
        claimed: Some(at),
        traces: vec![rows[0].trace_id.clone()],
    };
    assert_eq!(s.withdraw_fires(&[withdrawal]).await.unwrap(), [true]);
    for r in &rows {
        assert_eq!(s.get_execution(&r.trace_id).await.unwrap(), None, "{r:?}");
    }
    // Recorded again under three ranges: nothing of the old plan is left beside them.
    let again = [row("j", at, 0, 3), row("j", at, 4, 6), row("j", at, 7, 9)];
    assert!(matches!(
        s.record_fire(Some(&claim), &again).await.unwrap(),
        FireOutcome::Recorded(r) if r.len() == 3
    ));
    let ended = s.fire_ends(&[("j".to_string(), at)]).await.unwrap();
    assert_eq!(
        ended,
        [],
        "the fire recorded again is open, all three ranges of it"
    );
}

/// A job's row is locked by changing it: on a Galera cluster only the rows a transaction
/// changes are certified across nodes, so two transactions that lock one job through two
/// nodes conflict and the later runs again, instead of both committing what each judged
/// without the other (the campaign on Galera: a fire's two ranges settled through two nodes
/// each saw the other RUNNING, and the fire's children were never triggered). Settling a run
/// under its job's lock and admitting a guarded fire each change the row once; settling
/// without the lock leaves it.
async fn a_jobs_lock_is_a_write_to_its_row(backend: Backend) {
    let (db, s) = open(backend).await;
    create(&s, every_second("parent", "ALLOW")).await;
    create(&s, every_second("skip", "SKIP")).await;
    let seq = |job: &str| {
        let db = &db;
        let sql = format!("SELECT lock_seq FROM job_definition WHERE name = '{job}'");
        async move { db.fetch_i64(&sql).await }
    };
    assert_eq!((seq("parent").await, seq("skip").await), (0, 0));
    let fire = Utc.with_ymd_and_hms(2024, 5, 1, 8, 0, 0).unwrap();
    let ranges = parent_fire(&s, fire).await;
    let locked = Transition {
        lock_job: Some("parent".into()),
        ..success()
    };
    s.transition(&ranges[0].trace_id, &locked).await.unwrap();
    assert_eq!(seq("parent").await, 1, "a settle under the job's lock");
    s.transitions(&[(ranges[1].trace_id.clone(), success())])
        .await
        .unwrap();
    assert_eq!(seq("parent").await, 1, "a settle without it");
    let first = claimed(&s, "skip", fire).await;
    let admitted = s
        .admit(
            &[guarded(
                "skip",
                jobflow::jobs::OverlapPolicy::Skip,
                None,
                &first,
            )],
            fire,
        )
        .await
        .unwrap();
    assert!(
        matches!(&admitted[0], store::Admitted::Run { .. }),
        "{admitted:?}"
    );
    assert_eq!(seq("skip").await, 1, "an admission");
}

/// MySQL rolls a whole transaction back when it deadlocks with another (on Galera, also when a
/// node refuses it at commit for another node's write): the batch of fires is run again and
/// recorded, not left to the misfire path. Here another transaction holds `b`'s claim while
/// the batch holds `a`'s, then asks for `a`'s: InnoDB picks the batch as the victim (it has
/// written less).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_batch_rolled_back_for_a_deadlock_is_run_again() {
    use sqlx::Executor;
    let (db, s) = open(Backend::MySql).await;
    let fire = Utc.with_ymd_and_hms(2024, 5, 1, 4, 0, 0).unwrap();
    let claim = |job: &str| FireClaim {
        fixed_delay: None,
        claimed_at: Utc::now(),
        job_name: job.into(),
        fire_time: fire,
        scheduler_instance: "me:1".into(),
    };
    let batch = vec![
        (claim("a"), vec![row("a", fire, 0, 9)]),
        (claim("b"), vec![row("b", fire, 0, 9)]),
    ];
    let mut other = heavy_transaction(&db.url).await;
    let insert = |job: &str| {
        format!(
            "INSERT INTO job_fire (job_name, fire_time, scheduler_instance, created_at) \
             VALUES ('{job}', '2024-05-01 04:00:00', 'other:1', NOW(3))"
        )
    };
    other
        .execute(sqlx::AssertSqlSafe(insert("b")))
        .await
        .unwrap();
    let recording = tokio::spawn({
        let s = s.clone();
        let fires = records(&batch);
        async move { s.record_fires(&fires).await }
    });
    // The batch holds `a` and waits for `b`.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    other
        .execute(sqlx::AssertSqlSafe(insert("a")))
        .await
        .expect("the batch, not this transaction, is the deadlock's victim");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    other.execute("ROLLBACK").await.unwrap();
    let outcomes = recording
        .await
        .unwrap()
        .expect("recorded on its next attempt");
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, FireOutcome::Recorded(rows) if rows.len() == 1)),
        "{outcomes:?}"
    );
}

/// A batch of results locks its own rows and no others, however young the table: with 256
/// changes among 1,000 rows, MariaDB would rather scan the table than look each trace up, and
/// a locking scan waits for every row it passes. Here another session holds one row outside
/// the batch; the batch must not wait for it (before its lookups were forced through the
/// unique index, it waited out `innodb_lock_wait_timeout`, 50 s, and failed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_batch_of_results_locks_only_its_own_rows_on_a_young_table() {
    let (db, s, rows, other) = young_table_holding(&[999]).await;
    let batch = all_started(&rows[..256]);
    let applied = written_beside(&s, &batch, other).await;
    assert_eq!(applied, vec![Applied::yes(); 256]);
    assert_eq!(running_rows(&db).await, 256);
}

/// A batch of results rolled back for a deadlock is run again at once by the store, and both
/// its changes apply: here the batch holds the lower trace and waits for the higher, which
/// another transaction holds while it asks for the lower. InnoDB rolls the batch back (it
/// has written less); before, the store answered the deadlock, and the settle writer waited
/// its backoff (100 ms, doubling) with the results behind the batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_batch_of_results_rolled_back_for_a_deadlock_is_run_again() {
    use sqlx::Executor;
    let (db, s) = open(Backend::MySql).await;
    let fire = Utc.with_ymd_and_hms(2024, 5, 1, 6, 0, 0).unwrap();
    let mut rows = vec![row("a", fire, 0, 0), row("b", fire, 0, 0)];
    rows.sort_by(|x, y| x.trace_id.cmp(&y.trace_id));
    s.record_fire(None, &rows).await.unwrap();
    let (low, high) = (rows[0].trace_id.clone(), rows[1].trace_id.clone());
    let mut other = heavy_transaction(&db.url).await;
    other.execute(lock_execution(&high)).await.unwrap();
    let batch: Vec<(String, Transition)> =
        vec![(low.clone(), success()), (high.clone(), success())];
    let settling = tokio::spawn({
        let s = s.clone();
        async move { s.transitions(&batch).await }
    });
    // The batch holds `low` and waits for `high`.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    other
        .execute(lock_execution(&low))
        .await
        .expect("the batch, not this transaction, is the deadlock's victim");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    other.execute("ROLLBACK").await.unwrap();
    let applied = settling
        .await
        .unwrap()
        .expect("written on its next attempt, not answered with the deadlock");
    assert_eq!(applied, vec![Applied::yes(), Applied::yes()]);
    assert_eq!(
        db.fetch_i64("SELECT COUNT(*) FROM job_execution WHERE status = 'SUCCESS'")
            .await,
        2
    );
}

/// Another MySQL session, in a transaction that has written 200 fire claims: the heavier
/// side of a deadlock, as InnoDB rolls back the transaction that wrote less.
async fn heavy_transaction(url: &str) -> sqlx::MySqlConnection {
    use sqlx::{Connection, Executor};
    let mut other = sqlx::MySqlConnection::connect(url).await.unwrap();
    other.execute("BEGIN").await.unwrap();
    for i in 0..200 {
        other
            .execute(sqlx::AssertSqlSafe(format!(
                "INSERT INTO job_fire (job_name, fire_time, scheduler_instance, created_at) \
                 VALUES ('heavy-{i}', '2024-05-01 00:00:00', 'other:1', NOW(3))"
            )))
            .await
            .unwrap();
    }
    other
}

/// A batch of results set by primary key is written for one of a few batch sizes
/// (src/store/executions.rs, `statement_rows`): 250 results are a statement for 256 rows,
/// whose six missing ids are negative. They name no row, and the batch waits for no row but
/// its own: here another session holds the row of the lowest id (next to where those ids
/// would be) and the row of the highest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_batch_of_results_by_row_id_locks_only_its_own_rows() {
    let (db, s, rows, other) = young_table_holding(&[0, 999]).await;
    let batch = named(&s, &all_started(&rows[1..251]), true).await;
    let applied = written_beside(&s, &batch, other).await;
    assert_eq!(applied, vec![Applied::yes(); 250]);
    assert_eq!(running_rows(&db).await, 250);
    let first = s.get_execution(&rows[0].trace_id).await.unwrap().unwrap();
    assert_eq!(first.status, ExecutionStatus::Pending);
}

/// Writes `batch` while `other` holds rows outside it, then lets `other` go: the batch must
/// not wait for those rows (it fails after 30 s if it does).
async fn written_beside(
    s: &std::sync::Arc<dyn store::Store>,
    batch: &[(String, Transition)],
    mut other: sqlx::MySqlConnection,
) -> Vec<Applied> {
    use sqlx::Executor;
    let applied = tokio::time::timeout(std::time::Duration::from_secs(30), s.transitions(batch))
        .await
        .expect("the batch waited for a row it does not change")
        .unwrap();
    other.execute("ROLLBACK").await.unwrap();
    applied
}

async fn running_rows(db: &TestDb) -> i64 {
    db.fetch_i64("SELECT COUNT(*) FROM job_execution WHERE status = 'RUNNING'")
        .await
}

/// A change of each of `rows` to RUNNING, called now.
fn all_started(rows: &[NewExecution]) -> Vec<(String, Transition)> {
    let at = Utc::now();
    rows.iter()
        .map(|r| {
            let started = Transition::started("127.0.0.1:9000".into(), at);
            (r.trace_id.clone(), started)
        })
        .collect()
}

/// 1,000 PENDING rows just written (a young table, its statistics read), and another session
/// holding the rows at `held` until it rolls back.
async fn young_table_holding(
    held: &[usize],
) -> (
    TestDb,
    std::sync::Arc<dyn store::Store>,
    Vec<NewExecution>,
    sqlx::MySqlConnection,
) {
    use sqlx::{Connection, Executor};
    let (db, s) = open(Backend::MySql).await;
    let fire = Utc.with_ymd_and_hms(2024, 5, 1, 5, 0, 0).unwrap();
    let rows: Vec<NewExecution> = (0..1000)
        .map(|i| row(&format!("job-{i}"), fire, 0, 0))
        .collect();
    s.record_fire(None, &rows).await.unwrap();
    let mut other = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    other.execute("ANALYZE TABLE job_execution").await.unwrap();
    other.execute("BEGIN").await.unwrap();
    for &i in held {
        other
            .execute(lock_execution(&rows[i].trace_id))
            .await
            .unwrap();
    }
    (db, s, rows, other)
}

/// Locks one execution row until the session's transaction ends.
fn lock_execution(trace: &str) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(format!(
        "SELECT id FROM job_execution WHERE trace_id = '{trace}' FOR UPDATE"
    ))
}

/// A release from before the cancel counter had a row of its own kept the count on the job
/// revision's row; the upgrade carries it over, so a launcher that read it before the upgrade
/// sees it unmoved after.
async fn the_cancel_count_is_kept_across_the_upgrade_that_gave_it_its_own_row(backend: Backend) {
    let db = TestDb::create(backend).await;
    migrate_until(&db, backend, 20261205000001).await;
    let bump = "UPDATE job_revision SET revision = 12, cancels = 7 WHERE id = 1";
    db.execute(bump).await;
    let s = store::connect(&base_settings(&db.url).database)
        .await
        .unwrap();
    s.migrate().await.unwrap();
    let counters = s.instant_counters().await.unwrap();
    assert_eq!((counters.job_revision, counters.cancels), (12, 7));
}

/// A job write takes the job revision first and holds its row until it commits; a scheduler
/// paused in the middle of one (the fault campaign's seed 7: SIGSTOP 5 ms after an edit was
/// sent) held it for 18 s. Cancels, which every COVER admission makes, must not wait for it.
/// MariaDB only: SQLite has one writer at a time by design.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_write_held_open_holds_back_no_cancel() {
    use sqlx::Connection;
    let (db, s) = open(Backend::MySql).await;
    let at = Utc.with_ymd_and_hms(2024, 5, 1, 8, 0, 0).unwrap();
    let run = row("j", at, 0, 9);
    s.record_fire(None, std::slice::from_ref(&run))
        .await
        .unwrap();
    let before = s.instant_counters().await.unwrap();
    // A job write's first statement, its transaction left open.
    let mut writer = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let mut stalled = writer.begin().await.unwrap();
    sqlx::query("UPDATE job_revision SET revision = revision + 1 WHERE id = 1")
        .execute(&mut *stalled)
        .await
        .unwrap();
    let cancel = Transition {
        finish_time: Some(at),
        stopping: Some(at),
        ..Transition::to(
            &[ExecutionStatus::Pending, ExecutionStatus::Running],
            ExecutionStatus::Cancelled,
        )
    };
    // Far below the server's lock wait (50 s): a cancel queued behind the write never
    // comes back within it.
    let cancelled = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        s.transition(&run.trace_id, &cancel),
    )
    .await
    .expect("the cancel waited for the job write");
    assert!(cancelled.unwrap().applied());
    let after = s.instant_counters().await.unwrap();
    assert_eq!(after.cancels, before.cancels + 1);
    assert_eq!(
        after.job_revision, before.job_revision,
        "the write is not committed"
    );
    stalled.rollback().await.unwrap();
}
