//! Steps that more than one part of the store takes inside its own transactions: locking
//! jobs' rows (admission, settling, manual triggers), recording runs as stopping (admission's
//! covers, cancels) and taking back a recorded fire (withdrawal, admission).

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::executions::push_fire_range;
use super::sql::{Row, Sql, Tx};
use super::{MULTI_ROW, StoreError, Withdrawal};
use crate::jobs::{ExecutionStatus, JobChange, scheduled_fire_key};

/// Locks the rows of `jobs`: guarded fires and the settling of guarded jobs' runs wait for
/// each other here. A write, so SQLite takes its write lock with the first statement; one
/// statement, so InnoDB takes the row locks in index order whatever the order of `jobs`.
///
/// A write that changes the row (`lock_seq`), so that the lock holds across the nodes of a
/// Galera cluster too. Row locks there are local to a node; only the rows a transaction
/// changes are certified at its commit. Two transactions that locked the same job on two
/// nodes (instances writing to different nodes, or one instance's pool holding connections
/// to two nodes after its proxy failed back) then conflict, and the later one is rolled back
/// and runs again, reading what the first wrote. A lock that wrote nothing (`SET name =
/// name`) let both commit, each having judged the other's rows as they were before: the two
/// ranges of a fire finishing together each saw the other still RUNNING, and the fire's
/// children were never triggered.
pub(super) async fn lock_job_rows(tx: &mut Tx, jobs: &[&str]) -> Result<(), StoreError> {
    if jobs.is_empty() {
        return Ok(());
    }
    let mut lock = Sql::new(&format!(
        "UPDATE {} SET lock_seq = lock_seq + 1 WHERE name IN ",
        tx.backend().jobs_by_name()
    ));
    lock.list(jobs.iter().copied());
    tx.execute(lock).await?;
    Ok(())
}

/// A job's row as a guarded fire is decided against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StoredJob {
    pub revision: i64,
    pub enabled: bool,
    pub updated_at: DateTime<Utc>,
}

/// Locks the rows of `jobs` and reads their revision, whether they are enabled and when they
/// were last written.
pub(super) async fn lock_jobs(
    tx: &mut Tx,
    jobs: &[&str],
) -> Result<HashMap<String, StoredJob>, StoreError> {
    // The lock is a write on both backends (see `lock_job_rows`); the read is a locking read
    // on MySQL, so it sees the latest committed row whatever the transaction read before.
    let backend = tx.backend();
    lock_job_rows(tx, jobs).await?;
    let mut read = Sql::new(&format!(
        "SELECT name, revision, enabled, updated_at FROM {} WHERE name IN ",
        backend.jobs_by_name()
    ));
    read.list(jobs.iter().copied()).push(backend.lock_rows());
    let mut current = HashMap::new();
    for row in tx.fetch_all(read).await? {
        let job = StoredJob {
            revision: row.at(1)?,
            enabled: row.at(2)?,
            updated_at: row.at(3)?,
        };
        current.insert(row.at(0)?, job);
    }
    Ok(current)
}

/// The writes and deletions of `jobs` still in the change log, each with its revision and
/// time.
pub(super) async fn changes_of(tx: &mut Tx, jobs: &[&str]) -> Result<Vec<JobChange>, StoreError> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = Sql::new("SELECT name, revision, deleted_at FROM job_tombstone WHERE name IN ");
    q.list(jobs.iter().copied());
    let mut changes = read_changes(tx, q).await?;
    let mut q = Sql::new("SELECT name, revision, changed_at FROM job_history WHERE name IN ");
    q.list(jobs.iter().copied());
    changes.extend(read_changes(tx, q).await?);
    Ok(changes)
}

/// The changes `q` selects as (name, revision, time).
pub(super) async fn read_changes(tx: &mut Tx, q: Sql) -> Result<Vec<JobChange>, StoreError> {
    tx.fetch_all(q).await?.iter().map(job_change).collect()
}

/// A change read as (name, revision, time).
fn job_change(r: &Row) -> Result<JobChange, StoreError> {
    Ok(JobChange {
        name: r.at(0)?,
        revision: r.at(1)?,
        at: r.at(2)?,
    })
}

/// Records the runs `traces` as stopping since `at` (see [`Stopping`]).
pub(super) async fn record_stopping(
    tx: &mut Tx,
    traces: &[&str],
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    for chunk in traces.chunks(MULTI_ROW) {
        let mut q = Sql::new(tx.backend().insert_ignore());
        q.push("execution_stop (trace_id, job_name, requested_at) SELECT trace_id, job_name, ")
            .bind(at)
            .push(" FROM ")
            .push(tx.backend().executions_by_trace())
            .push(" WHERE trace_id IN ")
            .list(chunk.iter().copied());
        tx.execute(q).await?;
    }
    Ok(())
}

/// Counts `n` cancels in the counter that launchers read at their instant: a row claimed
/// ahead and cancelled meanwhile (by an operator, or covered) is then read again before its
/// call, and not called.
pub(super) async fn count_cancels(tx: &mut Tx, n: usize) -> Result<(), StoreError> {
    if n > 0 {
        let mut q = Sql::new("UPDATE cancel_counter SET cancels = cancels + ");
        q.bind(n as i64).push(" WHERE id = 1");
        tx.execute(q).await?;
    }
    Ok(())
}

/// Takes back one recorded fire: its rows and its claim are deleted, so its instant can be
/// fired again, but only while every row that is left is held by the fire's instance and
/// still as recorded or ended before its call: PENDING, FAILED without a start (recorded so,
/// the fire having found no executor, with its retry), or CANCELLED without a start (an
/// operator's cancel before the call). A cron fire's rows are all those of its instant, not
/// only the ones its instance still holds in memory (a cancel before the call forgets its row
/// there): a range left behind would overlap the ranges of the fire recorded again. Once
/// one row was taken over (compensation resumed it after its lease) or called, the fire
/// stands as recorded and nothing is deleted: `false`.
pub(super) async fn withdraw_in(tx: &mut Tx, w: &Withdrawal) -> Result<bool, StoreError> {
    let lock = tx.backend().lock_rows();
    let mut reads = Vec::new();
    for chunk in w.traces.chunks(MULTI_ROW) {
        let mut q = Sql::new(&format!(
            "SELECT trace_id, status, scheduler_instance, start_time FROM {} WHERE trace_id IN ",
            tx.backend().executions_by_trace()
        ));
        q.list(chunk.iter()).push(lock);
        reads.push(q);
    }
    if let Some(at) = w.claimed {
        let key = scheduled_fire_key(&w.job, at);
        let mut q = Sql::new(
            "SELECT trace_id, status, scheduler_instance, start_time FROM job_execution WHERE ",
        );
        push_fire_range(&mut q, &key);
        q.push(lock);
        reads.push(q);
    }
    let mut traces: Vec<String> = Vec::with_capacity(w.traces.len());
    for q in reads {
        for row in tx.fetch_all(q).await? {
            let (trace, status, holder): (String, String, Option<String>) =
                (row.at(0)?, row.at(1)?, row.at(2)?);
            let started: Option<DateTime<Utc>> = row.at(3)?;
            let ended_uncalled = [ExecutionStatus::Failed, ExecutionStatus::Cancelled]
                .iter()
                .any(|s| status == s.as_str())
                && started.is_none();
            let as_recorded = status == ExecutionStatus::Pending.as_str() || ended_uncalled;
            if !as_recorded || holder.as_deref() != Some(&w.instance) {
                return Ok(false);
            }
            if !traces.contains(&trace) {
                traces.push(trace);
            }
        }
    }
    let deletes = [
        tx.backend().delete_executions_by_trace(),
        "DELETE FROM execution_stop",
    ];
    for chunk in traces.chunks(MULTI_ROW) {
        for delete in deletes {
            let mut q = Sql::new(&format!("{delete} WHERE trace_id IN "));
            q.list(chunk.iter());
            tx.execute(q).await?;
        }
    }
    if let Some(at) = w.claimed {
        let mut q = Sql::new("DELETE FROM job_fire WHERE job_name = ");
        q.bind(&w.job)
            .push(" AND fire_time = ")
            .bind(at)
            .push(" AND scheduler_instance = ")
            .bind(&w.instance);
        tx.execute(q).await?;
    }
    Ok(true)
}
