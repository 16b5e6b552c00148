//! The scheduling engine (docs/design.md, "How it schedules"): which jobs this instance owns, and
//! firing them on time.
//!
//! One task holds the owned jobs' next fire times in a single ordered queue
//! ([`timers::FireSchedule`]) and sleeps until the earliest one. It wakes early when the
//! scheduler list changes (discovery push), when a job is changed through this instance, and
//! every `scheduler.job_refresh_millis` to check the shared job revision counter for changes
//! made through other instances. A reload reads only the jobs changed since the revision the
//! engine has (the store's change log) and reschedules just those, so one change costs the
//! same whatever the number of jobs; every job is read and synced again only at start-up, on
//! membership changes, and when the log cannot answer (see `Engine::refresh_jobs`). Ten
//! thousand jobs are ten thousand queue entries, not ten thousand tasks. Due fires are handed to the [`Dispatcher`] only with a place in its bounded
//! backlog each, and the loop never waits for room inside a hand-over: fires without room stay
//! queued here while the loop goes on watching for changes, so any number of owed fires (a
//! restart, a failover) flows through the bound and nothing waits on itself.

pub mod ownership;
pub mod standing;
pub mod timers;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::{OwnershipStrategy, Settings};
use crate::discovery::Discovery;
use crate::dispatch::{Dispatcher, Fire, Owed};
use crate::jobs::{Calendars, JobBook, JobDefinition};
use crate::store::{JobChanges, Store, StoreError};
use ownership::OwnershipRing;
use standing::{DatabaseWatch, Standing};
use timers::{DueFire, FireSchedule, MisfireRules, Step};

/// Due fires taken from the queue per step of a burst.
const DUE_SLICE: usize = 256;

/// The longest the loop hands out due fires before it looks at other events.
const PASS_LIMIT: Duration = Duration::from_secs(1);

/// How long after a local job change the engine reloads (changes within it share a reload).
const RELOAD_COALESCE: Duration = Duration::from_millis(100);

/// Up to this many jobs gained in one reload, their last fires are read one by one (a key
/// lookup each); beyond it, the recent fires of every job at once.
const GAINS_READ_ONE_BY_ONE: usize = 32;

/// What a reload came to.
#[derive(Debug)]
enum Reload {
    /// No job changed.
    Unchanged,
    /// The changed jobs were applied to the schedule; the fires their changes owe.
    Applied(Step),
    /// Every job was read again: the schedule needs a full sync.
    Full,
}

/// What the engine currently believes about the cluster, for the API's cluster view.
pub struct ClusterState {
    ring: RwLock<OwnershipRing>,
    owned: std::sync::atomic::AtomicUsize,
}

impl ClusterState {
    pub fn new(strategy: OwnershipStrategy) -> Self {
        Self {
            ring: RwLock::new(OwnershipRing::new(Vec::new(), strategy)),
            owned: Default::default(),
        }
    }

    pub fn ring(&self) -> OwnershipRing {
        self.ring.read().expect("ring lock").clone()
    }

    pub fn owned_jobs(&self) -> usize {
        self.owned.load(std::sync::atomic::Ordering::Relaxed)
    }
}

pub struct Engine {
    clock: Clock,
    store: Arc<dyn Store>,
    discovery: Arc<dyn Discovery>,
    dispatcher: Arc<Dispatcher>,
    cluster: Arc<ClusterState>,
    job_changes: Arc<Notify>,
    /// Instants the dispatcher owes back: fires it could not record, or withdrew at their
    /// instant because their job changed.
    owed: mpsc::UnboundedReceiver<Owed>,
    strategy: OwnershipStrategy,
    rules: MisfireRules,
    /// Fires due within this window are handed over (claimed) before their instant.
    ahead: chrono::Duration,
    refresh: Duration,
    /// Every job (owned or not: a membership change may hand any of them over), and the
    /// revision they are complete up to; shared with the dispatcher, which checks fires
    /// against it at their instant.
    book: Arc<JobBook>,
    /// The calendars jobs may name.
    calendars: Arc<Calendars>,
    /// Whether the database answers the job refreshes, and whether this instance stands in
    /// the scheduler list for it (`standing.rs`).
    database: DatabaseWatch,
    /// The standing to carry out (`true`: listed), applied in order by a task of its own so
    /// that the loop never waits for Nacos.
    listed: tokio::sync::watch::Sender<bool>,
}

/// What the engine is built from.
pub struct EngineParts {
    pub clock: Clock,
    pub store: Arc<dyn Store>,
    pub discovery: Arc<dyn Discovery>,
    pub dispatcher: Arc<Dispatcher>,
    pub cluster: Arc<ClusterState>,
    pub job_changes: Arc<Notify>,
    pub owed: mpsc::UnboundedReceiver<Owed>,
    pub book: Arc<JobBook>,
    pub calendars: Arc<Calendars>,
}

impl Engine {
    /// Loads the jobs into the book; fails when the database cannot be read (the instance is
    /// not ready).
    pub async fn load(settings: &Settings, parts: EngineParts) -> Result<Self, StoreError> {
        let EngineParts {
            clock,
            store,
            discovery,
            dispatcher,
            cluster,
            job_changes,
            owed,
            book,
            calendars,
        } = parts;
        // The revision first: changes made after it (maybe read by the load) come again in
        // the first incremental reload, which applies them as no-ops.
        let revision = store.job_revision().await?;
        book.replace(store.load_jobs().await?, revision);
        Ok(Self {
            clock,
            store,
            discovery,
            dispatcher,
            cluster,
            job_changes,
            owed,
            strategy: settings.scheduler.ownership,
            rules: MisfireRules {
                tolerance: chrono::Duration::milliseconds(
                    settings.scheduler.misfire_tolerance_millis as i64,
                ),
                threshold: chrono::Duration::seconds(
                    settings.scheduler.misfire_threshold_seconds as i64,
                ),
            },
            ahead: chrono::Duration::milliseconds(settings.scheduler.claim_ahead_millis as i64),
            refresh: Duration::from_millis(settings.scheduler.job_refresh_millis.get()),
            book,
            calendars,
            database: DatabaseWatch::new(
                Duration::from_millis(settings.scheduler.step_aside_after_millis),
                Instant::now(),
            ),
            listed: tokio::sync::watch::channel(true).0,
        })
    }

    pub async fn run(mut self, cancel: CancellationToken) {
        metrics::gauge!("scheduler_stepped_aside").set(0.0);
        let standing = {
            let (discovery, mut listed) = (self.discovery.clone(), self.listed.subscribe());
            tokio::spawn(async move {
                while listed.changed().await.is_ok() {
                    let now = *listed.borrow_and_update();
                    if discovery.stand(now).await {
                        metrics::gauge!("scheduler_stepped_aside").set(if now { 0.0 } else { 1.0 });
                    }
                }
            })
        };
        let mut members = self.discovery.schedulers();
        let mut members_open = true;
        let mut schedule = FireSchedule::new(self.calendars.clone());
        let mut due = VecDeque::new();
        let mut owed_back = Vec::new();
        let mut resync = true;
        let mut next_refresh = Instant::now() + self.refresh;
        loop {
            if resync {
                let ring = OwnershipRing::new(members.borrow_and_update().clone(), self.strategy);
                let step = self.sync(&mut schedule, ring).await;
                self.accept(step, &mut due);
                resync = false;
            }
            let blocked = self.hand_out(&mut schedule, &mut due).await;
            let wake = schedule
                .next_deadline()
                .map(|d| self.clock.instant_at(d - self.ahead))
                .map_or(next_refresh, |d| d.min(next_refresh));
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                changed = members.changed(), if members_open => {
                    members_open = changed.is_ok();
                    resync = true;
                }
                Some(owed) = self.owed.recv() => {
                    // Applied after a reload: an instant withdrawn because its job changed is
                    // owed under the definition the reload brings. Every instant owed so far
                    // goes to one reload: at once while the database answers, at the next
                    // refresh while it does not (rule 5 of `standing.rs`).
                    owed_back.push(owed);
                    while let Ok(more) = self.owed.try_recv() {
                        owed_back.push(more);
                    }
                    if self.database.answering() {
                        next_refresh = Instant::now();
                    }
                }
                _ = self.job_changes.notified() => {
                    // Changes arrive in bursts (an import, a script): coalesce them into one
                    // reload shortly after, instead of a reload per change.
                    next_refresh = next_refresh.min(Instant::now() + RELOAD_COALESCE);
                }
                // Fires are waiting for backlog room: go on as soon as there is some.
                _ = self.dispatcher.room(), if blocked => {}
                _ = tokio::time::sleep_until(wake), if !blocked => {}
                _ = tokio::time::sleep_until(next_refresh), if blocked => {}
            }
            if Instant::now() >= next_refresh {
                next_refresh = Instant::now() + self.refresh;
                resync |= self.reload(&mut schedule, &mut due, &mut owed_back).await;
            }
        }
        standing.abort();
        tracing::info!("engine stopped");
    }

    /// Carries out a change of this instance's standing in the scheduler list.
    fn stand(&self, standing: Option<Standing>) {
        let Some(standing) = standing else {
            return;
        };
        self.listed.send_replace(standing == Standing::Back);
    }

    /// Catches up with job changes, then owes again the instants the dispatcher gave back
    /// (they follow the misfire rules like any missed instants). `true` when the whole
    /// schedule must be synced.
    async fn reload(
        &mut self,
        schedule: &mut FireSchedule,
        due: &mut VecDeque<DueFire>,
        owed_back: &mut Vec<Owed>,
    ) -> bool {
        let full = match self.refresh_jobs(schedule).await {
            Ok(Reload::Unchanged) => false,
            Ok(Reload::Applied(step)) => {
                self.accept(step, due);
                false
            }
            Ok(Reload::Full) => true,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read jobs; scheduling continues with the last known set");
                let standing = self.database.failed(Instant::now());
                self.stand(standing);
                // The owed instants wait for a reload that sees the database.
                return false;
            }
        };
        let standing = self.database.answered(Instant::now());
        self.stand(standing);
        // FIXED_DELAY fires the store refused wait for the job's latest fire instead.
        owed_back.retain(|owed| match owed.behind {
            Some(latest) => {
                schedule.behind(&owed.job, owed.from, latest);
                false
            }
            None => true,
        });
        self.delays_ended(schedule, due).await;
        // A job's instants owed at once (a burst of its fires withdrawn) are owed from the
        // earliest: the rules below take every instant after it.
        let mut earliest: HashMap<String, DateTime<Utc>> = HashMap::new();
        for owed in owed_back.drain(..) {
            let from = earliest.entry(owed.job).or_insert(owed.from);
            *from = (*from).min(owed.from);
        }
        for owed in earliest
            .into_iter()
            .map(|(job, from)| Owed::again(job, from))
        {
            let Some(job) = self.book.get(&owed.job).filter(|j| j.spec.enabled) else {
                continue;
            };
            // Instants from before the job was last switched on are not owed: it was disabled
            // then (a fire withdrawn by a disable, owed back after a re-enable).
            let Some(from) = owed_since(&job, &self.calendars, owed.from) else {
                continue;
            };
            if schedule.contains(&owed.job) {
                schedule.rewind(&owed.job, from);
            } else {
                // A fire this instance claimed for a job that has moved since: the new owner
                // starts after the claimed instant, so it is fired here, under the current
                // definition (the fire claim still makes it once).
                let step =
                    timers::owed_from(&job, &self.calendars, from, self.clock.now(), self.rules);
                self.accept(step, due);
            }
        }
        full
    }

    /// Asks the database whether the fires `FIXED_DELAY` jobs wait for have ended, and
    /// schedules those jobs' next instants from the ends. Asked at every refresh, whoever
    /// settled the fire (this instance, compensation, an operator's cancel through another
    /// instance): the end is the rows', so every instance derives the same next instant. A
    /// refresh is at most a second apart by default and the next instant at least a second
    /// after the end, so it is scheduled before it is due.
    async fn delays_ended(&self, schedule: &mut FireSchedule, due: &mut VecDeque<DueFire>) {
        let waiting = schedule.waiting();
        if waiting.is_empty() {
            return;
        }
        match self.store.fire_ends(&waiting).await {
            Ok(ends) => {
                for end in ends {
                    let now = self.clock.now();
                    let step =
                        schedule.fire_ended(&end.job, end.fire_time, end.end, now, self.rules);
                    self.accept(step, due);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read whether fixed-delay fires ended; asking again at the next refresh");
            }
        }
    }

    /// Hands due fires to the dispatcher, owed ones (gains, catch-ups) first, as far as the
    /// backlog has room, in slices so the first calls go out while the rest are still being
    /// taken. It never waits for room: fires without it stay in the schedule (where the
    /// misfire policy applies when they are taken late) or in `due`. A pass takes what was
    /// due when it began, for at most PASS_LIMIT, so membership and job changes are seen
    /// between passes even when the scheduler cannot keep up. `true` when fires are left
    /// waiting for room.
    async fn hand_out(&self, schedule: &mut FireSchedule, due: &mut VecDeque<DueFire>) -> bool {
        let (due_at, pass) = (self.clock.now() + self.ahead, Instant::now());
        loop {
            let waiting = !due.is_empty() || schedule.has_due(due_at);
            if !waiting {
                return false;
            }
            if pass.elapsed() >= PASS_LIMIT {
                return true;
            }
            let room = self.dispatcher.reserve(DUE_SLICE);
            if room.is_empty() {
                return true;
            }
            if due.len() < room.len() && schedule.has_due(due_at) {
                let (now, limit) = (self.clock.now(), room.len() - due.len());
                let step = schedule.take_ahead(now, due_at.max(now), self.rules, limit);
                self.accept(step, due);
            }
            let fires: Vec<Fire> = due
                .drain(..room.len().min(due.len()))
                .zip(room)
                .map(|(f, place)| Fire {
                    job: f.job,
                    at: f.fire_time,
                    hold: Some(Arc::new(place)),
                })
                .collect();
            self.dispatcher.hand(fires);
            tokio::task::yield_now().await;
        }
    }

    /// Queues a step's due fires for hand-out and notes its skipped ones. Missed fires are
    /// counted per job in `scheduler_misfires_total` and logged one line per step (each fire
    /// at DEBUG): an overloaded instance misses thousands a second, and a line each would
    /// add to the load it reports.
    fn accept(&self, step: Step, due: &mut VecDeque<DueFire>) {
        let (skipped, mut caught_up) = (step.skipped.len(), 0usize);
        let first_skipped = step.skipped.first().map(|s| (s.job.clone(), s.fire_time));
        for skipped in step.skipped {
            metrics::counter!("scheduler_misfires_total", "job_name" => skipped.job.clone(), "action" => "skipped").increment(1);
            tracing::debug!(job_name = %skipped.job, fire_time = %skipped.fire_time, "missed fire not owed (misfire policy); skipped");
            if let Some(job) = self.book.get(skipped.job.as_str()) {
                self.dispatcher.fire_skipped(&job, skipped.fire_time);
            }
        }
        for fire in step.due {
            if fire.misfire {
                caught_up += 1;
                metrics::counter!("scheduler_misfires_total", "job_name" => fire.job.name().to_string(), "action" => "fired").increment(1);
                tracing::debug!(job_name = %fire.job.name(), fire_time = %fire.fire_time, "catching up a missed fire (FIRE_ONCE_NOW)");
            }
            due.push_back(fire);
        }
        if let Some((job_name, fire_time)) = first_skipped {
            tracing::info!(%job_name, %fire_time, skipped, "missed fires not owed (misfire policy); skipped (first shown)");
        }
        if caught_up > 0 {
            tracing::info!(
                caught_up,
                "catching up missed fires (FIRE_ONCE_NOW), once per job"
            );
        }
    }

    /// Catches up with the job changes made since the book's revision, through any instance.
    /// Normally from the change log: the changed jobs replace their old definitions and
    /// only their schedule entries are updated (not owned any more → dropped; newly owned →
    /// gained with the catch-up rules; edited → rescheduled, see `timers`). When the log
    /// cannot answer (its tombstones were pruned past our revision, or the database is
    /// behind us), every job is read again and the caller syncs the whole schedule.
    async fn refresh_jobs(&mut self, schedule: &mut FireSchedule) -> Result<Reload, StoreError> {
        let known = self.book.revision();
        let revision = self.store.job_revision().await?;
        if revision == known {
            return Ok(Reload::Unchanged);
        }
        match self.store.job_changes_since(known).await? {
            Some(changes) => Ok(Reload::Applied(self.apply_changes(schedule, changes).await)),
            None => {
                tracing::info!(
                    since = known,
                    revision,
                    "the job change log cannot answer from this revision; reading every job"
                );
                let revision = self.store.job_revision().await?;
                self.book.replace(self.store.load_jobs().await?, revision);
                Ok(Reload::Full)
            }
        }
    }

    /// Applies the changed jobs to the book and, under the current ownership, to the
    /// schedule.
    async fn apply_changes(&mut self, schedule: &mut FireSchedule, changes: JobChanges) -> Step {
        let ring = self.cluster.ring();
        let me = self.discovery.self_id();
        let changed: Vec<Arc<JobDefinition>> = changes.changed.into_iter().map(Arc::new).collect();
        self.book.apply(
            &changed,
            &changes.removed,
            &changes.history,
            changes.revision,
        );
        let mut not_owned: Vec<String> = changes.removed.iter().map(|c| c.name.clone()).collect();
        let mut owned = Vec::new();
        for job in &changed {
            if job.spec.enabled && ring.owns(me, job.name().as_str()) {
                owned.push(job.clone());
            } else {
                not_owned.push(job.name().to_string());
            }
        }
        // Fires of the changed jobs handed out under an older definition follow the change.
        for name in changes
            .removed
            .iter()
            .map(|c| c.name.as_str())
            .chain(changed.iter().map(|j| j.name().as_str()))
        {
            self.withdraw_if_changed(&ring, name);
        }
        let now = self.clock.now();
        let gains = gaining(schedule, &owned, &self.calendars, now);
        let mut last_fired = self.last_fires(&gains, now).await;
        self.last_delay_fires(schedule, &owned, &mut last_fired)
            .await;
        let step = schedule.apply(owned, &not_owned, now, self.rules, &last_fired);
        if step.gained > 0 || step.lost > 0 {
            tracing::debug!(
                gained = step.gained,
                lost = step.lost,
                owned = schedule.len(),
                revision = changes.revision,
                "job changes applied"
            );
        }
        self.publish_owned(schedule.len());
        step
    }

    /// The last recorded fire of each job in `gaining` (what a previous owner fired).
    async fn last_fires(
        &self,
        gaining: &[&str],
        now: chrono::DateTime<chrono::Utc>,
    ) -> HashMap<String, chrono::DateTime<chrono::Utc>> {
        if gaining.len() > GAINS_READ_ONE_BY_ONE {
            return self.recent_fires(now).await;
        }
        let mut last = HashMap::new();
        for name in gaining {
            match self.store.last_fire_time(name).await {
                Ok(Some(t)) => {
                    last.insert(name.to_string(), t);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the last fire; the fire guard still prevents doubles");
                    break;
                }
            }
        }
        last
    }

    /// Adds the last recorded fire of each `FIXED_DELAY` job among `owned` being gained that
    /// `last` lacks (it only holds recent fires): such a job waits for that fire to end, and
    /// its next instant derives from the end, however long ago.
    async fn last_delay_fires(
        &self,
        schedule: &FireSchedule,
        owned: &[Arc<JobDefinition>],
        last: &mut HashMap<String, DateTime<Utc>>,
    ) {
        let gained: Vec<&Arc<JobDefinition>> = owned
            .iter()
            .filter(|j| {
                j.spec.timing.waits_for_the_previous_fire()
                    && !schedule.contains(j.name().as_str())
                    && !last.contains_key(j.name().as_str())
            })
            .collect();
        for job in gained {
            let name = job.name().as_str();
            match self.store.last_fire_time(name).await {
                Ok(Some(t)) => {
                    last.insert(name.to_string(), t);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, job_name = %name, "cannot read the last fire of a fixed-delay job");
                }
            }
        }
    }

    /// The last fire of every job fired within the misfire threshold.
    async fn recent_fires(
        &self,
        now: chrono::DateTime<chrono::Utc>,
    ) -> HashMap<String, chrono::DateTime<chrono::Utc>> {
        let since = now - self.rules.threshold - chrono::Duration::seconds(1);
        self.store.recent_fires(since).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read recent fires; the fire guard still prevents doubles");
            HashMap::new()
        })
    }

    fn publish_owned(&self, owned: usize) {
        metrics::gauge!("scheduler_owned_jobs").set(owned as f64);
        self.cluster
            .owned
            .store(owned, std::sync::atomic::Ordering::Relaxed);
    }

    /// Withdraws `name`'s fires that a change overtook (see
    /// [`JobBook::overtakes`](crate::jobs::JobBook::overtakes)): the job was edited (and is
    /// still ours), disabled or deleted before their instant. The schedule owes their instants
    /// again from the earliest, under the current definition: the change applies as if they
    /// had never been handed out. A fire of a job that moved to another instance stays ours
    /// to call, and so does a fire due before the change.
    fn withdraw_if_changed(&self, ring: &OwnershipRing, name: &str) {
        let moved_away = !ring.owns(self.discovery.self_id(), name)
            && self.book.get(name).is_some_and(|now| now.spec.enabled);
        if moved_away {
            return;
        }
        let keep = |handed: &JobDefinition, at| !self.book.overtakes(handed, at);
        // Their instants come back as `Owed` once their rows are deleted.
        self.dispatcher.withdraw(name, keep);
    }

    async fn sync(&self, schedule: &mut FireSchedule, ring: OwnershipRing) -> Step {
        let me = self.discovery.self_id();
        let jobs = self.book.all();
        for job in &jobs {
            self.withdraw_if_changed(&ring, job.name().as_str());
        }
        for gone in self.dispatcher.handed_out_jobs() {
            if self.book.get(&gone).is_none() {
                self.withdraw_if_changed(&ring, &gone);
            }
        }
        let owned: Vec<Arc<JobDefinition>> = jobs
            .into_iter()
            .filter(|j| j.spec.enabled && ring.owns(me, j.name().as_str()))
            .collect();
        let before = schedule.len();
        let now = self.clock.now();
        // Only jobs being gained need to know what the previous owner fired.
        let gaining = owned.iter().any(|j| !schedule.contains(j.name().as_str()));
        let mut last_fired = if gaining {
            self.recent_fires(now).await
        } else {
            HashMap::new()
        };
        self.last_delay_fires(schedule, &owned, &mut last_fired)
            .await;
        let step = schedule.sync(owned, now, self.rules, &last_fired);
        if step.gained > 0 || step.lost > 0 || ring != self.cluster.ring() {
            tracing::info!(
                instances = ring.instances().len(),
                owned_before = before,
                owned_after = schedule.len(),
                gained = step.gained,
                lost = step.lost,
                "ownership recomputed"
            );
        }
        self.publish_owned(schedule.len());
        metrics::gauge!("scheduler_instances").set(ring.instances().len() as f64);
        metrics::gauge!("scheduler_compensation_leader").set(if ring.leader() == Some(me) {
            1.0
        } else {
            0.0
        });
        *self.cluster.ring.write().expect("ring lock") = ring;
        step
    }
}

/// The first instant owed to `job` of those from `from` on: `from` itself, or the job's first
/// instant at or after the moment it was last switched on when `from` is earlier. `None` when
/// it never fires again.
fn owed_since(
    job: &JobDefinition,
    calendars: &Calendars,
    from: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if from >= job.enabled_since {
        return Some(from);
    }
    job.spec
        .schedule(calendars)
        .next_after(job.enabled_since - chrono::Duration::milliseconds(1))
}

/// The jobs among `owned` being gained whose last fire matters: only one with an instant since
/// it was enabled (only then can another instance have fired it); a job just created or
/// enabled has none, so a mass import reads no fires at all.
fn gaining<'a>(
    schedule: &FireSchedule,
    owned: &'a [Arc<JobDefinition>],
    calendars: &Calendars,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<&'a str> {
    owned
        .iter()
        .filter(|j| !schedule.contains(j.name().as_str()))
        .filter(|j| {
            j.spec
                .schedule(calendars)
                .next_after(j.enabled_since)
                .is_some_and(|t| t <= now)
        })
        .map(|j| j.name().as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// A fire withdrawn by a disable and owed back after the job was enabled again: the
    /// instants of the disabled time are not owed, the first one after the enable is.
    #[test]
    fn instants_from_before_the_job_was_switched_on_are_not_owed() {
        let body = serde_json::json!({"name": "j", "serviceName": "s", "handler": "h",
            "cron": "*/2 * * * * ?"});
        let mut job = JobDefinition::stored(body, t("2026-12-02T15:42:31Z"));
        job.enabled_since = t("2026-12-02T15:42:44.477Z");
        let none = Calendars::new();
        assert_eq!(
            owed_since(&job, &none, t("2026-12-02T15:42:36Z")),
            Some(t("2026-12-02T15:42:46Z"))
        );
        assert_eq!(
            owed_since(&job, &none, t("2026-12-02T15:42:48Z")),
            Some(t("2026-12-02T15:42:48Z")),
            "owed after the enable: unchanged"
        );
        job.enabled_since = t("2026-12-02T15:42:44Z");
        assert_eq!(
            owed_since(&job, &none, t("2026-12-02T15:42:36Z")),
            Some(t("2026-12-02T15:42:44Z")),
            "an instant at the very moment of the enable is owed"
        );
    }
}
