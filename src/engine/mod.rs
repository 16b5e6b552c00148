//! The scheduling engine (SPEC §4, §5): which jobs this instance owns, and firing them on time.
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
pub mod timers;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{OwnershipStrategy, Settings};
use crate::discovery::Discovery;
use crate::dispatch::Dispatcher;
use crate::jobs::JobDefinition;
use crate::store::{JobChanges, Store, StoreError};
use ownership::OwnershipRing;
use timers::{ByName, DueFire, FireSchedule, MisfireRules, Step};

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
    store: Arc<dyn Store>,
    discovery: Arc<dyn Discovery>,
    dispatcher: Arc<Dispatcher>,
    cluster: Arc<ClusterState>,
    job_changes: Arc<Notify>,
    strategy: OwnershipStrategy,
    rules: MisfireRules,
    /// Fires due within this window are handed over (claimed) before their instant.
    ahead: chrono::Duration,
    refresh: Duration,
    /// Every job (owned or not: a membership change may hand any of them over), by name.
    jobs: HashSet<ByName>,
    /// The job revision `jobs` is complete up to.
    revision: i64,
}

impl Engine {
    /// Loads the jobs; fails when the database cannot be read (the instance is not ready).
    pub async fn load(
        settings: &Settings,
        store: Arc<dyn Store>,
        discovery: Arc<dyn Discovery>,
        dispatcher: Arc<Dispatcher>,
        cluster: Arc<ClusterState>,
        job_changes: Arc<Notify>,
    ) -> Result<Self, StoreError> {
        // The revision first: changes made after it (maybe read by the load) come again in
        // the first incremental reload, which applies them as no-ops.
        let revision = store.job_revision().await?;
        let jobs = by_name(store.load_jobs().await?);
        Ok(Self {
            store,
            discovery,
            dispatcher,
            cluster,
            job_changes,
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
            jobs,
            revision,
        })
    }

    pub async fn run(mut self, cancel: CancellationToken) {
        let mut members = self.discovery.schedulers();
        let mut members_open = true;
        let mut schedule = FireSchedule::default();
        let mut owed = VecDeque::new();
        let mut resync = true;
        let mut next_refresh = Instant::now() + self.refresh;
        loop {
            if resync {
                let ring = OwnershipRing::new(members.borrow_and_update().clone(), self.strategy);
                let step = self.sync(&mut schedule, ring).await;
                self.accept(step, &mut owed);
                resync = false;
            }
            let blocked = self.hand_out(&mut schedule, &mut owed).await;
            let wake = schedule
                .next_deadline()
                .map(|d| {
                    Instant::now() + (d - self.ahead - Utc::now()).to_std().unwrap_or_default()
                })
                .map_or(next_refresh, |d| d.min(next_refresh));
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                changed = members.changed(), if members_open => {
                    members_open = changed.is_ok();
                    resync = true;
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
                match self.refresh_jobs(&mut schedule).await {
                    Ok(reload) => {
                        match reload {
                            Reload::Unchanged => {}
                            Reload::Applied(step) => self.accept(step, &mut owed),
                            Reload::Full => resync = true,
                        }
                        if self.dispatcher.has_missed() {
                            self.recover_missed(&mut schedule);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read jobs; scheduling continues with the last known set")
                    }
                }
            }
        }
        tracing::info!("engine stopped");
    }

    /// Hands due fires to the dispatcher, owed ones (gains, catch-ups) first, as far as the
    /// backlog has room, in slices so the first calls go out while the rest are still being
    /// taken. It never waits for room: fires without it stay in the schedule (where the
    /// misfire policy applies when they are taken late) or in `owed`. A pass takes what was
    /// due when it began, for at most PASS_LIMIT, so membership and job changes are seen
    /// between passes even when the scheduler cannot keep up. `true` when fires are left
    /// waiting for room.
    async fn hand_out(&self, schedule: &mut FireSchedule, owed: &mut VecDeque<DueFire>) -> bool {
        let (due_at, pass) = (Utc::now() + self.ahead, Instant::now());
        loop {
            let waiting = !owed.is_empty() || schedule.has_due(due_at);
            if !waiting {
                return false;
            }
            if pass.elapsed() >= PASS_LIMIT {
                return true;
            }
            let room = self.dispatcher.try_reserve(DUE_SLICE);
            if room.is_empty() {
                return true;
            }
            if owed.len() < room.len() && schedule.has_due(due_at) {
                let (now, limit) = (Utc::now(), room.len() - owed.len());
                let step = schedule.take_ahead(now, due_at.max(now), self.rules, limit);
                self.accept(step, owed);
            }
            let fires: Vec<_> = owed
                .drain(..room.len().min(owed.len()))
                .map(|f| (f.job, f.fire_time))
                .collect();
            let room: Vec<_> = room.into_iter().take(fires.len()).collect();
            self.dispatcher.spawn_fires(fires, room);
            tokio::task::yield_now().await;
        }
    }

    /// Queues a step's due fires for hand-out and notes its skipped ones.
    fn accept(&self, step: Step, owed: &mut VecDeque<DueFire>) {
        for skipped in step.skipped {
            metrics::counter!("scheduler_misfires_total", "job_name" => skipped.job.clone(), "action" => "skipped").increment(1);
            tracing::info!(job_name = %skipped.job, fire_time = %skipped.fire_time, "missed fire not owed (misfire policy); skipped");
            if let Some(job) = self.jobs.get(skipped.job.as_str()) {
                self.dispatcher.fire_skipped(&job.0, skipped.fire_time);
            }
        }
        for due in step.due {
            if due.misfire {
                metrics::counter!("scheduler_misfires_total", "job_name" => due.job.name().to_string(), "action" => "fired").increment(1);
                tracing::info!(job_name = %due.job.name(), fire_time = %due.fire_time, "catching up a missed fire (FIRE_ONCE_NOW)");
            }
            owed.push_back(due);
        }
    }

    /// The database answers again: the instants it could not record are owed again from the
    /// earliest, so the misfire rules decide them like any missed instants (those still ahead
    /// or within the tolerance fire; of older ones, the latest follows the policy).
    fn recover_missed(&self, schedule: &mut FireSchedule) {
        for (job, fire_time) in self.dispatcher.take_missed() {
            schedule.rewind(&job, fire_time);
        }
    }

    /// Catches up with the job changes made since `self.revision`, through any instance.
    /// Normally from the change log: the changed jobs replace their old definitions and
    /// only their schedule entries are updated (not owned any more → dropped; newly owned →
    /// gained with the catch-up rules; edited → rescheduled, see `timers`). When the log
    /// cannot answer (its tombstones were pruned past our revision, or the database is
    /// behind us), every job is read again and the caller syncs the whole schedule.
    async fn refresh_jobs(&mut self, schedule: &mut FireSchedule) -> Result<Reload, StoreError> {
        let revision = self.store.job_revision().await?;
        if revision == self.revision {
            return Ok(Reload::Unchanged);
        }
        match self.store.job_changes_since(self.revision).await? {
            Some(changes) => Ok(Reload::Applied(self.apply_changes(schedule, changes).await)),
            None => {
                tracing::info!(
                    since = self.revision,
                    revision,
                    "the job change log cannot answer from this revision; reading every job"
                );
                let revision = self.store.job_revision().await?;
                self.jobs = by_name(self.store.load_jobs().await?);
                self.revision = revision;
                Ok(Reload::Full)
            }
        }
    }

    /// Applies the changed jobs to `jobs` and, under the current ownership, to the schedule.
    async fn apply_changes(&mut self, schedule: &mut FireSchedule, changes: JobChanges) -> Step {
        let ring = self.cluster.ring();
        let me = self.discovery.self_id();
        let mut not_owned: Vec<String> = Vec::new();
        let changed: Vec<String> = changes
            .removed
            .iter()
            .cloned()
            .chain(changes.changed.iter().map(|j| j.name().to_string()))
            .collect();
        for name in changes.removed {
            self.jobs.remove(name.as_str());
            not_owned.push(name);
        }
        let mut owned = Vec::new();
        for job in changes.changed {
            let job = Arc::new(job);
            if job.spec.enabled && ring.owns(me, job.name().as_str()) {
                owned.push(job.clone());
            } else {
                not_owned.push(job.name().to_string());
            }
            self.jobs.replace(ByName(job));
        }
        // Fires of the changed jobs claimed ahead follow the change (see withdraw_changed).
        for name in &changed {
            if let Some(was) = self.dispatcher.claimed_ahead_of(name) {
                self.withdraw_if_changed(schedule, &ring, &was).await;
            }
        }
        let now = Utc::now();
        // A gained job's last fire matters only when it has an instant since it was enabled
        // (only then can another instance have fired it): a job just created or enabled has
        // none, so a mass import reads no fires at all.
        let gaining: Vec<&str> = owned
            .iter()
            .filter(|j| !schedule.contains(j.name().as_str()))
            .filter(|j| {
                let (cron, tz) = (&j.spec.cron, j.spec.timezone.tz());
                cron.next_after(j.enabled_since, tz)
                    .is_some_and(|t| t <= now)
            })
            .map(|j| j.name().as_str())
            .collect();
        let last_fired = self.last_fires(&gaining, now).await;
        let step = schedule.apply(owned, &not_owned, now, self.rules, &last_fired);
        self.revision = changes.revision;
        if step.gained > 0 || step.lost > 0 {
            tracing::debug!(
                gained = step.gained,
                lost = step.lost,
                owned = schedule.len(),
                revision = self.revision,
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
        now: chrono::DateTime<Utc>,
    ) -> HashMap<String, chrono::DateTime<Utc>> {
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

    /// The last fire of every job fired within the misfire threshold.
    async fn recent_fires(
        &self,
        now: chrono::DateTime<Utc>,
    ) -> HashMap<String, chrono::DateTime<Utc>> {
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

    /// Fires claimed ahead whose job has since been edited (and is still ours), disabled or
    /// deleted are withdrawn, and the schedule owes their instants again from the earliest,
    /// under the current definition: the change applies as if they had never been claimed.
    /// A fire claimed ahead of a job that moved to another instance stays ours to call.
    async fn withdraw_changed(&self, schedule: &mut FireSchedule, ring: &OwnershipRing) {
        for was in self.dispatcher.claimed_ahead() {
            self.withdraw_if_changed(schedule, ring, &was).await;
        }
    }

    /// [`withdraw_changed`](Self::withdraw_changed) for one job, claimed ahead under `was`.
    async fn withdraw_if_changed(
        &self,
        schedule: &mut FireSchedule,
        ring: &OwnershipRing,
        was: &JobDefinition,
    ) {
        let name = was.name().as_str();
        let withdraw = match self.jobs.get(name).map(|j| &j.0) {
            None => true,
            Some(now) if !now.spec.enabled => true,
            Some(now) => {
                (now.updated_at != was.updated_at || now.spec != was.spec)
                    && ring.owns(self.discovery.self_id(), name)
            }
        };
        if withdraw && let Some(earliest) = self.dispatcher.withdraw(name).await {
            schedule.rewind(name, earliest);
        }
    }

    async fn sync(&self, schedule: &mut FireSchedule, ring: OwnershipRing) -> Step {
        let me = self.discovery.self_id();
        let owned: Vec<Arc<JobDefinition>> = self
            .jobs
            .iter()
            .map(|k| &k.0)
            .filter(|j| j.spec.enabled && ring.owns(me, j.name().as_str()))
            .cloned()
            .collect();
        self.withdraw_changed(schedule, &ring).await;
        let before = schedule.len();
        let now = Utc::now();
        // Only jobs being gained need to know what the previous owner fired.
        let gaining = owned.iter().any(|j| !schedule.contains(j.name().as_str()));
        let last_fired = if gaining {
            self.recent_fires(now).await
        } else {
            HashMap::new()
        };
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

/// Jobs keyed by name.
fn by_name(jobs: Vec<JobDefinition>) -> HashSet<ByName> {
    jobs.into_iter().map(|j| ByName(Arc::new(j))).collect()
}
