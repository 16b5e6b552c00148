//! [`FireStore`] over SQL: recording fires (claims and rows), admitting guarded fires at
//! their instant, withdrawing fires before it, and the fire history misfire handling reads.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::admission::{admit_all, judge_ahead};
use super::conflict;
use super::executions::{insert_executions, push_fire_range};
use super::sql::{Db, Sql, Tx};
use super::steps::{lock_job_rows, lock_jobs, withdraw_in};
use super::{
    Admitted, FireClaim, FireEnd, FireOutcome, FireRecord, FireStore, GuardedFire, InstantCounters,
    MULTI_ROW, SqlStore, StoreError, UniqueKey, Withdrawal, ms,
};
use crate::jobs::{
    ExecutionStatus, NewExecution, OverlapPolicy, delay_restart, fire_key, scheduled_fire_key,
};

/// Which of `fires` (job, instant) have their claim.
async fn claimed<'a>(
    tx: &mut Tx,
    fires: &[&'a (String, DateTime<Utc>)],
) -> Result<Vec<(&'a str, DateTime<Utc>)>, StoreError> {
    if fires.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = Sql::new("SELECT job_name, fire_time FROM job_fire WHERE ");
    for (i, (job, at)) in fires.iter().enumerate() {
        q.push(if i == 0 { "(" } else { " OR (" })
            .push("job_name = ")
            .bind(job.as_str())
            .push(" AND fire_time = ")
            .bind(ms(*at))
            .push(")");
    }
    let found: Vec<(String, DateTime<Utc>)> = tx
        .fetch_all(q)
        .await?
        .iter()
        .map(|r| Ok((r.at(0)?, r.at(1)?)))
        .collect::<Result<_, StoreError>>()?;
    Ok(fires
        .iter()
        .filter(|(job, at)| found.iter().any(|(j, t)| j == job && *t == ms(*at)))
        .map(|(job, at)| (job.as_str(), *at))
        .collect())
}

/// Folds one row of a fire into (every row final so far, the latest finish): a fire has
/// ended when all its rows are final, at the latest finish among them. `fire_ends` (the
/// engine's reading) and the fixed-delay check of a claim read ends by this one rule.
fn fold_end(
    fire: &mut (bool, Option<DateTime<Utc>>),
    status: &str,
    finished: Option<DateTime<Utc>>,
) {
    fire.0 &= status
        .parse::<ExecutionStatus>()
        .is_ok_and(ExecutionStatus::is_final);
    fire.1 = fire.1.max(finished);
}

/// Fire claims deleted per statement when purging.
const PURGE_CHUNK: i64 = 5000;

#[async_trait]
impl FireStore for SqlStore {
    async fn record_fires(&self, fires: &[FireRecord]) -> Result<Vec<FireOutcome>, StoreError> {
        conflict::retrying(|| record_fires_once(&self.db, fires)).await
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
        conflict::retrying(|| async {
            let mut tx = self.db.begin().await?;
            let out = admit_all(&mut tx, fires, now).await?;
            tx.commit().await?;
            Ok(out)
        })
        .await
    }

    async fn admit_ahead(
        &self,
        fires: &[GuardedFire],
        now: DateTime<Utc>,
    ) -> Result<Vec<bool>, StoreError> {
        if fires.is_empty() {
            return Ok(Vec::new());
        }
        conflict::retrying(|| async {
            let mut tx = self.db.begin().await?;
            let judged = judge_ahead(&mut tx, fires, now).await?;
            tx.commit().await?;
            Ok(judged)
        })
        .await
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
        conflict::retrying(|| async {
            let job = first.job_name.clone();
            let mut tx = self.db.begin().await?;
            // The job's row first, as every admission locks it, then the rows judged under it.
            lock_jobs(&mut tx, &[job.as_str()]).await?;
            let recorded = insert_executions(&mut tx, &rows.iter().collect::<Vec<_>>()).await?;
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
            };
            let mut admitted = admit_all(&mut tx, std::slice::from_ref(&fire), now).await?;
            tx.commit().await?;
            Ok(admitted.pop().expect("one fire, one decision"))
        })
        .await
    }

    async fn instant_counters(&self) -> Result<InstantCounters, StoreError> {
        // One statement, one snapshot: the two counters are rows of their own (a stalled
        // job write holds back no cancel) but are read together.
        let q = Sql::new(
            "SELECT r.revision, c.cancels FROM job_revision r, cancel_counter c \
             WHERE r.id = 1 AND c.id = 1",
        );
        let row = &self.db.fetch_all(q).await?[0];
        Ok(InstantCounters {
            job_revision: row.at(0)?,
            cancels: row.at(1)?,
        })
    }

    async fn no_longer_pending(&self, traces: &[String]) -> Result<Vec<String>, StoreError> {
        let mut gone = Vec::new();
        for chunk in traces.chunks(MULTI_ROW) {
            let mut q = Sql::new(&format!(
                "SELECT trace_id FROM {} WHERE trace_id IN ",
                self.db.backend().executions_by_trace()
            ));
            q.list(chunk.iter()).push(" AND status <> 'PENDING'");
            for row in self.db.fetch_all(q).await? {
                gone.push(row.at(0)?);
            }
        }
        Ok(gone)
    }

    async fn withdraw_fires(&self, fires: &[Withdrawal]) -> Result<Vec<bool>, StoreError> {
        conflict::retrying(|| async {
            let mut tx = self.db.begin().await?;
            let mut withdrawn = Vec::with_capacity(fires.len());
            for w in fires {
                withdrawn.push(withdraw_in(&mut tx, w).await?);
            }
            tx.commit().await?;
            Ok(withdrawn)
        })
        .await
    }

    async fn fire_ends(
        &self,
        fires: &[(String, DateTime<Utc>)],
    ) -> Result<Vec<FireEnd>, StoreError> {
        // One snapshot for the rows and the claims: a fire recorded between two separate
        // reads would look claimed but rowless, that is ended, while it has not begun.
        let mut tx = self.db.begin().await?;
        let mut ended = Vec::new();
        for chunk in fires.chunks(MULTI_ROW) {
            // Each fire's rows are one range of the execution id index.
            let keys: Vec<String> = chunk
                .iter()
                .map(|(job, at)| scheduled_fire_key(job, *at))
                .collect();
            let mut q =
                Sql::new("SELECT execution_id, status, finish_time FROM job_execution WHERE ");
            for (i, key) in keys.iter().enumerate() {
                q.push(if i == 0 { "(" } else { " OR (" });
                push_fire_range(&mut q, key);
                q.push(")");
            }
            let mut rows: HashMap<&str, (bool, Option<DateTime<Utc>>)> = HashMap::new();
            let read = tx.fetch_all(q).await?;
            for row in &read {
                let id: String = row.at(0)?;
                let status: String = row.at(1)?;
                let finished: Option<DateTime<Utc>> = row.at(2)?;
                let Some(key) = keys.iter().find(|k| fire_key(&id) == k.as_str()) else {
                    continue;
                };
                fold_end(
                    rows.entry(key.as_str()).or_insert((true, None)),
                    &status,
                    finished,
                );
            }
            // A fire without rows has ended only if it was recorded (its claim and rows are
            // written together): its rows were pruned. Without its claim either, it is not
            // recorded yet, or withdrawn (and owed to the engine again).
            let rowless: Vec<&(String, DateTime<Utc>)> = chunk
                .iter()
                .zip(&keys)
                .filter(|(_, key)| !rows.contains_key(key.as_str()))
                .map(|(fire, _)| fire)
                .collect();
            let claimed = claimed(&mut tx, &rowless).await?;
            for ((job, at), key) in chunk.iter().zip(&keys) {
                let end = match rows.get(key.as_str()) {
                    Some((false, _)) => continue,
                    Some((true, end)) => *end,
                    None if claimed.contains(&(job.as_str(), *at)) => None,
                    None => continue,
                };
                ended.push(FireEnd {
                    job: job.clone(),
                    fire_time: *at,
                    end,
                });
            }
        }
        tx.commit().await?;
        Ok(ended)
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

/// Records `fires` in one transaction (see [`FireStore::record_fires`]).
async fn record_fires_once(db: &Db, fires: &[FireRecord]) -> Result<Vec<FireOutcome>, StoreError> {
    let mut tx = db.begin().await?;
    let behind = fixed_delays_behind(&mut tx, fires).await?;
    match record_unclaimed(&mut tx, fires, &behind).await {
        Ok(outcomes) => {
            tx.commit().await?;
            return Ok(outcomes);
        }
        // Some fire was recorded elsewhere (an ownership change, a child triggered by
        // another instance): redo the batch fire by fire, each under a savepoint,
        // skipping those.
        Err(StoreError::Duplicate(_)) => {
            tx.rollback().await?;
            tx = db.begin().await?;
        }
        Err(e) => return Err(e),
    }
    let behind = fixed_delays_behind(&mut tx, fires).await?;
    let mut outcomes = Vec::with_capacity(fires.len());
    for (fire, behind) in fires.iter().zip(behind) {
        if let Some(latest) = behind {
            outcomes.push(FireOutcome::Behind(latest));
            continue;
        }
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

/// The common case of a batch of fires: nobody else recorded any of them, so all claims and
/// rows go in with a few multi-row statements.
async fn record_unclaimed(
    tx: &mut Tx,
    fires: &[FireRecord],
    behind: &[Option<DateTime<Utc>>],
) -> Result<Vec<FireOutcome>, StoreError> {
    let due = || {
        fires
            .iter()
            .zip(behind)
            .filter(|(_, b)| b.is_none())
            .map(|(f, _)| f)
    };
    let claims: Vec<&FireClaim> = due().filter_map(|f| f.claim.as_ref()).collect();
    insert_claims(tx, &claims).await?;
    let rows: Vec<&NewExecution> = due().flat_map(|f| &f.rows).collect();
    let mut recorded = insert_executions(tx, &rows).await?.into_iter();
    Ok(fires
        .iter()
        .zip(behind)
        .map(|(f, behind)| match behind {
            Some(latest) => FireOutcome::Behind(*latest),
            None => FireOutcome::Recorded(recorded.by_ref().take(f.rows.len()).collect()),
        })
        .collect())
}

/// For each of `fires`, the instant of its job's latest fire when it is a `FIXED_DELAY` fire
/// that must wait for it ([`FireClaim::fixed_delay`]); `None` for every other fire. The jobs'
/// rows are locked first, so two schedulers that both believe they own a job (a membership
/// change seen at different moments) record its fires one after the other, and the second
/// sees the first. Of a job's fires in one batch only the first can be recorded: every later
/// one waits for it, which has not even begun. Costs nothing for a batch without such fires.
async fn fixed_delays_behind(
    tx: &mut Tx,
    fires: &[FireRecord],
) -> Result<Vec<Option<DateTime<Utc>>>, StoreError> {
    let delayed: Vec<(&FireClaim, u32)> = fires
        .iter()
        .filter_map(|f| f.claim.as_ref())
        .filter_map(|c| c.fixed_delay.map(|d| (c, d)))
        .collect();
    let mut behind = vec![None; fires.len()];
    if delayed.is_empty() {
        return Ok(behind);
    }
    let mut jobs: Vec<&str> = delayed.iter().map(|(c, _)| c.job_name.as_str()).collect();
    jobs.sort_unstable();
    jobs.dedup();
    // Plain reads after the lock: the transaction's snapshot starts at the first of them,
    // after every fire recorded under the lock before it was granted.
    lock_job_rows(tx, &jobs).await?;
    // Each job's fire this batch records (judged so far).
    let mut first: HashMap<&str, DateTime<Utc>> = HashMap::new();
    for (fire, slot) in fires.iter().zip(behind.iter_mut()) {
        let Some((claim, interval)) = fire
            .claim
            .as_ref()
            .and_then(|c| c.fixed_delay.map(|d| (c, d)))
        else {
            continue;
        };
        if let Some(&earlier) = first.get(claim.job_name.as_str()) {
            // The same instant twice is the claim's own conflict.
            *slot = (earlier != claim.fire_time).then_some(earlier);
            continue;
        }
        match behind_its_latest(tx, claim, interval).await? {
            Some(latest) => *slot = Some(latest),
            None => {
                first.insert(claim.job_name.as_str(), claim.fire_time);
            }
        }
    }
    Ok(behind)
}

/// The instant of the latest fire `claim`'s `FIXED_DELAY` job has in the database when the
/// claim must wait for it: that fire has not ended `interval` seconds before the claim's
/// instant, or it is later than the claim. `None`: the claim may be recorded.
async fn behind_its_latest(
    tx: &mut Tx,
    claim: &FireClaim,
    interval: u32,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    let mut q = Sql::new("SELECT fire_time FROM job_fire WHERE job_name = ");
    q.bind(claim.job_name.as_str())
        .push(" ORDER BY fire_time DESC LIMIT 1");
    let Some(latest) = tx
        .fetch_all(q)
        .await?
        .first()
        .map(|r| r.at(0))
        .transpose()?
    else {
        return Ok(None);
    };
    let latest: DateTime<Utc> = latest;
    if latest >= claim.fire_time {
        // The same instant is the claim's own conflict (already fired); a later one means
        // this fire's time has passed.
        return Ok((latest > claim.fire_time).then_some(latest));
    }
    let mut q = Sql::new("SELECT status, finish_time FROM job_execution WHERE ");
    push_fire_range(&mut q, &scheduled_fire_key(&claim.job_name, latest));
    // The end as `fire_ends` reads it for the engine (`fold_end`), so both derive the same
    // instant.
    let mut fire = (true, None);
    for row in tx.fetch_all(q).await? {
        let status: String = row.at(0)?;
        fold_end(&mut fire, &status, row.at(1)?);
    }
    let (ended, end) = fire;
    let due = delay_restart(end.unwrap_or(latest), interval);
    let waits = !ended || due.is_none_or(|due| claim.fire_time < due);
    Ok(waits.then_some(latest))
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
