//! Launching recorded fires: at their instant for cron fires recorded ahead (from the
//! [`WaitingRoom`]), at once for everything else (manual runs, children). Three things happen
//! between the instant and the calls:
//!
//! 1. **The definition is still current, the rows still PENDING** ([`InstantCheck`], one
//!    read of one row). A cron fire was planned under the definition the engine had when it
//!    handed the fire out. A fire whose job was edited, disabled or deleted meanwhile (the
//!    engine's book or the database says so) is withdrawn, its claim and rows deleted, and
//!    the engine owes its instant again under the job's current definition. So no call of an
//!    old definition is made for an instant after the API answered the edit. A row cancelled
//!    through another instance is not called.
//! 2. **Guarded fires are admitted.** Fires of SKIP and COVER jobs are judged together
//!    [`ADMIT_AHEAD`] before their instant (see
//!    [`FireStore::admit_ahead`](crate::store::FireStore::admit_ahead)): those whose job has
//!    no run then are called at the instant like ALLOW fires, with nothing more written. The
//!    others are admitted at the instant, in one transaction (see
//!    [`FireStore::admit`](crate::store::FireStore::admit)), which locks their jobs' rows and
//!    decides each fire against its job's open runs: SKIPPED, or RUNNING after cancelling the
//!    covered runs. A covered run still going at its executor is asked to stop, and the new
//!    fire's calls wait until it has (at most the new job's timeout; then the new fire is
//!    recorded SKIPPED): COVER never runs two at once. Both happen in one lane, instant after
//!    instant, so a fire's judgment is known when its instant comes.
//! 3. **The attempts start**, one per row.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{Notify, mpsc};

use super::admission::Hold;
use super::attempt::{Attempt, Attempts, Earned, Start};
use super::instant::InstantCheck;
use super::series;
use super::tasks::Tasks;
use super::verdict::Verdict;
use super::waiting::{WaitingFire, WaitingRoom};
use super::withdraw::{Owed, Withdraw};
use crate::clock::Clock;
use crate::jobs::{Execution, ExecutionStatus, JobBook, JobDefinition, OverlapPolicy, TriggerType};
use crate::store::{ADMIT_AHEAD, Admitted, GuardedFire, Store, Withdrawal};

/// A fire recorded and ready to be launched: cron fires from the waiting room, manual runs,
/// children.
pub struct Ready {
    pub job: Arc<JobDefinition>,
    pub rows: Vec<Execution>,
    pub hold: Hold,
    /// The cron instant it was claimed for (`None` for other fires).
    pub claimed: Option<DateTime<Utc>>,
}

/// The work of the admission lane, in instant order.
enum Lane {
    /// The guarded fires recorded for an instant, to judge ahead of it.
    Judge(Vec<(Arc<JobDefinition>, Vec<Execution>)>),
    /// The guarded fires of an instant that has come, to launch.
    Launch(Vec<Ready>),
}

/// A fire judged ahead: its job, the revision it was judged under, its instant.
type Judged = (String, i64, DateTime<Utc>);

pub struct Launcher {
    pub clock: Clock,
    pub store: Arc<dyn Store>,
    /// `store` on a connection of its own, for the check at each instant.
    pub instant_store: Arc<dyn Store>,
    pub book: Arc<JobBook>,
    pub waiting: Arc<WaitingRoom>,
    pub attempts: Arc<Attempts>,
    pub tasks: Arc<Tasks>,
    pub withdraw: Arc<Withdraw>,
    /// Wakes the engine to reload jobs (a definition changed that it does not know yet).
    pub reload: Arc<Notify>,
    /// What is checked at each instant before its calls.
    pub instant: InstantCheck,
}

impl Launcher {
    /// Launches the waiting room's fires at their instants, and the children verdicts earn,
    /// until shutdown; fires claimed for instants after the drain deadline stay PENDING for
    /// compensation.
    pub async fn run(self: Arc<Self>, mut children: mpsc::UnboundedReceiver<Earned>) {
        // Nothing that waits on the database or an executor runs in this loop, or one slow
        // admission would hold back every later instant: guarded fires are admitted in order
        // in their own lane, children and covers in their own tasks.
        let (lane, admissions) = mpsc::unbounded_channel();
        self.tasks.spawn(self.clone().admission_lane(admissions));
        // The last instant whose guarded fires were handed to the lane to judge.
        let mut judged: Option<DateTime<Utc>> = None;
        loop {
            if self.tasks.is_stopping() {
                let deadline = self.tasks.deadline().unwrap_or_else(|| self.clock.now());
                let left = self.waiting.take_after(deadline);
                if !left.is_empty() {
                    tracing::info!(
                        fires = left.len(),
                        "shutting down: fires claimed ahead beyond the grace period stay PENDING; compensation dispatches them after their lease"
                    );
                }
                if self.waiting.is_empty() {
                    return;
                }
            }
            let to_judge = self.waiting.next_guarded(judged);
            let next = match (self.waiting.next(), to_judge) {
                (Some(at), Some(j)) => Some(at.min(j - ADMIT_AHEAD)),
                (at, j) => at.or(j.map(|j| j - ADMIT_AHEAD)),
            };
            tokio::select! {
                _ = self.clock.sleep_until(next.unwrap_or_default()), if next.is_some() => {}
                _ = self.waiting.changed.notified() => {}
                Some((rows, hold)) = children.recv() => {
                    let this = self.clone();
                    self.tasks.spawn(async move { this.launch_children(rows, hold).await });
                }
                _ = self.tasks.stopping(), if !self.tasks.is_stopping() => {}
            }
            let now = self.clock.now();
            if let Some(at) = to_judge.filter(|at| *at - ADMIT_AHEAD <= now) {
                judged = Some(at);
                // An instant already come is admitted at once instead.
                if at > now {
                    let _ = lane.send(Lane::Judge(self.waiting.guarded_at(at)));
                }
            }
            let due = self.waiting.take_due(now);
            if !due.is_empty() {
                let guarded = self.launch_claimed(due).await;
                if !guarded.is_empty() {
                    let _ = lane.send(Lane::Launch(guarded));
                }
            }
        }
    }

    /// Judges the guarded fires of each instant ahead of it, and launches them at it, one
    /// instant after the other: a fire judged idle starts at once, the others are admitted.
    async fn admission_lane(self: Arc<Self>, mut work: mpsc::UnboundedReceiver<Lane>) {
        let mut idle: HashSet<Judged> = HashSet::new();
        while let Some(next) = work.recv().await {
            match next {
                Lane::Judge(fires) => idle.extend(self.judge(fires).await),
                Lane::Launch(fires) => {
                    let latest = fires.iter().filter_map(|f| f.claimed).max();
                    // A judgment holds for the moments around the instant only: a fire
                    // launched later (its instance was paused, or far behind) is admitted.
                    let now = self.clock.now();
                    let (ready, rest): (Vec<Ready>, Vec<Ready>) =
                        fires.into_iter().partition(|f| {
                            f.claimed.is_some_and(|at| {
                                now <= at + ADMIT_AHEAD
                                    && idle.remove(&(f.job.name().to_string(), f.job.revision, at))
                            })
                        });
                    for fire in ready {
                        self.start(&fire.job, fire.rows, Start::Claimed, &fire.hold);
                    }
                    if let Some(latest) = latest {
                        // Judged fires withdrawn before their instant.
                        idle.retain(|(_, _, at)| *at > latest);
                    }
                    if !rest.is_empty() {
                        self.admit(rest).await;
                    }
                }
            }
        }
    }

    /// Judges guarded fires ahead of their instant; returns those that may simply be called
    /// then. A fire the database does not judge is admitted at its instant.
    async fn judge(&self, fires: Vec<(Arc<JobDefinition>, Vec<Execution>)>) -> Vec<Judged> {
        let guarded: Vec<GuardedFire> = fires
            .iter()
            .map(|(job, rows)| self.guarded(job, rows, rows.first().map(|r| r.fire_time)))
            .collect();
        let judged = match self.store.admit_ahead(&guarded, self.clock.now()).await {
            Ok(judged) => judged,
            Err(e) => {
                tracing::warn!(fires = fires.len(), error = %e, "guarded fires not judged ahead; they are admitted at their instant");
                return Vec::new();
            }
        };
        let idle: Vec<Judged> = fires
            .iter()
            .zip(judged)
            .filter(|(_, idle)| *idle)
            .filter_map(|((job, rows), _)| {
                let at = rows.first()?.fire_time;
                Some((job.name().to_string(), job.revision, at))
            })
            .collect();
        tracing::debug!(
            fires = fires.len(),
            idle = idle.len(),
            "guarded fires judged ahead of their instant"
        );
        idle
    }

    /// Launches cron fires at their instant; returns the guarded ones, to be admitted.
    async fn launch_claimed(&self, due: Vec<WaitingFire>) -> Vec<Ready> {
        let check = self
            .instant
            .check(self.instant_store.as_ref(), &self.book, &due);
        let found = tokio::select! {
            found = check => found,
            _ = self.tasks.halted() => {
                tracing::info!(
                    fires = due.len(),
                    "shutting down before the database answered: fires claimed ahead stay PENDING; compensation dispatches them after their lease"
                );
                return Vec::new();
            }
        };
        if found.revision_moved {
            self.reload.notify_one();
        }
        let mut ready = Vec::with_capacity(due.len());
        let mut withdrawn = Vec::new();
        for fire in due {
            let overtaken =
                found.overtakes(&fire) || self.book.overtakes(&fire.job, fire.fire_time);
            let mut rows = fire.rows.unwrap_or_default();
            rows.retain(|r| {
                let gone = found.gone_rows.contains(&r.trace_id);
                if gone {
                    tracing::info!(trace_id = %r.trace_id, job_name = %r.job_name, "not called: cancelled before its instant");
                }
                !gone
            });
            if rows.is_empty() {
                continue;
            }
            if overtaken {
                withdrawn.push((fire.job, fire.fire_time, rows));
            } else {
                ready.push(Ready {
                    job: fire.job,
                    rows,
                    hold: fire.hold,
                    claimed: Some(fire.fire_time),
                });
            }
        }
        self.withdraw(withdrawn);
        self.start_plain(ready)
    }

    /// Launches recorded fires now (manual runs, children, rows recovered by compensation).
    pub async fn launch(&self, fires: Vec<Ready>) {
        let guarded = self.start_plain(fires);
        if !guarded.is_empty() {
            self.admit(guarded).await;
        }
    }

    /// Starts the fires of ALLOW jobs; returns the guarded ones, which must be admitted.
    fn start_plain(&self, fires: Vec<Ready>) -> Vec<Ready> {
        let fires: Vec<Ready> = fires
            .into_iter()
            .filter_map(|f| self.unplanned(f))
            .collect();
        let (guarded, plain): (Vec<Ready>, Vec<Ready>) = fires
            .into_iter()
            .partition(|f| f.job.spec.overlap_policy != OverlapPolicy::Allow);
        for fire in plain {
            let start = match fire.claimed {
                Some(_) => Start::Claimed,
                None => Start::Take,
            };
            self.start(&fire.job, fire.rows, start, &fire.hold);
        }
        guarded
    }

    /// Takes out of `fire` the rows of a fire that found no executor: the FAILED row, which is
    /// alerted and counted, and the retry recorded with it, which starts here. `None` when
    /// nothing else is left.
    fn unplanned(&self, mut fire: Ready) -> Option<Ready> {
        let unplanned = |r: &Execution| r.status == ExecutionStatus::Failed || r.retry_count > 0;
        if !fire.rows.iter().any(unplanned) {
            return Some(fire);
        }
        let (failed, rows): (Vec<Execution>, Vec<Execution>) =
            fire.rows.into_iter().partition(unplanned);
        for row in failed {
            if row.status == ExecutionStatus::Failed {
                tracing::warn!(job_name = %row.job_name, trace_id = %row.trace_id, "no executor instance available; recorded FAILED");
                series::ended(&row.job_name, ExecutionStatus::Failed, None);
                self.attempts.outcomes.alerts.no_executor(&fire.job, &row);
                self.attempts
                    .outcomes
                    .alerts
                    .execution_final(&fire.job, &row);
            } else {
                self.start(&fire.job, vec![row], Start::Take, &fire.hold);
            }
        }
        fire.rows = rows;
        (!fire.rows.is_empty()).then_some(fire)
    }

    async fn launch_children(&self, rows: Vec<Execution>, hold: Hold) {
        let mut fires: Vec<Ready> = Vec::new();
        for row in rows {
            match fires
                .iter_mut()
                .find(|f| f.job.name().as_str() == row.job_name)
            {
                Some(f) => f.rows.push(row),
                None => {
                    // A child deleted meanwhile, or unreadable now: compensation settles its
                    // rows after their lease.
                    if let Ok(Some(job)) = self.store.get_job(&row.job_name).await {
                        fires.push(Ready {
                            job: Arc::new(job),
                            rows: vec![row],
                            hold: hold.clone(),
                            claimed: None,
                        });
                    }
                }
            }
        }
        self.launch(fires).await;
    }

    fn start(&self, job: &Arc<JobDefinition>, rows: Vec<Execution>, start: Start, hold: &Hold) {
        for row in rows {
            self.attempts.spawn(Attempt {
                job: job.clone(),
                row,
                start,
                hold: hold.clone(),
            });
        }
    }

    /// Withdraws cron fires a change overtook: their claims and rows are deleted, then their
    /// instants are owed again to the engine.
    fn withdraw(&self, fires: Vec<(Arc<JobDefinition>, DateTime<Utc>, Vec<Execution>)>) {
        for (job, at, rows) in fires {
            tracing::info!(job_name = %job.name(), fire_time = %at, "fire withdrawn at its instant: the job changed since it was claimed");
            self.withdraw
                .take_back(job.name().as_str(), vec![(at, rows)]);
        }
    }

    /// Admits guarded fires in one transaction and starts what it lets run.
    async fn admit(&self, fires: Vec<Ready>) {
        let guarded: Vec<GuardedFire> = fires
            .iter()
            .map(|f| self.guarded(&f.job, &f.rows, f.claimed))
            .collect();
        let now = self.clock.now();
        let admitted = match self.store.admit(&guarded, now).await {
            Ok(admitted) => admitted,
            Err(e) => {
                tracing::error!(fires = fires.len(), error = %e, "guarded fires not admitted; their rows stay PENDING for compensation");
                return;
            }
        };
        for (fire, outcome) in fires.into_iter().zip(admitted) {
            self.admitted(fire, outcome).await;
        }
    }

    /// The admission's view of a fire (see [`guarded_fire`]).
    fn guarded(
        &self,
        job: &JobDefinition,
        rows: &[Execution],
        claimed: Option<DateTime<Utc>>,
    ) -> GuardedFire {
        guarded_fire(self.attempts.outcomes.planner.me(), job, rows, claimed)
    }

    /// Starts an admitted fire. A COVER fire first stops what it covers, in the background:
    /// the launcher goes on with the next instants, and a manual trigger is answered with
    /// its admitted rows.
    pub async fn admitted(&self, fire: Ready, outcome: Admitted) {
        let name = fire.job.name().to_string();
        let start = match fire.claimed {
            Some(_) => Start::Claimed,
            None => Start::Take,
        };
        let outcome = match (start, outcome) {
            (Start::Claimed, Admitted::Run { rows, covered }) => Admitted::Run {
                rows: still_held(&fire.rows, rows),
                covered,
            },
            (_, outcome) => outcome,
        };
        match outcome {
            Admitted::Run { rows, covered } if covered.is_empty() => {
                self.start(&fire.job, rows, start, &fire.hold);
            }
            Admitted::Run { rows, covered } => {
                for c in covered.iter().filter(|c| !c.status.is_final()) {
                    series::ended(&c.job_name, ExecutionStatus::Cancelled, None);
                }
                let (attempts, job, hold) = (self.attempts.clone(), fire.job, fire.hold);
                self.tasks.spawn(async move {
                    cover(&attempts, &job, covered, rows, start, hold).await;
                });
            }
            Admitted::Skipped { running, .. } => {
                metrics::counter!("scheduler_overlap_skipped_total", "job_name" => name.clone())
                    .increment(1);
                tracing::debug!(job_name = %name, running = running.join(", "), "fire recorded SKIPPED (overlap policy)");
            }
            Admitted::Withdrawn => {
                tracing::info!(job_name = %name, "fire withdrawn at admission: the job changed since it was claimed");
                if let Some(at) = fire.claimed {
                    let _ = self.withdraw.owed.send(Owed::again(name, at));
                }
            }
            Admitted::Gone => {}
        }
    }
}

/// Of a claimed fire's `admitted` rows (as the admission read them), those still held as the
/// fire `recorded` them. A claimed row is called before its RUNNING is written, without a
/// compare-and-set, so a row whose lease changed since (this instance was late past it, and
/// compensation, perhaps its own, took the row over and dispatches it) is its new holder's to
/// call: called here as well, it ran twice (campaign seed 29).
fn still_held(recorded: &[Execution], admitted: Vec<Execution>) -> Vec<Execution> {
    admitted
        .into_iter()
        .filter(|row| {
            let held = recorded
                .iter()
                .any(|r| r.trace_id == row.trace_id && r.lease() == row.lease());
            if !held {
                tracing::info!(trace_id = %row.trace_id, job_name = %row.job_name, "admitted, but taken over meanwhile; its new holder calls it");
            }
            held
        })
        .collect()
}

/// COVER: stops the runs `covered` (cancelled for the fire whose `rows` were admitted, or
/// cancelled before and still stopping), and starts its calls once every one has stopped.
/// Each confirmed stop is recorded, so later fires stop waiting for it. A run that does not
/// stop within the job's timeout leaves the new fire SKIPPED, uncalled (and stays stopping
/// for the fires after it); an executor that cannot be asked (no cancel endpoint) is the
/// documented exception, and the new fire runs beside it. A row of the new fire that a
/// newer fire cancelled meanwhile is not called.
async fn cover(
    attempts: &Arc<Attempts>,
    job: &Arc<JobDefinition>,
    covered: Vec<Execution>,
    rows: Vec<Execution>,
    start: Start,
    hold: Hold,
) {
    let bound = attempts.clock.now() + chrono::Duration::seconds(job.spec.timeout_seconds.into());
    // A run that cannot have been called was stopped by its cancel. An admitted cron fire's
    // rows stay PENDING while they are called: they are asked like RUNNING ones, and so are
    // runs cancelled before and still stopping. All are asked at once: a run slow to answer
    // its cancel does not hold back the ask of another whose call may still be on its way.
    let asked = covered
        .iter()
        .filter(|r| r.status == ExecutionStatus::Cancelled || r.may_have_been_called())
        .map(|run| async move { (run, stopped_by(attempts, run, bound).await) });
    let answers = futures::future::join_all(asked).await;
    let stopped: Vec<String> = answers
        .iter()
        .filter(|(_, stopped)| *stopped)
        .map(|(run, _)| run.trace_id.clone())
        .collect();
    let _ = attempts.executions.stops_confirmed(&stopped).await;
    if let Some((run, _)) = answers.iter().find(|(_, stopped)| !stopped) {
        let why = format!(
            "not called: the covered run {} did not stop within {}s (overlapPolicy COVER)",
            run.trace_id, job.spec.timeout_seconds
        );
        for row in &rows {
            // Unless compensation took it over while this instance was paused.
            let verdict = Verdict::new(ExecutionStatus::Skipped, why.clone()).while_held(row);
            let from = &[ExecutionStatus::Pending, ExecutionStatus::Running];
            attempts
                .conclude(job, row, from, verdict, None, &hold)
                .await;
        }
        return;
    }
    for row in rows {
        // Unread (the database does not answer), it is called: an executor told to stop it
        // before it arrives does not run it.
        let current = attempts.executions.get_execution(&row.trace_id).await;
        if matches!(current, Ok(None))
            || matches!(current, Ok(Some(ref now)) if now.status != row.status)
        {
            tracing::info!(trace_id = %row.trace_id, "not called: a newer fire covered it while it waited (overlapPolicy COVER)");
            continue;
        }
        attempts.spawn(Attempt {
            job: job.clone(),
            row,
            start,
            hold: hold.clone(),
        });
    }
}

/// Asks `run`'s executor to stop it and waits until it has (polling its status), at most
/// until `bound`. The row is read again first: an attempt may have named another executor
/// before the cancel (which no attempt can do after it).
async fn stopped_by(attempts: &Attempts, run: &Execution, bound: DateTime<Utc>) -> bool {
    let current = attempts.executions.get_execution(&run.trace_id).await;
    let run = match current {
        Ok(Some(now)) => now,
        _ => run.clone(),
    };
    let run = &run;
    let Some(mut answer) = attempts.stop(run).await else {
        return true; // never called: nothing runs
    };
    loop {
        if answer.stopped() {
            return true;
        }
        if attempts.clock.now() >= bound {
            return false;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        answer = match attempts.status(run).await {
            Some((_, probe)) => probe,
            None => return true,
        };
    }
}

/// The admission's view of a fire launched under `job` by instance `me`: `claimed` is its
/// cron instant, if claimed for one. A cron instant's first attempts, claimed or taken over by
/// compensation, are judged under the definition they are launched with: a change after
/// their instant (a delete landing between compensation's read of the job and the admission)
/// does not withdraw a fire that was due before it. Manual runs, children and retries only
/// need their job to exist.
fn guarded_fire(
    me: &str,
    job: &JobDefinition,
    rows: &[Execution],
    claimed: Option<DateTime<Utc>>,
) -> GuardedFire {
    let scheduled = rows
        .first()
        .is_some_and(|r| r.trigger_type == TriggerType::Cron && r.retry_count == 0);
    GuardedFire {
        job: job.name().to_string(),
        revision: scheduled.then_some(job.revision),
        policy: job.spec.overlap_policy,
        rows: rows.to_vec(),
        withdrawal: Withdrawal {
            instance: me.to_string(),
            job: job.name().to_string(),
            claimed,
            traces: rows.iter().map(|r| r.trace_id.clone()).collect(),
        },
        scheduled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cron_fire_taken_over_by_compensation_is_judged_under_its_definition() {
        let job = JobDefinition::stored(
            serde_json::json!({"name": "j", "serviceName": "s", "handler": "h",
                "cron": "* * * * * ?", "overlapPolicy": "COVER"}),
            "2026-01-01T00:00:00Z".parse().unwrap(),
        );
        let cron = row("abandoned", "a:1", "2026-01-01T00:00:13Z");
        assert_eq!(cron.trigger_type, TriggerType::Cron);
        let claimed = Some(cron.fire_time);
        // Claimed by its instance, or taken over (unclaimed) by compensation: the same.
        for at in [claimed, None] {
            let fire = guarded_fire("b:1", &job, std::slice::from_ref(&cron), at);
            assert_eq!((fire.revision, fire.scheduled), (Some(job.revision), true));
        }
        let manual = Execution {
            trigger_type: TriggerType::Manual,
            ..cron.clone()
        };
        let retry = Execution {
            retry_count: 1,
            ..cron
        };
        for other in [manual, retry] {
            let fire = guarded_fire("b:1", &job, &[other], None);
            assert_eq!((fire.revision, fire.scheduled), (None, false));
        }
    }

    fn row(trace: &str, holder: &str, due: &str) -> Execution {
        Execution {
            trace_id: trace.into(),
            scheduler_instance: Some(holder.into()),
            due_time: due.parse().unwrap(),
            ..Execution::for_tests(ExecutionStatus::Pending, 0)
        }
    }

    #[test]
    fn a_claimed_fire_calls_only_the_rows_still_held_as_it_recorded_them() {
        let recorded = [
            row("kept", "a:1", "2026-01-01T00:00:13Z"),
            row("taken", "a:1", "2026-01-01T00:00:13Z"),
            row("moved", "a:1", "2026-01-01T00:00:13Z"),
        ];
        let admitted = vec![
            row("kept", "a:1", "2026-01-01T00:00:13Z"),
            // Taken over by this instance's own compensation after its lease: a new due time.
            row("taken", "a:1", "2026-01-01T00:00:29.110Z"),
            row("moved", "b:1", "2026-01-01T00:00:29.110Z"),
        ];
        let called: Vec<String> = still_held(&recorded, admitted)
            .into_iter()
            .map(|r| r.trace_id)
            .collect();
        assert_eq!(called, ["kept"]);
    }
}
