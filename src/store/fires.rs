//! [`FireStore`] over SQL: recording fires (claims and rows), admitting guarded fires at
//! their instant, withdrawing fires before it, and the fire history misfire handling reads.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::columns::execution;
use super::executions::{insert_executions, record_stopping};
use super::sql::{Sql, Tx};
use super::{
    Admitted, FireClaim, FireOutcome, FireRecord, FireStore, GuardedFire, InstantCounters,
    MULTI_ROW, SqlStore, StoreError, UniqueKey, Withdrawal, ms,
};
use crate::jobs::{Execution, ExecutionStatus, NewExecution, OverlapPolicy, TriggerType};

/// Fire claims deleted per statement when purging.
const PURGE_CHUNK: i64 = 5000;

#[async_trait]
impl FireStore for SqlStore {
    async fn record_fires(&self, fires: &[FireRecord]) -> Result<Vec<FireOutcome>, StoreError> {
        let mut tx = self.db.begin().await?;
        match record_unclaimed(&mut tx, fires).await {
            Ok(outcomes) => {
                tx.commit().await?;
                return Ok(outcomes);
            }
            // Some fire was recorded elsewhere (an ownership change, a child triggered by
            // another instance): redo the batch fire by fire, each under a savepoint,
            // skipping those.
            Err(StoreError::Duplicate(_)) => {
                tx.rollback().await?;
                tx = self.db.begin().await?;
            }
            Err(e) => return Err(e),
        }
        let mut outcomes = Vec::with_capacity(fires.len());
        for fire in fires {
            tx.savepoint().await?;
            let inserted = match &fire.claim {
                Some(claim) => insert_claims(&mut tx, &[claim]).await,
                None => Ok(()),
            };
            let inserted = match inserted {
                Ok(()) => insert_executions(&mut tx, &fire.rows.iter().collect::<Vec<_>>()).await,
                Err(e) => Err(e),
            };
            match inserted {
                Ok(rows) => {
                    tx.keep_savepoint().await?;
                    outcomes.push(FireOutcome::Recorded(rows));
                }
                Err(StoreError::Duplicate(UniqueKey::Fire | UniqueKey::ExecutionId)) => {
                    tx.undo_savepoint().await?;
                    outcomes.push(FireOutcome::AlreadyFired);
                }
                Err(e) => return Err(e),
            }
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    async fn record_fire(
        &self,
        claim: Option<&FireClaim>,
        rows: &[NewExecution],
    ) -> Result<FireOutcome, StoreError> {
        if let Some(claim) = claim {
            let fire = FireRecord {
                claim: Some(claim.clone()),
                rows: rows.to_vec(),
            };
            let mut outcomes = self.record_fires(&[fire]).await?;
            return Ok(outcomes.pop().expect("one outcome per fire"));
        }
        let mut tx = self.db.begin().await?;
        let recorded = insert_executions(&mut tx, &rows.iter().collect::<Vec<_>>()).await?;
        tx.commit().await?;
        Ok(FireOutcome::Recorded(recorded))
    }

    async fn admit(
        &self,
        fires: &[GuardedFire],
        now: DateTime<Utc>,
    ) -> Result<Vec<Admitted>, StoreError> {
        if fires.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.db.begin().await?;
        let mut jobs: Vec<&str> = fires.iter().map(|f| f.job.as_str()).collect();
        jobs.sort_unstable();
        jobs.dedup();
        let current = lock_jobs(&mut tx, &jobs).await?;
        let mut open = open_runs(&mut tx, &jobs).await?;
        let mut out = Vec::with_capacity(fires.len());
        for fire in fires {
            let admitted = admit_one(&mut tx, fire, current.get(&fire.job), &mut open, now).await?;
            out.push(admitted);
        }
        tx.commit().await?;
        Ok(out)
    }

    async fn record_guarded(
        &self,
        policy: OverlapPolicy,
        rows: &[NewExecution],
        now: DateTime<Utc>,
    ) -> Result<Admitted, StoreError> {
        let Some(first) = rows.first() else {
            return Ok(Admitted::Gone);
        };
        let job = first.job_name.clone();
        let mut tx = self.db.begin().await?;
        let current = lock_jobs(&mut tx, &[job.as_str()]).await?;
        let recorded = insert_executions(&mut tx, &rows.iter().collect::<Vec<_>>()).await?;
        let mut open = open_runs(&mut tx, &[job.as_str()]).await?;
        let fire = GuardedFire {
            withdrawal: Withdrawal {
                instance: first.scheduler_instance.clone(),
                job: job.clone(),
                claimed: None,
                traces: recorded.iter().map(|r| r.trace_id.clone()).collect(),
            },
            job,
            revision: None,
            policy,
            rows: recorded,
            scheduled: false,
            start: false,
        };
        let admitted = admit_one(&mut tx, &fire, current.get(&fire.job), &mut open, now).await?;
        tx.commit().await?;
        Ok(admitted)
    }

    async fn instant_counters(&self) -> Result<InstantCounters, StoreError> {
        let q = Sql::new("SELECT revision, cancels FROM job_revision WHERE id = 1");
        let row = &self.db.fetch_all(q).await?[0];
        Ok(InstantCounters {
            job_revision: row.at(0)?,
            cancels: row.at(1)?,
        })
    }

    async fn no_longer_pending(&self, traces: &[String]) -> Result<Vec<String>, StoreError> {
        let mut gone = Vec::new();
        for chunk in traces.chunks(MULTI_ROW) {
            let mut q = Sql::new("SELECT trace_id FROM job_execution WHERE trace_id IN ");
            q.list(chunk.iter()).push(" AND status <> 'PENDING'");
            for row in self.db.fetch_all(q).await? {
                gone.push(row.at(0)?);
            }
        }
        Ok(gone)
    }

    async fn withdraw_fires(&self, fires: &[Withdrawal]) -> Result<Vec<bool>, StoreError> {
        let mut tx = self.db.begin().await?;
        let mut withdrawn = Vec::with_capacity(fires.len());
        for w in fires {
            withdrawn.push(withdraw_in(&mut tx, w).await?);
        }
        tx.commit().await?;
        Ok(withdrawn)
    }

    async fn last_fire_time(&self, job: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        let mut q = Sql::new("SELECT MAX(fire_time) FROM job_fire WHERE job_name = ");
        q.bind(job);
        self.db.fetch_all(q).await?[0].at(0)
    }

    async fn recent_fires(
        &self,
        since: DateTime<Utc>,
    ) -> Result<HashMap<String, DateTime<Utc>>, StoreError> {
        let mut q = Sql::new("SELECT job_name, MAX(fire_time) FROM job_fire WHERE fire_time >= ");
        q.bind(since).push(" GROUP BY job_name");
        self.db
            .fetch_all(q)
            .await?
            .iter()
            .map(|r| Ok((r.at(0)?, r.at(1)?)))
            .collect()
    }

    async fn purge_fire_claims(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        // In chunks along the fire_time index: at a thousand fires a second an hour of claims
        // is millions of rows, too many for one statement's locks and undo.
        let before = ms(before);
        let mut purged = 0;
        loop {
            let mut q = Sql::new("SELECT fire_time FROM job_fire WHERE fire_time < ");
            q.bind(before)
                .push(" ORDER BY fire_time LIMIT 1 OFFSET ")
                .bind(PURGE_CHUNK - 1);
            let bound: Option<DateTime<Utc>> = match self.db.fetch_optional(q).await? {
                Some(row) => Some(row.at(0)?),
                None => None,
            };
            let mut delete = match bound {
                Some(b) => {
                    let mut d = Sql::new("DELETE FROM job_fire WHERE fire_time <= ");
                    d.bind(b);
                    d
                }
                None => {
                    let mut d = Sql::new("DELETE FROM job_fire WHERE fire_time < ");
                    d.bind(before);
                    d
                }
            };
            purged += self.db.execute(std::mem::take(&mut delete)).await?;
            if bound.is_none() {
                return Ok(purged);
            }
        }
    }
}

/// The common case of a batch of fires: nobody else recorded any of them, so all claims and
/// rows go in with a few multi-row statements.
async fn record_unclaimed(
    tx: &mut Tx,
    fires: &[FireRecord],
) -> Result<Vec<FireOutcome>, StoreError> {
    let claims: Vec<&FireClaim> = fires.iter().filter_map(|f| f.claim.as_ref()).collect();
    insert_claims(tx, &claims).await?;
    let rows: Vec<&NewExecution> = fires.iter().flat_map(|f| &f.rows).collect();
    let mut recorded = insert_executions(tx, &rows).await?.into_iter();
    Ok(fires
        .iter()
        .map(|f| FireOutcome::Recorded(recorded.by_ref().take(f.rows.len()).collect()))
        .collect())
}

/// Inserts fire claims with multi-row statements; a claim taken already fails the statement
/// with `Duplicate(Fire)`.
async fn insert_claims(tx: &mut Tx, claims: &[&FireClaim]) -> Result<(), StoreError> {
    for chunk in claims.chunks(MULTI_ROW) {
        let mut q = Sql::new("INSERT INTO job_fire ");
        q.values(chunk.iter().map(|c| {
            vec![
                ("job_name", c.job_name.as_str().into()),
                ("fire_time", c.fire_time.into()),
                ("scheduler_instance", c.scheduler_instance.as_str().into()),
                ("created_at", c.claimed_at.into()),
            ]
        }));
        tx.execute(q).await.map_err(StoreError::from_write)?;
    }
    Ok(())
}

/// Takes back one recorded fire: its rows and its claim are deleted, so its instant can be
/// fired again, but only while every row that is left is still PENDING and held by the
/// fire's instance. Once one was taken over (compensation resumed it after its lease) or
/// moved on, the fire stands as recorded and nothing is deleted: `false`.
async fn withdraw_in(tx: &mut Tx, w: &Withdrawal) -> Result<bool, StoreError> {
    let lock = tx.backend().lock_rows();
    for chunk in w.traces.chunks(MULTI_ROW) {
        let mut q =
            Sql::new("SELECT status, scheduler_instance FROM job_execution WHERE trace_id IN ");
        q.list(chunk.iter()).push(lock);
        for row in tx.fetch_all(q).await? {
            let (status, holder): (String, Option<String>) = (row.at(0)?, row.at(1)?);
            if status != ExecutionStatus::Pending.as_str() || holder.as_deref() != Some(&w.instance)
            {
                return Ok(false);
            }
        }
    }
    for chunk in w.traces.chunks(MULTI_ROW) {
        let mut q = Sql::new("DELETE FROM job_execution WHERE trace_id IN ");
        q.list(chunk.iter());
        tx.execute(q).await?;
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

/// Locks the rows of `jobs` (sorted) and reads their revision and whether they are enabled.
/// A write first, so SQLite takes its write lock at once: guarded fires and the settling of
/// guarded jobs' runs wait for each other here.
async fn lock_jobs(tx: &mut Tx, jobs: &[&str]) -> Result<HashMap<String, (i64, bool)>, StoreError> {
    let mut lock = Sql::new("UPDATE job_definition SET name = name WHERE name IN ");
    lock.list(jobs.iter().copied());
    tx.execute(lock).await?;
    let mut read = Sql::new("SELECT name, revision, enabled FROM job_definition WHERE name IN ");
    read.list(jobs.iter().copied());
    let mut current = HashMap::new();
    for row in tx.fetch_all(read).await? {
        current.insert(row.at(0)?, (row.at(1)?, row.at(2)?));
    }
    Ok(current)
}

/// The runs of `jobs`, oldest first, by job: their PENDING and RUNNING rows, and the rows of
/// runs cancelled but still stopping (see [`Stopping`](super::Stopping)).
async fn open_runs(
    tx: &mut Tx,
    jobs: &[&str],
) -> Result<HashMap<String, Vec<Execution>>, StoreError> {
    // Along the status index: the open rows of all jobs are few, a job's history may be
    // millions. The unary `+` keeps SQLite's planner off the job_name index, which it prefers
    // without statistics; MySQL ignores it and picks by cost.
    let mut q = Sql::new(
        "SELECT * FROM job_execution WHERE status IN ('PENDING', 'RUNNING') AND +job_name IN ",
    );
    q.list(jobs.iter().copied());
    let mut rows = tx.fetch_all(q).await?;
    let mut q = Sql::new(
        "SELECT e.* FROM execution_stop s JOIN job_execution e ON e.trace_id = s.trace_id \
         WHERE s.job_name IN ",
    );
    q.list(jobs.iter().copied());
    rows.extend(tx.fetch_all(q).await?);
    let mut open: HashMap<String, Vec<Execution>> = HashMap::new();
    let mut seen = HashSet::new();
    for row in &rows {
        let e = execution(row)?;
        if seen.insert(e.id) {
            open.entry(e.job_name.clone()).or_default().push(e);
        }
    }
    for runs in open.values_mut() {
        runs.sort_by_key(|e| e.id);
    }
    Ok(open)
}

/// Decides one guarded fire (see [`FireStore::admit`]), keeping `open` up to date for the
/// fires after it.
async fn admit_one(
    tx: &mut Tx,
    fire: &GuardedFire,
    job: Option<&(i64, bool)>,
    open: &mut HashMap<String, Vec<Execution>>,
    now: DateTime<Utc>,
) -> Result<Admitted, StoreError> {
    let current = match job {
        None => false,
        Some((_, false)) if fire.scheduled => false,
        Some((revision, _)) => fire.revision.is_none_or(|r| r == *revision),
    };
    if !current {
        return Ok(match withdraw_in(tx, &fire.withdrawal).await? {
            true => Admitted::Withdrawn,
            false => Admitted::Gone,
        });
    }
    let own: HashSet<&str> = fire.rows.iter().map(|r| r.trace_id.as_str()).collect();
    let runs = open.entry(fire.job.clone()).or_default();
    let pending: Vec<String> = runs
        .iter()
        .filter(|e| own.contains(e.trace_id.as_str()) && e.status == ExecutionStatus::Pending)
        .map(|e| e.trace_id.clone())
        .collect();
    if pending.is_empty() {
        return Ok(Admitted::Gone);
    }
    let others: Vec<Execution> = runs
        .iter()
        .filter(|e| !own.contains(e.trace_id.as_str()) && !claimed_ahead(e, now))
        .cloned()
        .collect();
    let covered = match fire.policy {
        _ if others.is_empty() => Vec::new(),
        OverlapPolicy::Allow => Vec::new(),
        OverlapPolicy::Skip => return skip(tx, runs, &pending, &others).await,
        OverlapPolicy::Cover => {
            cover(tx, runs, &others, now).await?;
            others
        }
    };
    if fire.start {
        Move::to(ExecutionStatus::Running)
            .started(now)
            .apply(tx, &pending)
            .await?;
    }
    let mut rows = Vec::with_capacity(pending.len());
    for e in runs.iter_mut().filter(|e| pending.contains(&e.trace_id)) {
        if fire.start {
            e.status = ExecutionStatus::Running;
            e.start_time = Some(ms(now));
        }
        rows.push(e.clone());
    }
    Ok(Admitted::Run { rows, covered })
}

/// COVER: the open runs among `others` are cancelled; those called (RUNNING) stay in `runs`
/// as stopping until their executors confirm the stop.
async fn cover(
    tx: &mut Tx,
    runs: &mut Vec<Execution>,
    others: &[Execution],
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let open = |e: &&Execution| !e.status.is_final();
    let cancelled: Vec<String> = others
        .iter()
        .filter(open)
        .map(|e| e.trace_id.clone())
        .collect();
    let why = "cancelled: a newer fire replaced it (overlapPolicy COVER)";
    let cancel = Move::to(ExecutionStatus::Cancelled)
        .because(why)
        .finished(now);
    cancel.apply(tx, &cancelled).await?;
    let called: Vec<&str> = others
        .iter()
        .filter(|e| e.status == ExecutionStatus::Running)
        .map(|e| e.trace_id.as_str())
        .collect();
    record_stopping(tx, &called, now).await?;
    runs.retain(|e| e.status != ExecutionStatus::Pending || !cancelled.contains(&e.trace_id));
    for e in runs.iter_mut().filter(|e| cancelled.contains(&e.trace_id)) {
        e.status = ExecutionStatus::Cancelled;
    }
    Ok(())
}

/// SKIP beside open runs: the fire's `pending` rows are recorded SKIPPED, naming the runs.
async fn skip(
    tx: &mut Tx,
    runs: &mut Vec<Execution>,
    pending: &[String],
    others: &[Execution],
) -> Result<Admitted, StoreError> {
    let running: Vec<String> = others.iter().map(|e| e.trace_id.clone()).collect();
    let why = format!(
        "not called: the job still runs {} (overlapPolicy SKIP)",
        running.join(", ")
    );
    Move::to(ExecutionStatus::Skipped)
        .because(&why)
        .apply(tx, pending)
        .await?;
    let rows = runs
        .iter()
        .filter(|e| pending.contains(&e.trace_id))
        .map(|e| Execution {
            status: ExecutionStatus::Skipped,
            error_message: Some(why.clone()),
            ..e.clone()
        })
        .collect();
    runs.retain(|e| !pending.contains(&e.trace_id));
    Ok(Admitted::Skipped { rows, running })
}

/// A first attempt of a cron fire recorded ahead of its instant, which has not come: not a
/// run yet.
fn claimed_ahead(e: &Execution, now: DateTime<Utc>) -> bool {
    e.status == ExecutionStatus::Pending
        && e.trigger_type == TriggerType::Cron
        && e.retry_count == 0
        && e.due_time > now
}

/// A move of open rows to a status, with the message, finish and start it sets.
struct Move<'a> {
    status: ExecutionStatus,
    error: Option<&'a str>,
    finished: Option<DateTime<Utc>>,
    started: Option<DateTime<Utc>>,
}

impl<'a> Move<'a> {
    fn to(status: ExecutionStatus) -> Self {
        Self {
            status,
            error: None,
            finished: None,
            started: None,
        }
    }

    fn because(self, error: &'a str) -> Self {
        Self {
            error: Some(error),
            ..self
        }
    }

    fn finished(self, at: DateTime<Utc>) -> Self {
        Self {
            finished: Some(at),
            ..self
        }
    }

    fn started(self, at: DateTime<Utc>) -> Self {
        Self {
            started: Some(at),
            ..self
        }
    }

    /// Moves the rows among `traces` that are still open.
    async fn apply(self, tx: &mut Tx, traces: &[String]) -> Result<u64, StoreError> {
        let mut set = vec![("status", self.status.as_str().into())];
        if let Some(e) = self.error {
            set.push(("error_message", e.into()));
        }
        if let Some(f) = self.finished {
            set.push(("finish_time", f.into()));
        }
        if let Some(s) = self.started {
            set.push(("start_time", s.into()));
        }
        let mut q = Sql::new("UPDATE job_execution SET ");
        q.set(set)
            .push(" WHERE trace_id IN ")
            .list(traces.iter())
            .push(" AND status IN ('PENDING', 'RUNNING')");
        Ok(tx.execute(q).await?)
    }
}
