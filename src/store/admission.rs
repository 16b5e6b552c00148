//! Guarded admission (see [`FireStore::admit`](super::FireStore::admit)): the fires of SKIP
//! and COVER jobs due at one instant are decided in one transaction, one after the other,
//! each against its job's runs as the decisions before it left them.
//!
//! The cost is what the calls of the instant wait for, so it is a few statements whatever the
//! number of fires: one lock of the jobs' rows, one read of their revisions, one read of their
//! runs, then the decisions in memory. A fire that runs writes nothing: its rows stay
//! PENDING, which is a run of its job for every later admission (its instant has come), and
//! its attempts write RUNNING with their call as ALLOW fires do. Only skips and covers move
//! rows, together at the end, rows moved alike in one statement (at 1,000 fires of one
//! instant, a statement per fire took 250 ms, and a RUNNING per fire 70 ms). A row moved
//! twice in a batch ends as its last move leaves it, as applying them one by one would.
//!
//! **Judged ahead.** Even a few statements at the instant, beside that second's other writes,
//! doubled the delay of guarded fires against ALLOW ones. Most fires find their job idle, and
//! can be judged before their instant ([`judge_ahead`]): [`ADMIT_AHEAD`] before it, under the
//! same locks (the lock bumps the job row's `lock_seq`, see `steps::lock_job_rows`), a fire
//! whose job has no run is admitted, and nothing else is written; every other
//! fire is left to be admitted at its instant as above. For this to hold, a cron fire counts
//! as a run of its job from `ADMIT_AHEAD` before its instant: an admission after the judgment
//! (a manual run, a child, a late fire) sees it and is skipped, or covers it (it may have been
//! called, so its stop is waited for). And nothing can make a job busy between its last
//! fire and the judgment except another admission, seen by it: earlier instants of the job
//! are at least a second older, so their rows are runs when it reads.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, SecondsFormat, Utc};

use super::columns::execution;
use super::sql::{Sql, Tx};
use super::steps::{StoredJob, changes_of, count_cancels, lock_jobs, record_stopping, withdraw_in};
use super::{ADMIT_AHEAD, Admitted, GuardedFire, MULTI_ROW, StoreError};
use crate::jobs::{Execution, ExecutionStatus, JobChange, OverlapPolicy, TriggerType, fire_key};

/// Decides `fires` in order under their jobs' row locks, taken here.
pub(super) async fn admit_all(
    tx: &mut Tx,
    fires: &[GuardedFire],
    now: DateTime<Utc>,
) -> Result<Vec<Admitted>, StoreError> {
    let (stored, mut open) = read_jobs(tx, fires, now).await?;
    let mut moves = Moves::default();
    let mut out = Vec::with_capacity(fires.len());
    for fire in fires {
        let current = stored.is_current(fire);
        out.push(admit_one(tx, fire, current, &mut open, &mut moves, now).await?);
    }
    moves.apply(tx).await?;
    Ok(out)
}

/// Judges `fires` ahead of their instant under their jobs' row locks: `true` for each fire
/// whose job is at its revision, whose rows are all still PENDING, and which has no other
/// run at `now`, so it may be called at its instant with nothing more written. Writes only
/// the locks; a fire judged `false` is admitted at its instant.
pub(super) async fn judge_ahead(
    tx: &mut Tx,
    fires: &[GuardedFire],
    now: DateTime<Utc>,
) -> Result<Vec<bool>, StoreError> {
    let (stored, open) = read_jobs(tx, fires, now).await?;
    let idle = |fire: &GuardedFire| {
        // Judged earlier, an admission between the judgment and `ADMIT_AHEAD` before the
        // instant would not see the fire as a run.
        if !stored.is_current(fire) || fire.rows.iter().any(|r| r.fire_time > now + ADMIT_AHEAD) {
            return false;
        }
        let runs = open.get(&fire.job).map(Vec::as_slice).unwrap_or_default();
        let (pending, others) = judged_against(fire, runs, now);
        pending.len() == fire.rows.len() && others.is_empty()
    };
    Ok(fires.iter().map(idle).collect())
}

/// The jobs of guarded fires as stored: their rows (locked), and the writes and deletions in
/// the change log of those whose row changed or went since a fire was planned.
struct Stored {
    rows: HashMap<String, StoredJob>,
    changes: Vec<JobChange>,
}

impl Stored {
    /// Whether `fire` may still be admitted under its job as stored: a manual run or a child
    /// while the job exists; a cron fire while its job is at the revision it was planned
    /// under, or changed only after its instant: every change since, not only the last (a
    /// change overtakes the fires due at or after it, see [`JobBook`](crate::jobs::JobBook)).
    /// A job gone with no deletion left in the log is taken as deleted before the instant.
    fn is_current(&self, fire: &GuardedFire) -> bool {
        let row = self.rows.get(&fire.job);
        let Some(handed) = fire.revision else {
            return row.is_some();
        };
        if let Some(job) = row.filter(|j| j.revision == handed) {
            return job.enabled || !fire.scheduled;
        }
        let Some(instant) = fire.rows.first().map(|r| r.fire_time) else {
            return false;
        };
        let written = row.map(|j| JobChange {
            name: fire.job.clone(),
            revision: j.revision,
            at: j.updated_at,
        });
        let mut changes = written
            .iter()
            .chain(self.changes.iter().filter(|d| d.name == fire.job))
            .peekable();
        changes.peek().is_some() && !changes.any(|c| c.overtakes(handed, instant))
    }
}

/// Each job of `fires` as stored, their rows locked, and their runs.
async fn read_jobs(
    tx: &mut Tx,
    fires: &[GuardedFire],
    now: DateTime<Utc>,
) -> Result<(Stored, HashMap<String, Vec<Execution>>), StoreError> {
    let mut jobs: Vec<&str> = fires.iter().map(|f| f.job.as_str()).collect();
    jobs.sort_unstable();
    jobs.dedup();
    let rows = lock_jobs(tx, &jobs).await?;
    let mut changed: Vec<&str> = fires
        .iter()
        .filter(|f| {
            f.revision
                .is_some_and(|r| rows.get(&f.job).is_none_or(|j| j.revision != r))
        })
        .map(|f| f.job.as_str())
        .collect();
    changed.sort_unstable();
    changed.dedup();
    let changes = changes_of(tx, &changed).await?;
    let open = open_runs(tx, &jobs, now).await?;
    Ok((Stored { rows, changes }, open))
}

/// Of its job's `runs`, `fire`'s own rows still PENDING, and the other runs it is judged
/// against (all but fires claimed for an instant more than [`ADMIT_AHEAD`] away).
fn judged_against(
    fire: &GuardedFire,
    runs: &[Execution],
    now: DateTime<Utc>,
) -> (Vec<String>, Vec<Execution>) {
    let own: HashSet<&str> = fire.rows.iter().map(|r| r.trace_id.as_str()).collect();
    // The fire's other ranges (one range admitted alone, as compensation dispatches it) are
    // the same fire, never runs it is judged against.
    let fires: HashSet<&str> = fire
        .rows
        .iter()
        .map(|r| fire_key(&r.execution_id))
        .collect();
    let (mine, others): (Vec<&Execution>, Vec<&Execution>) =
        runs.iter().partition(|e| own.contains(e.trace_id.as_str()));
    let others: Vec<&Execution> = others
        .into_iter()
        .filter(|e| !fires.contains(fire_key(&e.execution_id)))
        .collect();
    let pending = mine
        .into_iter()
        .filter(|e| e.status == ExecutionStatus::Pending)
        .map(|e| e.trace_id.clone())
        .collect();
    let others = others
        .into_iter()
        .filter(|e| !claimed_ahead(e, now))
        .cloned()
        .collect();
    (pending, others)
}

/// The runs of `jobs` at `now`, oldest first, by job: their PENDING and RUNNING rows except
/// fires claimed for an instant more than [`ADMIT_AHEAD`] away (see [`claimed_ahead`]), and
/// the rows of runs cancelled but still stopping (see [`Stopping`](super::Stopping)).
async fn open_runs(
    tx: &mut Tx,
    jobs: &[&str],
    now: DateTime<Utc>,
) -> Result<HashMap<String, Vec<Execution>>, StoreError> {
    // Along the status index: the open rows of all jobs are few, a job's history may be
    // millions. The unary `+` keeps SQLite's planner off the job_name index, which it prefers
    // without statistics; MySQL ignores it and picks by cost.
    let mut q = Sql::new(
        "SELECT * FROM job_execution WHERE status IN ('PENDING', 'RUNNING') AND +job_name IN ",
    );
    q.list(jobs.iter().copied())
        .push(
            " AND NOT (status = 'PENDING' AND trigger_type = 'CRON' AND retry_count = 0 \
             AND fire_time > ",
        )
        .bind(now + ADMIT_AHEAD)
        .push(")");
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

/// Decides one guarded fire, keeping `open` up to date for the fires after it and adding its
/// status moves to `moves`.
async fn admit_one(
    tx: &mut Tx,
    fire: &GuardedFire,
    current: bool,
    open: &mut HashMap<String, Vec<Execution>>,
    moves: &mut Moves,
    now: DateTime<Utc>,
) -> Result<Admitted, StoreError> {
    if !current {
        return Ok(match withdraw_in(tx, &fire.withdrawal).await? {
            true => Admitted::Withdrawn,
            false => Admitted::Gone,
        });
    }
    let runs = open.entry(fire.job.clone()).or_default();
    let (pending, others) = judged_against(fire, runs, now);
    if pending.is_empty() {
        return Ok(Admitted::Gone);
    }
    let newer: Vec<&Execution> = others.iter().filter(|e| later_instant(fire, e)).collect();
    let covered = match fire.policy {
        _ if others.is_empty() => Vec::new(),
        OverlapPolicy::Allow => Vec::new(),
        OverlapPolicy::Skip => {
            let why = format!(
                "not called: the job still runs {} (overlapPolicy SKIP)",
                traces(&others).join(", ")
            );
            return Ok(skip(runs, moves, &pending, &others, why));
        }
        OverlapPolicy::Cover if !newer.is_empty() => {
            let why = format!(
                "not called: the fire of {} replaced it (overlapPolicy COVER)",
                newer[0]
                    .fire_time
                    .to_rfc3339_opts(SecondsFormat::Millis, true)
            );
            return Ok(skip(runs, moves, &pending, &others, why));
        }
        OverlapPolicy::Cover => {
            let mut others = others;
            lock_untaken(tx, runs, &mut others).await?;
            cover(tx, runs, moves, &others, now).await?;
            others
        }
    };
    let rows = runs
        .iter()
        .filter(|e| pending.contains(&e.trace_id))
        .cloned()
        .collect();
    Ok(Admitted::Run { rows, covered })
}

/// COVER: the open runs among `others` are cancelled; those that may have been called stay in
/// `runs` as stopping until their executors confirm the stop: RUNNING rows, and the PENDING
/// rows of cron fires whose instant has come, which their attempts call before they write
/// RUNNING. (Other PENDING rows are taken by a compare-and-set before their call, which the
/// cancel makes fail.)
async fn cover(
    tx: &mut Tx,
    runs: &mut Vec<Execution>,
    moves: &mut Moves,
    others: &[Execution],
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let cancelled: Vec<String> = others
        .iter()
        .filter(|e| !e.status.is_final())
        .map(|e| e.trace_id.clone())
        .collect();
    let cancel = Move::to(ExecutionStatus::Cancelled)
        .because("cancelled: a newer fire replaced it (overlapPolicy COVER)")
        .finished(now);
    moves.push(&cancel, &cancelled);
    let called: Vec<&str> = others
        .iter()
        .filter(|e| e.may_have_been_called())
        .map(|e| e.trace_id.as_str())
        .collect();
    record_stopping(tx, &called, now).await?;
    runs.retain(|e| e.may_have_been_called() || !cancelled.contains(&e.trace_id));
    for e in runs.iter_mut().filter(|e| cancelled.contains(&e.trace_id)) {
        e.status = ExecutionStatus::Cancelled;
    }
    Ok(())
}

/// Reads again, under their row locks, the PENDING rows among `others` that are taken by a
/// compare-and-set before their call (retries, manual and child fires). The admission's read
/// is a snapshot: a row taken since is on its call, and is covered as a run that may have been
/// called (its stop waited for); a row not taken yet can no longer be, as its compare-and-set
/// waits for this transaction and then finds it cancelled. (The campaign found a retry taken
/// between the read and the cancel, and the covering fire called beside it.)
async fn lock_untaken(
    tx: &mut Tx,
    runs: &mut [Execution],
    others: &mut [Execution],
) -> Result<(), StoreError> {
    let untaken: Vec<&str> = others
        .iter()
        .filter(|e| e.status == ExecutionStatus::Pending && !e.may_have_been_called())
        .map(|e| e.trace_id.as_str())
        .collect();
    if untaken.is_empty() {
        return Ok(());
    }
    let mut q = Sql::new(&format!(
        "SELECT * FROM {} WHERE trace_id IN ",
        tx.backend().executions_by_trace()
    ));
    q.list(untaken.iter().copied())
        .push(tx.backend().lock_rows());
    let mut current = HashMap::new();
    for row in tx.fetch_all(q).await? {
        let e = execution(&row)?;
        current.insert(e.trace_id.clone(), e);
    }
    for e in others.iter_mut().chain(runs.iter_mut()) {
        if let Some(now) = current.get(&e.trace_id) {
            *e = now.clone();
        }
    }
    Ok(())
}

fn traces(runs: &[Execution]) -> Vec<String> {
    runs.iter().map(|e| e.trace_id.clone()).collect()
}

/// A fire not called beside open runs: its `pending` rows are recorded SKIPPED, saying `why`.
fn skip(
    runs: &mut Vec<Execution>,
    moves: &mut Moves,
    pending: &[String],
    others: &[Execution],
    why: String,
) -> Admitted {
    let running = traces(others);
    moves.push(&Move::to(ExecutionStatus::Skipped).because(&why), pending);
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
    Admitted::Skipped { rows, running }
}

/// A first attempt of a cron fire claimed for an instant more than [`ADMIT_AHEAD`] away: not
/// a run yet (from then on it may have been judged ahead, see the module documentation).
fn claimed_ahead(e: &Execution, now: DateTime<Utc>) -> bool {
    first_cron_attempt(e) && e.fire_time > now + ADMIT_AHEAD
}

fn first_cron_attempt(e: &Execution) -> bool {
    e.status == ExecutionStatus::Pending
        && e.trigger_type == TriggerType::Cron
        && e.retry_count == 0
}

/// Whether `e` is a later instant's fire of `fire`'s job, for a cron fire: a fire admitted
/// late (its instance paused, or behind) never covers the fire after it; it is superseded.
fn later_instant(fire: &GuardedFire, e: &Execution) -> bool {
    fire.scheduled
        && e.trigger_type == TriggerType::Cron
        && fire
            .rows
            .first()
            .is_some_and(|own| e.fire_time > own.fire_time)
}

/// A move of open rows to a status, with the message and finish it sets.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Move {
    status: ExecutionStatus,
    error: Option<String>,
    finished: Option<DateTime<Utc>>,
}

impl Move {
    fn to(status: ExecutionStatus) -> Self {
        Self {
            status,
            error: None,
            finished: None,
        }
    }

    fn because(self, error: &str) -> Self {
        Self {
            error: Some(error.to_string()),
            ..self
        }
    }

    fn finished(self, at: DateTime<Utc>) -> Self {
        Self {
            finished: Some(at),
            ..self
        }
    }

    /// This move followed by `next`: `next`'s status, each column the last value set.
    fn then(self, next: Move) -> Self {
        Self {
            status: next.status,
            error: next.error.or(self.error),
            finished: next.finished.or(self.finished),
        }
    }

    /// Moves the rows among `traces` that are still open.
    async fn apply(&self, tx: &mut Tx, traces: &[String]) -> Result<u64, StoreError> {
        let mut set = vec![("status", self.status.as_str().into())];
        if let Some(e) = &self.error {
            set.push(("error_message", e.as_str().into()));
        }
        if let Some(f) = self.finished {
            set.push(("finish_time", f.into()));
        }
        let mut q = Sql::new(&format!(
            "UPDATE {} SET ",
            tx.backend().executions_by_trace()
        ));
        q.set(set)
            .push(" WHERE trace_id IN ")
            .list(traces.iter())
            .push(" AND status IN ('PENDING', 'RUNNING')");
        Ok(tx.execute(q).await?)
    }
}

/// The moves of one admission, in the order decided (see the module documentation).
#[derive(Default)]
struct Moves(Vec<(String, Move)>);

impl Moves {
    fn push(&mut self, m: &Move, traces: &[String]) {
        self.0.extend(traces.iter().map(|t| (t.clone(), m.clone())));
    }

    /// Each row's moves folded into one, then rows moved alike in one statement (per
    /// [`MULTI_ROW`] rows).
    async fn apply(self, tx: &mut Tx) -> Result<(), StoreError> {
        let mut cancelled = 0;
        for (m, traces) in self.grouped() {
            for chunk in traces.chunks(MULTI_ROW) {
                let moved = m.apply(tx, chunk).await?;
                if m.status == ExecutionStatus::Cancelled {
                    cancelled += moved as usize;
                }
            }
        }
        count_cancels(tx, cancelled).await
    }

    fn grouped(self) -> Vec<(Move, Vec<String>)> {
        let mut order: Vec<String> = Vec::new();
        let mut folded: HashMap<String, Move> = HashMap::new();
        for (trace, m) in self.0 {
            match folded.remove(&trace) {
                Some(prev) => {
                    folded.insert(trace, prev.then(m));
                }
                None => {
                    order.push(trace.clone());
                    folded.insert(trace, m);
                }
            }
        }
        let mut groups: Vec<(Move, Vec<String>)> = Vec::new();
        for trace in order {
            let m = folded.remove(&trace).expect("every trace folded");
            match groups.iter_mut().find(|(g, _)| *g == m) {
                Some((_, traces)) => traces.push(trace),
                None => groups.push((m, vec![trace])),
            }
        }
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use ExecutionStatus::{Cancelled, Skipped};

    fn at(secs: i64) -> DateTime<Utc> {
        let start: DateTime<Utc> = "2026-03-01T00:00:00Z".parse().unwrap();
        start + chrono::Duration::seconds(secs)
    }

    fn traces(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn rows_moved_alike_share_a_statement_and_a_row_moved_twice_ends_as_its_last_move() {
        let mut moves = Moves::default();
        let skip = |why: &str| Move::to(Skipped).because(why);
        moves.push(&skip("x runs"), &traces(&["a", "b"]));
        moves.push(&skip("y runs"), &traces(&["c"]));
        moves.push(&skip("x runs"), &traces(&["d"]));
        let cancel = Move::to(Cancelled).finished(at(1));
        moves.push(&cancel, &traces(&["b"]));
        let groups = moves.grouped();
        assert_eq!(groups.len(), 3, "{groups:?}");
        assert_eq!(groups[0], (skip("x runs"), traces(&["a", "d"])));
        assert_eq!(groups[1].1, traces(&["b"]));
        assert_eq!(
            groups[1].0,
            Move {
                status: Cancelled,
                error: Some("x runs".into()),
                finished: Some(at(1)),
            },
            "skipped, then cancelled: the cancel's status, each column's last value"
        );
        assert_eq!(groups[2], (skip("y runs"), traces(&["c"])));
    }
}
