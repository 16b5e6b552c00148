//! [`ExecutionStore`] over SQL: execution rows, the compare-and-set transitions every state
//! change goes through (one at a time, or group-committed), and the pages compensation sweeps.

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::columns::{execution, new_execution_columns};
use super::conflict;
use super::sql::{Arg, Backend, Db, Row, Sql, Tx};
use super::steps::{count_cancels, lock_job_rows, record_stopping};
use super::transition::chained_moves;
use super::{
    ACTIVITY_DELAY_SAMPLE, Activity, Applied, ChildTrigger, Cursor, ExecutionFilter,
    ExecutionStore, Listing, MULTI_ROW, PageRequest, SqlStore, Stopping, StoreError, Swept,
    Transition, Unreadable, fold_moves,
};
use crate::jobs::{Execution, ExecutionStatus, NewExecution, choose, fire_key, first_attempt_id};

#[async_trait]
impl ExecutionStore for SqlStore {
    async fn get_execution(&self, trace_id: &str) -> Result<Option<Execution>, StoreError> {
        let mut q = Sql::new("SELECT * FROM job_execution WHERE trace_id = ");
        q.bind(trace_id);
        self.db
            .fetch_optional(q)
            .await?
            .as_ref()
            .map(execution)
            .transpose()
    }

    async fn list_executions(
        &self,
        job: &str,
        status: Option<ExecutionStatus>,
        page: PageRequest,
    ) -> Result<Listing<Execution>, StoreError> {
        let filter = |q: &mut Sql| {
            q.bind(job);
            if let Some(s) = status {
                q.push(" AND status = ").bind(s.as_str());
            }
        };
        let mut count = Sql::new("SELECT COUNT(*) FROM job_execution WHERE job_name = ");
        filter(&mut count);
        let total: i64 = self.db.fetch_all(count).await?[0].at(0)?;
        let mut q = Sql::new("SELECT * FROM job_execution WHERE job_name = ");
        filter(&mut q);
        q.push(" ORDER BY trigger_time DESC, id DESC LIMIT ")
            .bind(page.size as i64)
            .push(" OFFSET ")
            .bind(page.offset());
        Ok(Listing {
            items: executions(&self.db.fetch_all(q).await?)?,
            total,
            capped: false,
        })
    }

    async fn running_per_executor(&self) -> Result<HashMap<String, i64>, StoreError> {
        // Along the status index: RUNNING rows are the calls in flight, few at any time.
        let q = Sql::new(
            "SELECT executor_instance, COUNT(*) FROM job_execution \
             WHERE status = 'RUNNING' AND executor_instance IS NOT NULL GROUP BY executor_instance",
        );
        self.db
            .fetch_all(q)
            .await?
            .iter()
            .map(|r| Ok((r.at(0)?, r.at(1)?)))
            .collect()
    }

    async fn latest_executions(&self, jobs: &[&str]) -> Result<Vec<Execution>, StoreError> {
        // One statement: per job, the last entry of its (job_name, trigger_time) index.
        let mut latest = Vec::with_capacity(jobs.len());
        for chunk in jobs.chunks(MULTI_ROW) {
            let mut q = Sql::new("");
            for (i, job) in chunk.iter().enumerate() {
                if i > 0 {
                    q.push(" UNION ALL ");
                }
                q.push("SELECT * FROM (SELECT * FROM job_execution WHERE job_name = ")
                    .bind(*job)
                    .push(&format!(
                        " ORDER BY trigger_time DESC, id DESC LIMIT 1) latest{i}"
                    ));
            }
            latest.extend(executions(&self.db.fetch_all(q).await?)?);
        }
        Ok(latest)
    }

    async fn search_executions(
        &self,
        filter: &ExecutionFilter,
        page: PageRequest,
        count_cap: i64,
    ) -> Result<Listing<Execution>, StoreError> {
        // Counting stops at the cap: an exact count of tens of millions of rows would scan
        // them all on every page.
        let mut count = Sql::new("SELECT COUNT(*) FROM (SELECT 1 AS one FROM job_execution");
        push_execution_filter(&mut count, filter);
        count.push(" LIMIT ").bind(count_cap + 1).push(") counted");
        let counted: i64 = self.db.fetch_all(count).await?[0].at(0)?;
        let mut q = Sql::new("SELECT * FROM job_execution");
        push_execution_filter(&mut q, filter);
        q.push(" ORDER BY trigger_time DESC, id DESC LIMIT ")
            .bind(page.size as i64)
            .push(" OFFSET ")
            .bind(page.offset());
        Ok(Listing {
            items: executions(&self.db.fetch_all(q).await?)?,
            total: counted.min(count_cap),
            capped: counted > count_cap,
        })
    }

    async fn transition(&self, trace_id: &str, t: &Transition) -> Result<Applied, StoreError> {
        conflict::retrying(|| transition_once(&self.db, trace_id, t)).await
    }

    async fn transitions(
        &self,
        batch: &[(String, Transition)],
    ) -> Result<Vec<Applied>, StoreError> {
        // A batch the database rolled back for a conflict (a deadlock with another batch, a
        // Galera certification failure) is run again at once, reading afresh: the settle
        // writer's own backoff, which doubles up to seconds, is for a database that answers
        // nothing, and the results behind a deadlocked batch would wait it out.
        conflict::retrying(|| transitions_once(&self.db, batch)).await
    }

    async fn pending_before(
        &self,
        due_before: DateTime<Utc>,
        after: Cursor,
        limit: u32,
    ) -> Result<Vec<Swept>, StoreError> {
        // Along (status, trigger_time), InnoDB appending the id; the due time is filtered on
        // the way. A row is written at or before its due time and its due time only moves
        // later, so a row due before the bound was triggered before it too.
        let mut q =
            Sql::new("SELECT * FROM job_execution WHERE status = 'PENDING' AND trigger_time < ");
        q.bind(due_before).push(" AND due_time < ").bind(due_before);
        self.sweep(q, "trigger_time", after, limit).await
    }

    async fn running_before(
        &self,
        started_before: DateTime<Utc>,
        after: Cursor,
        limit: u32,
    ) -> Result<Vec<Swept>, StoreError> {
        // Along (status, trigger_time); the start is filtered on the way. A RUNNING row always
        // has a start; one written without (an older version) counts from its due time.
        let mut q =
            Sql::new("SELECT * FROM job_execution WHERE status = 'RUNNING' AND (start_time < ");
        q.bind(started_before)
            .push(" OR (start_time IS NULL AND due_time < ")
            .bind(started_before)
            .push("))");
        self.sweep(q, "trigger_time", after, limit).await
    }

    async fn fire_executions(&self, job: &str, fire: &str) -> Result<Vec<Execution>, StoreError> {
        let mut q = Sql::new("");
        push_fire_rows(&mut q, fire);
        let rows = executions(&self.db.fetch_all(q).await?)?;
        Ok(rows
            .into_iter()
            .filter(|e| e.job_name == job && fire_key(&e.execution_id) == fire)
            .collect())
    }

    async fn activity_since(&self, since: DateTime<Utc>) -> Result<Activity, StoreError> {
        // Every status is listed so the (status, trigger_time) index serves a range per
        // status instead of a scan of the whole table.
        let statuses = ExecutionStatus::ALL.map(|s| s.as_str());
        let mut q = Sql::new("SELECT status, COUNT(*) FROM job_execution WHERE status IN ");
        q.list(statuses)
            .push(" AND trigger_time >= ")
            .bind(since)
            .push(" GROUP BY status");
        let mut by_status = Vec::new();
        for row in self.db.fetch_all(q).await? {
            let status: String = row.at(0)?;
            let status = choose(&status)
                .map_err(|m| StoreError::Corrupt(format!("job_execution.status: {m}")))?;
            by_status.push((status, row.at(1)?));
        }
        let mut q = Sql::new(
            "SELECT COUNT(*) FROM (SELECT DISTINCT job_name, fire_time FROM job_execution WHERE status IN ",
        );
        q.list(statuses)
            .push(" AND trigger_time >= ")
            .bind(since)
            .push(" AND retry_count = 0) fires");
        let fires: i64 = self.db.fetch_all(q).await?[0].at(0)?;
        let mut q = Sql::new("SELECT fire_time, start_time FROM job_execution WHERE status IN ");
        q.list(statuses)
            .push(" AND trigger_time >= ")
            .bind(since)
            .push(
                " AND trigger_type = 'CRON' AND retry_count = 0 AND start_time IS NOT NULL \
                 ORDER BY trigger_time DESC, id DESC LIMIT ",
            )
            .bind(ACTIVITY_DELAY_SAMPLE);
        let cron_starts = self
            .db
            .fetch_all(q)
            .await?
            .iter()
            .map(|r| Ok((r.at(0)?, r.at(1)?)))
            .collect::<Result<_, StoreError>>()?;
        Ok(Activity {
            fires,
            by_status,
            cron_starts,
        })
    }

    async fn stopping(&self, limit: u32) -> Result<Vec<Stopping>, StoreError> {
        let mut q = Sql::new(
            "SELECT s.trace_id AS stop_trace, s.job_name AS stop_job, s.requested_at, e.* \
             FROM execution_stop s LEFT JOIN job_execution e ON e.trace_id = s.trace_id \
             ORDER BY s.requested_at LIMIT ",
        );
        q.bind(limit as i64);
        let rows = self.db.fetch_all(q).await?;
        rows.iter()
            .map(|r| {
                Ok(Stopping {
                    trace_id: r.get("stop_trace")?,
                    job_name: r.get("stop_job")?,
                    requested_at: r.get("requested_at")?,
                    run: execution(r).ok(),
                })
            })
            .collect()
    }

    async fn stops_confirmed(&self, trace_ids: &[String]) -> Result<(), StoreError> {
        for chunk in trace_ids.chunks(MULTI_ROW) {
            let mut q = Sql::new("DELETE FROM execution_stop WHERE trace_id IN ");
            q.list(chunk.iter());
            self.db.execute(q).await?;
        }
        Ok(())
    }
}

impl SqlStore {
    /// One keyset page of the sweep `q` ordered by `(key, id)`, after `after`. A row that does
    /// not read is returned as [`Unreadable`], so the sweep passes over it.
    async fn sweep(
        &self,
        mut q: Sql,
        key: &'static str,
        after: Cursor,
        limit: u32,
    ) -> Result<Vec<Swept>, StoreError> {
        if let Some((t, id)) = after {
            q.push(&format!(" AND ({key} > "))
                .bind(t)
                .push(&format!(" OR ({key} = "))
                .bind(t)
                .push(" AND id > ")
                .bind(id)
                .push("))");
        }
        q.push(&format!(" ORDER BY {key}, id LIMIT "))
            .bind(limit as i64);
        let rows = self.db.fetch_all(q).await?;
        Ok(rows.iter().map(|r| swept(r, key)).collect())
    }
}

fn swept(row: &Row, key: &str) -> Swept {
    execution(row).map_err(|e| {
        metrics::counter!("scheduler_unreadable_rows_total").increment(1);
        let unreadable = Unreadable {
            id: row.get("id").unwrap_or_default(),
            trace_id: row.get("trace_id").unwrap_or_default(),
            key: row.get(key).unwrap_or_default(),
            error: e.to_string(),
        };
        tracing::error!(trace_id = %unreadable.trace_id, error = %unreadable.error, "passing over an execution row that does not read");
        unreadable
    })
}

fn executions(rows: &[Row]) -> Result<Vec<Execution>, StoreError> {
    rows.iter().map(execution).collect()
}

/// Inserts rows with multi-row statements and learns their generated ids (a multi-row insert
/// reports only its first, and on Galera, whose ids interleave, not even that tells the
/// rest): from the statement itself where the server returns what it inserted (MariaDB,
/// SQLite), else read back by trace id. Returning them spares MariaDB a lookup of every row
/// it has just written (docs/benchmarks.md, "What a fire's rows cost MariaDB").
pub(super) async fn insert_executions(
    tx: &mut Tx,
    rows: &[&NewExecution],
) -> Result<Vec<Execution>, StoreError> {
    let mut ids = foldhash::HashMap::with_capacity_and_hasher(rows.len(), Default::default());
    for chunk in rows.chunks(MULTI_ROW) {
        let mut q = Sql::new("INSERT INTO job_execution ");
        q.values(chunk.iter().map(|r| new_execution_columns(r)));
        let inserted = if tx.returning() {
            q.push(" RETURNING id, trace_id");
            tx.fetch_all(q).await.map_err(StoreError::from_write)?
        } else {
            tx.execute(q).await.map_err(StoreError::from_write)?;
            let mut select = Sql::new(&format!(
                "SELECT id, trace_id FROM {} WHERE trace_id IN ",
                tx.backend().executions_by_trace()
            ));
            select.list(chunk.iter().map(|r| r.trace_id.as_str()));
            tx.fetch_all(select).await?
        };
        for row in inserted {
            let (id, trace): (i64, String) = (row.at(0)?, row.at(1)?);
            ids.insert(trace, id);
        }
    }
    rows.iter()
        .map(|r| {
            // A row this transaction inserted and cannot read back: on Galera, the
            // transaction was aborted for another node's write (the next statement would
            // have said so); nothing of it will commit.
            let id = ids.get(&r.trace_id).copied().ok_or_else(|| {
                StoreError::Aborted(format!("inserted execution {} not found", r.trace_id))
            })?;
            Ok((*r).clone().recorded(id))
        })
        .collect()
}

/// The rows a fire's key names: a range of the unique `execution_id` index (its ids all start
/// with `{fire}:` and sort before `{fire};`), with no LIKE pattern to escape. Callers check
/// the job and the fire key of each row: a longer fire key may share the prefix.
fn push_fire_rows(q: &mut Sql, fire: &str) {
    q.push("SELECT * FROM job_execution WHERE ");
    push_fire_range(q, fire);
    q.push(" ORDER BY id");
}

/// The condition selecting the rows of the fire whose [`fire_key`] is `fire`: every id of
/// the fire is `{fire}:…`, one range of the execution id index (`;` follows `:`).
pub(super) fn push_fire_range(q: &mut Sql, fire: &str) {
    q.push("execution_id >= ")
        .bind(format!("{fire}:"))
        .push(" AND execution_id < ")
        .bind(format!("{fire};"));
}

/// Inserts what the applied transitions of `batch` bring with them: the retry rows failures
/// earn, and the children of SUCCESSes that complete their fires.
async fn follow_up(
    tx: &mut Tx,
    batch: &[&(String, Transition)],
    applied: &mut [Applied],
) -> Result<(), StoreError> {
    let retries: Vec<&NewExecution> = batch
        .iter()
        .zip(applied.iter())
        .filter(|(_, a)| a.applied())
        .filter_map(|((_, t), _)| t.retry.as_deref())
        .collect();
    let mut inserted = insert_executions(tx, &retries).await?.into_iter();
    for ((_, t), a) in batch.iter().zip(applied.iter_mut()) {
        let Applied::Yes(follow) = a else { continue };
        if t.retry.is_some() {
            follow.retry = inserted.next().map(Box::new);
        }
        if let Some(children) = &t.children {
            follow.children = trigger_children(tx, children).await?;
        }
    }
    let mut cancels = 0;
    for ((trace, t), a) in batch.iter().zip(applied.iter()) {
        if let (Some(at), true) = (t.stopping, a.applied()) {
            record_stopping(tx, &[trace.as_str()], at).await?;
            cancels += 1;
        }
    }
    count_cancels(tx, cancels).await
}

/// Inserts `children`'s rows when every range of the parent fire has succeeded and no child
/// of that fire has rows yet. Its callers lock the parent job first, so of several SUCCESSes
/// completing one fire at once, exactly one sees it complete with no children.
async fn trigger_children(
    tx: &mut Tx,
    children: &ChildTrigger,
) -> Result<Vec<Execution>, StoreError> {
    let mut q = Sql::new("");
    push_fire_rows(&mut q, &children.parent_fire);
    let fire: Vec<Execution> = executions(&tx.fetch_all(q).await?)?
        .into_iter()
        .filter(|e| {
            e.job_name == children.parent_job && fire_key(&e.execution_id) == children.parent_fire
        })
        .collect();
    // The fire's ranges are those of its first attempts (a broadcast fire has one per
    // executor), each named by its id, which its retries and re-runs extend after a `#`;
    // each must have a SUCCESS.
    fn series(e: &Execution) -> &str {
        first_attempt_id(&e.execution_id)
    }
    let ranges: BTreeSet<&str> = fire
        .iter()
        .filter(|e| e.retry_count == 0 && !e.execution_id.contains('#'))
        .map(series)
        .collect();
    let succeeded: BTreeSet<&str> = fire
        .iter()
        .filter(|e| e.status == ExecutionStatus::Success)
        .map(series)
        .collect();
    if ranges.is_empty() || !ranges.is_subset(&succeeded) {
        return Ok(Vec::new());
    }
    // One child's rows share their fire key; a child with rows of this parent fire has been
    // triggered already.
    let mut by_child: HashMap<&str, Vec<&NewExecution>> = HashMap::new();
    for row in &children.rows {
        by_child
            .entry(fire_key(&row.execution_id))
            .or_default()
            .push(row);
    }
    let mut due = Vec::new();
    for (key, rows) in by_child {
        let mut q = Sql::new("");
        push_fire_rows(&mut q, key);
        let exists = tx.fetch_all(q).await?.iter().any(|r| {
            r.get::<String>("execution_id")
                .is_ok_and(|id| fire_key(&id) == key)
        });
        if !exists {
            due.extend(rows);
        }
    }
    insert_executions(tx, &due).await
}

/// One attempt at a single state change (see [`ExecutionStore::transition`]): one statement
/// when it carries nothing, else a transaction with what it earns.
async fn transition_once(db: &Db, trace_id: &str, t: &Transition) -> Result<Applied, StoreError> {
    if t.retry.is_none() && t.children.is_none() && t.lock_job.is_none() && t.stopping.is_none() {
        let changed = db.execute(transition_query(trace_id, t)).await? == 1;
        return Ok(if changed { Applied::yes() } else { Applied::No });
    }
    let mut tx = db.begin().await?;
    lock_job_rows(
        &mut tx,
        &t.lock_job.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await?;
    let changed = tx.execute(transition_query(trace_id, t)).await? == 1;
    let mut applied = [if changed { Applied::yes() } else { Applied::No }];
    let item = (trace_id.to_string(), t.clone());
    follow_up(&mut tx, &[&item], &mut applied).await?;
    tx.commit().await?;
    let [a] = applied;
    Ok(a)
}

/// One attempt at a batch of state changes (see [`ExecutionStore::transitions`]).
///
/// Nearly every batch is a writer's results and starts, each for a row nobody else touched
/// since: such a batch is set in one guarded statement per chunk, each row changed only if it
/// is still as its first change expects, and it applied whole when every row matched (but
/// for a change that starts from none of the states the changes before it leave its row in,
/// such as a RUNNING queued after its own verdict: refused without a look at the row). Only
/// when some row did not (a cancel, a compensation or another instance got there first) is
/// the batch rolled back and judged row by row: every row read under its lock, each change
/// decided in order as if applied one by one, the winners set. The guarded statement spares
/// the locking read of every row, a few µs of MariaDB's time per fire (docs/benchmarks.md,
/// "Ids returned by the insert, and the guarded batch again").
async fn transitions_once(
    db: &Db,
    batch: &[(String, Transition)],
) -> Result<Vec<Applied>, StoreError> {
    let mut jobs: Vec<&str> = batch
        .iter()
        .filter_map(|(_, t)| t.lock_job.as_deref())
        .collect();
    jobs.sort_unstable();
    jobs.dedup();
    if let Some(chained) = chained_moves(batch) {
        let mut tx = db.begin().await?;
        lock_job_rows(&mut tx, &jobs).await?;
        let mut matched = 0;
        let moves: Vec<&(String, Transition)> = chained.moves.iter().collect();
        for chunk in moves.chunks(MULTI_ROW / 2) {
            for statement in set_many(tx.backend(), chunk, true) {
                matched += tx.execute(statement).await?;
            }
        }
        if matched == moves.len() as u64 {
            let mut applied: Vec<Applied> = chained
                .refused
                .iter()
                .map(|&r| if r { Applied::No } else { Applied::yes() })
                .collect();
            let all: Vec<&(String, Transition)> = batch.iter().collect();
            follow_up(&mut tx, &all, &mut applied).await?;
            tx.commit().await?;
            return Ok(applied);
        }
        tx.rollback().await?;
        metrics::counter!("scheduler_result_batch_rejudged_total").increment(1);
        tracing::debug!(matched, moves = moves.len(), "guarded batch rolled back");
    }
    judged_one_by_one(db, batch, &jobs).await
}

/// The batch judged row by row (see [`transitions_once`]): compare every row under its lock,
/// then set the winners in one statement.
async fn judged_one_by_one(
    db: &Db,
    batch: &[(String, Transition)],
    jobs: &[&str],
) -> Result<Vec<Applied>, StoreError> {
    let mut tx = db.begin().await?;
    lock_job_rows(&mut tx, jobs).await?;
    // Compare: the current status and holder of every row, locked until the commit.
    let backend = tx.backend();
    let mut current: HashMap<String, Held> = HashMap::with_capacity(batch.len());
    for chunk in batch.chunks(MULTI_ROW) {
        let mut q = Sql::new(&format!(
            "SELECT trace_id, status, scheduler_instance, due_time, id FROM {} WHERE trace_id IN ",
            backend.executions_by_trace()
        ));
        q.list(chunk.iter().map(|(t, _)| t.as_str()))
            .push(backend.lock_rows());
        for row in tx.fetch_all(q).await? {
            let held = Held {
                status: row.at(1)?,
                holder: row.at(2)?,
                due: row.at(3)?,
                id: row.at(4)?,
            };
            current.insert(row.at(0)?, held);
        }
    }
    // Decide in order, as if the transitions were applied one by one.
    let mut applied = Vec::with_capacity(batch.len());
    let mut winners: Vec<&(String, Transition)> = Vec::new();
    for item @ (trace, t) in batch {
        let wins = match current.get_mut(trace.as_str()) {
            Some(row) if row.admits(t) => {
                row.status = t.to.as_str().to_string();
                if let Some((holder, due)) = &t.hand_to {
                    row.holder = Some(holder.clone());
                    row.due = *due;
                }
                true
            }
            _ => false,
        };
        if !wins {
            let row = current.get(trace.as_str());
            tracing::debug!(trace_id = %trace, to = ?t.to, from = ?t.from, held_by = ?t.held_by,
                status = ?row.map(|r| &r.status), holder = ?row.map(|r| &r.holder),
                due = ?row.map(|r| r.due), "change refused");
        }
        applied.push(if wins { Applied::yes() } else { Applied::No });
        if wins {
            winners.push(item);
        }
    }
    // Set: one statement for all winners, a row that moves more than once in the batch
    // (RUNNING, then its result) with its moves folded into one.
    // Each by the id read under its lock, whatever its caller said.
    let mut merged = fold_moves(&winners);
    for (trace, t) in &mut merged {
        t.row_id = current.get(trace.as_str()).map(|row| row.id);
    }
    let merged: Vec<&(String, Transition)> = merged.iter().collect();
    for chunk in merged.chunks(MULTI_ROW / 2) {
        for statement in set_many(tx.backend(), chunk, false) {
            tx.execute(statement).await?;
        }
    }
    let all: Vec<&(String, Transition)> = batch.iter().collect();
    follow_up(&mut tx, &all, &mut applied).await?;
    tx.commit().await?;
    Ok(applied)
}

/// The UPDATEs giving each row of `items` its own values; columns an item leaves unset keep
/// their value. On MariaDB and MySQL the items that carry their row's primary key are set by
/// it ([`set_by_id`]), the others (and every item on SQLite) joined on `trace_id`
/// ([`set_joined`]). `guarded` as for [`set_joined`]; the statements' counts add up to the
/// rows that matched.
fn set_many(backend: Backend, items: &[&(String, Transition)], guarded: bool) -> Vec<Sql> {
    if backend == Backend::Sqlite {
        return vec![set_joined(backend, items, guarded)];
    }
    let (by_id, by_trace): (Vec<_>, Vec<_>) = items.iter().partition(|(_, t)| t.row_id.is_some());
    let mut statements = Vec::with_capacity(2);
    if !by_id.is_empty() {
        statements.push(set_by_id(&by_id, guarded));
    }
    if !by_trace.is_empty() {
        statements.push(set_joined(backend, &by_trace, guarded));
    }
    statements
}

/// The rows a batch's statement by primary key is written for, `n` rounded up to one of 13
/// sizes (1, 2, 4, 8, 16, 32, then multiples of 32 up to 256). Results come in batches of every
/// size, and each size is a statement of its own: the database prepares it (a parse, and a
/// definition sent back for each of its thousands of parameters, which the connection decodes)
/// and the connection caches it. At 1,000 fires a second, with batches of every size, most
/// batches were a new statement; rounded, each connection prepares a size once
/// (docs/benchmarks.md, "Copies, formats and prepares").
fn statement_rows(n: usize) -> usize {
    if n <= 32 {
        n.next_power_of_two()
    } else {
        n.div_ceil(32) * 32
    }
}

/// One single-table UPDATE for items that all carry their row's primary key (MariaDB and
/// MySQL). The rows are an index range of the primary key (`id IN (…)`), and each row picks
/// its own item's values by its position among the items' ids, sorted: `INTERVAL(id, id₁, …,
/// idₙ)` is that position (a binary search over sorted arguments; an id of the list is its
/// own interval's start) and `ELT(position, v₁, …, vₙ)` its value. MariaDB runs a join's
/// UPDATE (the derived table of [`set_joined`]) through temporary tables of the rows it
/// updates; this form spares them (about 9 µs of its CPU per row in the replay, 5 % of its CPU
/// per fire in JobFlow's runs: docs/benchmarks.md, "Results set by primary key"). `ELT` answers a string: the time and integer columns are
/// cast back to their types, so each value is compared and stored as the join form does.
fn set_by_id(items: &[&(String, Transition)], guarded: bool) -> Sql {
    let mut items = items.to_vec();
    items.sort_unstable_by_key(|(_, t)| t.row_id);
    let ids: Vec<i64> = items.iter().filter_map(|(_, t)| t.row_id).collect();
    debug_assert_eq!(
        ids.len(),
        items.len(),
        "set_by_id takes items with their ids"
    );
    let mut changes: Vec<[Column; 8]> = items.iter().map(|(_, t)| changed_columns(t)).collect();
    // The statement is written for `statement_rows` rows: the ids missing are negative ones,
    // ahead of the real ids (so the list stays strictly ascending for `INTERVAL`), and name no
    // row (an AUTO_INCREMENT id starts at 1); their values are NULLs.
    let padding = statement_rows(ids.len()) - ids.len();
    let ids: Vec<i64> = (1..=padding as i64).rev().map(|k| -k).chain(ids).collect();
    // `ELT(INTERVAL(id, ids…), values…)`, cast back from text to the values' type (every
    // value of one column has it, its NULLs included).
    let pick = |q: &mut Sql, values: Vec<Arg>| {
        let cast = match &values[0] {
            Arg::Time(_) => Some("DATETIME(6)"),
            Arg::Int(_) | Arg::Bool(_) => Some("SIGNED"),
            Arg::Text(_) => None,
        };
        if cast.is_some() {
            q.push("CAST(");
        }
        q.push("ELT(INTERVAL(id, ");
        for (i, id) in ids.iter().enumerate() {
            if i > 0 {
                q.push(", ");
            }
            q.bind(*id);
        }
        q.push(")");
        let null = values[0].null();
        for _ in 0..padding {
            q.push(", ").bind(null.clone());
        }
        for value in values {
            q.push(", ").bind(value);
        }
        q.push(")");
        if let Some(cast) = cast {
            q.push(&format!(" AS {cast})"));
        }
    };
    // Through the primary key by a hint: on a young table (256 ids among 1,000 rows) MariaDB
    // scanned the table instead and locked every row it passed, so a batch waited for rows it
    // does not change, as `Backend::executions_by_trace` explains for the joined form
    // (`store_contract::mysql_a_batch_of_results_by_row_id_locks_only_its_own_rows`).
    let mut q = Sql::new("UPDATE job_execution FORCE INDEX (PRIMARY) SET status = ");
    let statuses = items.iter().map(|(_, t)| t.to.as_str().into()).collect();
    pick(&mut q, statuses);
    for k in 0..8 {
        let Some(null) = changes.iter().find_map(|c| c[k].1.as_ref()).map(Arg::null) else {
            continue;
        };
        let name = changes[0][k].0;
        let values = changes
            .iter_mut()
            .map(|c| c[k].1.take().unwrap_or_else(|| null.clone()))
            .collect();
        q.push(&format!(", {name} = COALESCE("));
        pick(&mut q, values);
        q.push(&format!(", {name})"));
    }
    q.push(" WHERE id IN ").list(ids.iter().copied());
    // The trace id too: an id that named another row would change nothing.
    q.push(" AND trace_id = ");
    pick(
        &mut q,
        items.iter().map(|(trace, _)| trace.into()).collect(),
    );
    if guarded {
        // Nearly every batch is one writer's results: the same `from` states and the same
        // holder for every row, bound once; only what differs is picked per row.
        let first = items[0].1.from;
        if items.iter().all(|(_, t)| t.from == first) {
            q.push(" AND status IN ")
                .list(first.iter().map(|s| s.as_str()));
        } else {
            let froms = items.iter().map(|(_, t)| t.from.len()).max().unwrap_or(0);
            q.push(" AND status IN (");
            for k in 0..froms {
                if k > 0 {
                    q.push(", ");
                }
                let from = items
                    .iter()
                    .map(|(_, t)| Arg::Text(t.from.get(k).map(|s| s.as_str().to_string())))
                    .collect();
                pick(&mut q, from);
            }
            q.push(")");
        }
        let holders: Vec<Option<&str>> = items
            .iter()
            .map(|(_, t)| t.held_by.as_ref().map(|(h, _)| h.as_str()))
            .collect();
        let dues = || {
            items
                .iter()
                .map(|(_, t)| Arg::Time(t.held_by.as_ref().map(|(_, d)| *d)))
                .collect()
        };
        match holders[0] {
            Some(holder) if holders.iter().all(|h| *h == Some(holder)) => {
                q.push(" AND scheduler_instance = ")
                    .bind(holder)
                    .push(" AND due_time = ");
                pick(&mut q, dues());
            }
            _ if holders.iter().all(Option::is_none) => {}
            _ => {
                // An item without a lease has a NULL holder; one with has both.
                let mut holder = Sql::new("");
                let named = holders.iter().map(|h| Arg::Text(h.map(str::to_string)));
                pick(&mut holder, named.collect());
                let unleased = holder.clone();
                q.push(" AND (scheduler_instance = ").append(holder);
                q.push(" AND due_time = ");
                pick(&mut q, dues());
                q.push(" OR ").append(unleased).push(" IS NULL)");
            }
        }
    }
    q
}

/// One UPDATE giving each row of `items` its own values; columns an item leaves unset keep
/// their value. The values are a derived table (`SELECT ? AS trace_id, … UNION ALL SELECT
/// …`) joined to the rows on the unique `trace_id` index, so the statement costs the same per
/// row however large the batch: a `CASE trace_id WHEN … THEN …` per column, as this was first
/// written, compares each row with every item of the batch, in every column
/// (docs/benchmarks.md, "Writing a batch of results"). Only the columns some item sets are
/// named.
///
/// `guarded`: each row changes only while it is in one of its item's `from` states and, for
/// an item with `held_by`, still held by that instance until that due time; the statement
/// then counts the rows that matched. Unguarded, the rows are already known to be in a
/// `from` state (compared under their locks).
fn set_joined(backend: Backend, items: &[&(String, Transition)], guarded: bool) -> Sql {
    let changes: Vec<[Column; 8]> = items.iter().map(|(_, t)| changed_columns(t)).collect();
    // The columns some item sets, each with a NULL of its type for the items that leave it
    // unset: the derived table's column takes its type from its values, and an untyped NULL
    // would make it text.
    let columns: Vec<(usize, &str, Arg)> = (0..8)
        .filter_map(|k| {
            let value = changes.iter().find_map(|c| c[k].1.as_ref())?;
            Some((k, changes[0][k].0, value.null()))
        })
        .collect();
    // The guard's columns: `from_0`… (as many as the longest `from`, NULL past an item's
    // own), then the lease's holder and due time (NULL for an item without one).
    let froms = if guarded {
        items.iter().map(|(_, t)| t.from.len()).max().unwrap_or(0)
    } else {
        0
    };
    let mut values = Sql::new("SELECT ");
    for (i, ((trace, t), change)) in items.iter().zip(changes).enumerate() {
        let alias = |name: &str| {
            if i == 0 {
                format!(" AS {name}")
            } else {
                String::new()
            }
        };
        if i > 0 {
            values.push(" UNION ALL SELECT ");
        }
        values.bind(trace.as_str()).push(&alias("trace_id"));
        values.push(", ").bind(t.to.as_str()).push(&alias("status"));
        let mut change = change.map(|(_, value)| value);
        for (k, name, null) in &columns {
            let value = change[*k].take().unwrap_or_else(|| null.clone());
            values.push(", ").bind(value).push(&alias(name));
        }
        if guarded {
            for k in 0..froms {
                let from = t.from.get(k).map(|s| s.as_str().to_string());
                values
                    .push(", ")
                    .bind(from)
                    .push(&alias(&format!("from_{k}")));
            }
            let (holder, due) = match &t.held_by {
                Some((holder, due)) => (Some(holder.clone()), Some(*due)),
                None => (None, None),
            };
            values.push(", ").bind(holder).push(&alias("held_by"));
            values
                .push(", ")
                .bind(Arg::Time(due))
                .push(&alias("held_due"));
        }
    }
    // MySQL names the updated table's columns by its alias; SQLite's SET takes bare names.
    let set = |target: &str| {
        let mut set = format!("{target}status = v.status");
        for (_, name, _) in &columns {
            set.push_str(&format!(", {target}{name} = COALESCE(v.{name}, e.{name})"));
        }
        set
    };
    let guard = |and: &str| {
        if !guarded {
            return String::new();
        }
        let from: Vec<String> = (0..froms).map(|k| format!("v.from_{k}")).collect();
        format!(
            " {and} e.status IN ({}) AND (v.held_by IS NULL OR \
             (e.scheduler_instance = v.held_by AND e.due_time = v.held_due))",
            from.join(", ")
        )
    };
    match backend {
        // The values first and the rows through their unique index, whatever the table's
        // size: on a small table the optimizer would rather scan it, locking every row it
        // passes, and batches on other connections would deadlock with it. The bound values
        // carry the connection's collation; the column's is binary.
        Backend::MySql => {
            let mut q = Sql::new("UPDATE (");
            q.append(values).push(&format!(
                ") v STRAIGHT_JOIN job_execution e FORCE INDEX (uk_trace_id) \
                 ON e.trace_id = v.trace_id COLLATE utf8mb4_bin SET {}{}",
                set("e."),
                guard("WHERE")
            ));
            q
        }
        Backend::Sqlite => {
            let mut q = Sql::new(&format!("UPDATE job_execution AS e SET {} FROM (", set("")));
            q.append(values).push(&format!(
                ") AS v WHERE e.trace_id = v.trace_id{}",
                guard("AND")
            ));
            q
        }
    }
}

/// A column a change may set beside `status`, with its value when the change sets it.
type Column = (&'static str, Option<Arg>);

/// Every column a change may set beside `status`, in one order for every change; those it
/// leaves unset keep their value.
fn changed_columns(t: &Transition) -> [Column; 8] {
    let (holder, due) = match &t.hand_to {
        Some((holder, due)) => (Some(holder.as_str().into()), Some((*due).into())),
        None => (None, None),
    };
    [
        ("scheduler_instance", holder),
        ("due_time", due),
        (
            "executor_instance",
            t.executor_instance.clone().map(Into::into),
        ),
        ("start_time", t.start_time.map(Into::into)),
        ("finish_time", t.finish_time.map(Into::into)),
        ("duration_ms", t.duration_ms.map(Into::into)),
        ("result_message", t.result_message.clone().map(Into::into)),
        ("error_message", t.error_message.clone().map(Into::into)),
    ]
}

/// What a batch's compare reads of one row: its status, its holder's lease and its key.
struct Held {
    status: String,
    holder: Option<String>,
    due: DateTime<Utc>,
    id: i64,
}

impl Held {
    /// Whether `t` applies to the row as it is: from one of its states and, when it is
    /// guarded, while the row is still held as the guard says (as [`transition_query`]'s
    /// `WHERE` decides for a single row).
    fn admits(&self, t: &Transition) -> bool {
        let held = t.held_by.as_ref().is_none_or(|(owner, due)| {
            self.holder.as_deref() == Some(owner.as_str()) && super::ms(self.due) == super::ms(*due)
        });
        held && t.from.iter().any(|f| f.as_str() == self.status)
    }
}

/// The compare-and-set of one row, with its guards.
fn transition_query(trace_id: &str, t: &Transition) -> Sql {
    let mut set = vec![("status", t.to.as_str().into())];
    set.extend(
        changed_columns(t)
            .into_iter()
            .filter_map(|(c, v)| v.map(|v| (c, v))),
    );
    let mut q = Sql::new("UPDATE job_execution SET ");
    q.set(set).push(" WHERE trace_id = ").bind(trace_id);
    if let Some((owner, due)) = &t.held_by {
        q.push(" AND scheduler_instance = ")
            .bind(owner)
            .push(" AND due_time = ")
            .bind(*due);
    }
    q.push(" AND status IN ")
        .list(t.from.iter().map(|s| s.as_str()));
    q
}

/// The `WHERE` conditions of an execution search (each backed by an index that ends in
/// `trigger_time`, so the newest-first page is an index range scan).
fn push_execution_filter(q: &mut Sql, f: &ExecutionFilter) {
    q.push(" WHERE 1 = 1");
    match &f.namespace {
        // A key outside `default` starts with `namespace/`: a range of the job-name index.
        Some(ns) if !ns.is_default() => {
            q.push(" AND job_name >= ")
                .bind(format!("{ns}/"))
                .push(" AND job_name < ")
                .bind(format!("{ns}0"));
        }
        Some(_) => {
            q.push(" AND INSTR(job_name, '/') = 0");
        }
        None => {}
    }
    if let Some(j) = &f.job_name {
        q.push(" AND job_name = ").bind(j);
    }
    if let Some(s) = f.status {
        q.push(" AND status = ").bind(s.as_str());
    }
    if let Some(t) = f.trigger_type {
        q.push(" AND trigger_type = ").bind(t.as_str());
    }
    if let Some(e) = &f.executor {
        q.push(" AND executor_instance = ").bind(e);
    }
    if let Some(from) = f.from {
        q.push(" AND trigger_time >= ").bind(from);
    }
    if let Some(to) = f.to {
        q.push(" AND trigger_time <= ").bind(to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// `n` results of one writer, rows 10, 20, … by primary key.
    fn results(n: i64) -> Vec<(String, Transition)> {
        let at = Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap();
        (1..=n)
            .map(|k| {
                let from = &[ExecutionStatus::Pending, ExecutionStatus::Running];
                let mut t = Transition::to(from, ExecutionStatus::Success);
                t.row_id = Some(k * 10);
                t.finish_time = Some(at + chrono::Duration::milliseconds(k));
                t.result_message = Some(format!("ok {k}"));
                (format!("trace-{k}"), t)
            })
            .collect()
    }

    fn by_id(items: &[(String, Transition)]) -> Sql {
        set_by_id(&items.iter().collect::<Vec<_>>(), true)
    }

    #[test]
    fn a_batch_by_primary_key_is_written_for_one_of_thirteen_sizes() {
        let sizes: std::collections::BTreeSet<usize> = (1..=256).map(statement_rows).collect();
        assert_eq!(
            sizes.into_iter().collect::<Vec<_>>(),
            [1, 2, 4, 8, 16, 32, 64, 96, 128, 160, 192, 224, 256]
        );
        for n in 1..=256 {
            let rows = statement_rows(n);
            assert!(rows >= n && rows - n < n.max(32), "{n} → {rows}");
        }
    }

    #[test]
    fn batches_of_sizes_rounded_alike_are_one_statement() {
        assert_eq!(by_id(&results(3)).text(), by_id(&results(4)).text());
        assert_eq!(by_id(&results(33)).text(), by_id(&results(64)).text());
        assert_ne!(by_id(&results(4)).text(), by_id(&results(5)).text());
    }

    #[test]
    fn the_rows_a_batch_lacks_are_negative_ids_with_null_values_ahead_of_its_own() {
        let q = by_id(&results(3));
        let ids = [-1, 10, 20, 30].map(|id| Arg::Int(Some(id)));
        // The status: `ELT(INTERVAL(id, ids…), statuses…)`, the missing row's a NULL.
        let status = [
            Arg::Text(None),
            Arg::from("SUCCESS"),
            Arg::from("SUCCESS"),
            Arg::from("SUCCESS"),
        ];
        assert_eq!(q.args()[..4], ids);
        assert_eq!(q.args()[4..8], status);
        assert!(
            q.text()
                .contains(" WHERE id IN (?, ?, ?, ?) AND trace_id = ELT("),
            "{}",
            q.text()
        );
        let listed = q.args().windows(4).filter(|w| *w == ids.as_slice()).count();
        // One list for each `ELT` (status, finish, result, trace) and the `IN`.
        assert_eq!(listed, 5, "{:?}", q.args());
    }
}
