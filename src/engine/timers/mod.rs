//! The owned jobs' next fire times, in one ordered queue (docs/design.md, "Timers"). Pure logic:
//! the engine loop feeds it the owned jobs and the clock and gets back the fires that are due, so
//! every rule here is tested without real time passing.
//!
//! Misfire rules, applied both when a job is gained (start-up, failover, rebalance) and when
//! the loop wakes late, to the scheduled instants not yet fired:
//! - every instant late by at most `tolerance` is fired, whatever the policy: it is late, not
//!   missed (a busy second, or a failover that took two seconds, loses no fire);
//! - of the instants older than that, only the latest counts ("fire once"): fired for
//!   FIRE_ONCE_NOW when it is at most `threshold` old, otherwise skipped.
//!
//! On gain, only instants newer than the job's last recorded fire (the previous owner made
//! it) and newer than the moment it was last enabled (a fire scheduled while the job was
//! disabled is not owed) are owed; other edits do not cancel a catch-up. When an owned job is
//! changed, the new definition's instants from the old schedule's next instant on are owed
//! under the same rules, so an edit landing just before (or around) a fire never loses it.
//!
//! A job's instants are its cron's in its time zone, minus the excluded dates of the calendar
//! it names ([`Schedule`]): an excluded instant is neither fired nor owed.
//!
//! A `FIXED_DELAY` job has one fire out at a time: once one is handed out it has no next
//! instant until the engine learns from the database that the fire ended
//! ([`FireSchedule::fire_ended`]); its instants then start again at the end, rounded up to
//! the second, plus the interval, under the same misfire rules (of several owed at once, the
//! latest fires). A job gained while its last recorded fire may still run waits for that
//! fire alike; an edit while it waits changes the interval of the next wait, not the wait.
//! A fire owed back for a `FIXED_DELAY` job this schedule no longer holds (it moved while the
//! fire was being recorded) is owed nothing here ([`owed_from`]): the owner waits for the
//! job's latest fire and fires its interval after that fire's end.
//! The store has the last word: it records a `FIXED_DELAY` fire only when the job's latest
//! fire (in the database or earlier in the same batch) has ended its interval before, and a
//! fire it refuses sends the job back to waiting for that latest fire
//! ([`FireSchedule::behind`]), so two schedulers that both think they own the job for a
//! moment still put one fire out at a time.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use crate::jobs::{ByName, Calendars, JobDefinition, MisfirePolicy, Schedule};

#[derive(Debug, Clone, Copy)]
pub struct MisfireRules {
    pub tolerance: Duration,
    pub threshold: Duration,
}

/// A fire the engine must dispatch now.
#[derive(Debug, Clone)]
pub struct DueFire {
    pub job: Arc<JobDefinition>,
    pub fire_time: DateTime<Utc>,
    /// Fired late beyond the tolerance (caught up under FIRE_ONCE_NOW).
    pub misfire: bool,
}

/// A scheduled instant that was not fired, and why it is not owed any more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFire {
    pub job: String,
    pub fire_time: DateTime<Utc>,
}

#[derive(Debug, Default)]
pub struct Step {
    pub due: Vec<DueFire>,
    pub skipped: Vec<SkippedFire>,
    pub gained: usize,
    pub lost: usize,
}

/// The queue and the index hold the same definition of a job (replaced in both on a change),
/// so one generation of definitions lives.
#[derive(Default)]
pub struct FireSchedule {
    /// `(next instant, job)`, earliest first.
    queue: BTreeSet<(DateTime<Utc>, ByName)>,
    /// Every owned job and its next instant (`None`: it never fires again).
    entries: HashMap<ByName, Option<DateTime<Utc>>>,
    /// The calendars jobs may name.
    calendars: Arc<Calendars>,
    /// Where each `FIXED_DELAY` job stands between fires (absent: no fire of it known).
    delays: HashMap<String, Delay>,
}

/// A `FIXED_DELAY` job's place between its fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delay {
    /// Its fire at this instant is out: nothing is due before that fire ends.
    Waiting(DateTime<Utc>),
    /// Its last fire ended: its instants start again here.
    From(DateTime<Utc>),
}

/// `job`'s instants, where its `FIXED_DELAY` restarts them.
fn schedule_of<'a>(
    calendars: &'a Calendars,
    delays: &HashMap<String, Delay>,
    job: &'a JobDefinition,
) -> Schedule<'a> {
    let schedule = job.spec.schedule(calendars);
    match delays.get(job.name().as_str()) {
        Some(Delay::From(at)) => schedule.restarted(*at),
        _ => schedule,
    }
}

/// Of the fires `step` got for one job from index `from` on, keeps only the latest (a
/// `FIXED_DELAY` job has one fire out at a time) and answers its instant.
fn keep_latest(step: &mut Step, from: usize) -> Option<DateTime<Utc>> {
    let latest = step.due.drain(from..).next_back()?;
    let at = latest.fire_time;
    step.due.push(latest);
    Some(at)
}

impl FireSchedule {
    /// An empty schedule whose jobs may name `calendars`.
    pub fn new(calendars: Arc<Calendars>) -> Self {
        Self {
            calendars,
            ..Self::default()
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn contains(&self, job: &str) -> bool {
        self.entries.contains_key(job)
    }

    /// The earliest next fire of any owned job.
    pub fn next_deadline(&self) -> Option<DateTime<Utc>> {
        self.queue.first().map(|(t, _)| *t)
    }

    /// Makes `owned` the scheduled set (a full sync: start-up, membership changes). Gained
    /// jobs get the misfire catch-up; changed jobs are rescheduled from `now`; lost jobs are
    /// dropped.
    pub fn sync(
        &mut self,
        owned: impl IntoIterator<Item = Arc<JobDefinition>>,
        now: DateTime<Utc>,
        rules: MisfireRules,
        last_fired: &HashMap<String, DateTime<Utc>>,
    ) -> Step {
        let owned: Vec<Arc<JobDefinition>> = owned.into_iter().collect();
        let names: HashSet<&str> = owned.iter().map(|j| j.name().as_str()).collect();
        let lost: Vec<String> = self
            .entries
            .keys()
            .filter(|k| !names.contains(k.name()))
            .map(|k| k.name().to_string())
            .collect();
        drop(names);
        self.apply(owned, &lost, now, rules, last_fired)
    }

    /// Applies the jobs that changed (an incremental reload), leaving every other entry as it
    /// is: each job of `owned` is scheduled under the same rules as in [`Self::sync`] (gained,
    /// changed or unchanged), each job named in `not_owned` (deleted, disabled, owned
    /// elsewhere) is dropped. Costs what the changes cost, whatever the number of jobs.
    pub fn apply(
        &mut self,
        owned: impl IntoIterator<Item = Arc<JobDefinition>>,
        not_owned: &[impl AsRef<str>],
        now: DateTime<Utc>,
        rules: MisfireRules,
        last_fired: &HashMap<String, DateTime<Utc>>,
    ) -> Step {
        let mut step = Step::default();
        for name in not_owned {
            self.delays.remove(name.as_ref());
            if self.remove(name.as_ref()) {
                step.lost += 1;
            }
        }
        for job in owned {
            self.schedule(job, now, rules, last_fired, &mut step);
        }
        step
    }

    /// Schedules an owned job: adopts an unchanged definition, reschedules a changed one,
    /// catches up a gained one.
    fn schedule(
        &mut self,
        job: Arc<JobDefinition>,
        now: DateTime<Utc>,
        rules: MisfireRules,
        last_fired: &HashMap<String, DateTime<Utc>>,
        step: &mut Step,
    ) {
        let name = job.name().to_string();
        let waits = job.spec.timing.waits_for_the_previous_fire();
        match self.entries.get_key_value(name.as_str()) {
            Some((k, _)) if Arc::ptr_eq(&k.0, &job) => {}
            Some((k, &next)) if k.0.revision == job.revision && k.0.spec == job.spec => {
                // Adopt this load's copy, so only one generation of definitions lives.
                self.remove(&name);
                self.put(job, next);
            }
            Some((_, prev)) => {
                // Changed: the new definition's instants from the old schedule's next
                // (not yet fired) instant up to now are owed under the misfire rules, so
                // an edit landing around a fire never loses it.
                let after = prev.map_or(now, |n| n - Duration::milliseconds(1));
                if !waits {
                    self.delays.remove(&name);
                }
                self.remove(&name);
                if matches!(self.delays.get(&name), Some(Delay::Waiting(_))) {
                    self.put(job, None);
                    return;
                }
                let from = step.due.len();
                if after < now {
                    let schedule = schedule_of(&self.calendars, &self.delays, &job);
                    owed(&job, schedule, after, now, rules, step);
                }
                self.settle_due(job, now, from, step);
            }
            None => {
                step.gained += 1;
                if let (true, Some(last)) = (waits, last_fired.get(&name)) {
                    // The previous owner's last fire may still run: wait for its end.
                    self.delays.insert(name, Delay::Waiting(*last));
                    self.put(job, None);
                    return;
                }
                let after = match last_fired.get(&name) {
                    Some(last) => job.enabled_since.max(*last),
                    None => job.enabled_since,
                };
                let from = step.due.len();
                owed(
                    &job,
                    job.spec.schedule(&self.calendars),
                    after,
                    now,
                    rules,
                    step,
                );
                // A fire the previous owner claimed ahead of its instant is its to call:
                // this schedule starts after it.
                self.settle_due(job, after.max(now), from, step);
            }
        }
    }

    /// Puts `job` in the queue after the fires `step` owes it from index `from` on: a
    /// `FIXED_DELAY` job with one of them waits for it (the latest, alone), any other job's
    /// next instant is the first after `now`.
    fn settle_due(
        &mut self,
        job: Arc<JobDefinition>,
        now: DateTime<Utc>,
        from: usize,
        step: &mut Step,
    ) {
        if job.spec.timing.waits_for_the_previous_fire()
            && let Some(fired) = keep_latest(step, from)
        {
            self.delays
                .insert(job.name().to_string(), Delay::Waiting(fired));
            self.put(job, None);
            return;
        }
        let next = schedule_of(&self.calendars, &self.delays, &job).next_after(now);
        self.put(job, next);
    }

    /// The `FIXED_DELAY` jobs waiting for a fire to end, each with the fire's instant.
    pub fn waiting(&self) -> Vec<(String, DateTime<Utc>)> {
        self.delays
            .iter()
            .filter_map(|(job, d)| match d {
                Delay::Waiting(at) => Some((job.clone(), *at)),
                Delay::From(_) => None,
            })
            .collect()
    }

    /// `job`'s fire at `fired` ended at `end` (`None`: the fire left no rows, as if it had
    /// ended at its instant): its instants start again at the end plus the interval, and
    /// those already past are owed under the misfire rules. Nothing changes unless the job
    /// still waits for that very fire.
    pub fn fire_ended(
        &mut self,
        job: &str,
        fired: DateTime<Utc>,
        end: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
        rules: MisfireRules,
    ) -> Step {
        let mut step = Step::default();
        if self.delays.get(job) != Some(&Delay::Waiting(fired)) {
            return step;
        }
        let Some(def) = self.entries.get_key_value(job).map(|(k, _)| k.0.clone()) else {
            return step;
        };
        let Some(restart) = def.spec.timing.after_fire_ended(end.unwrap_or(fired)) else {
            return step;
        };
        self.remove(job);
        self.delays.insert(job.to_string(), Delay::From(restart));
        // Instants from before the job was last switched on are not owed.
        let after = (restart - Duration::milliseconds(1)).max(def.enabled_since);
        let schedule = schedule_of(&self.calendars, &self.delays, &def);
        owed(&def, schedule, after, now, rules, &mut step);
        self.settle_due(def, now, 0, &mut step);
        step
    }

    /// `job`'s fire at `fired` was refused by the store: its latest fire, at `latest`, had
    /// not ended its interval before (made by another scheduler, or ended later than this
    /// one read). The job waits for that fire, as for one of its own, if it still waited for
    /// the refused one.
    pub fn behind(&mut self, job: &str, fired: DateTime<Utc>, latest: DateTime<Utc>) {
        if self.delays.get(job) == Some(&Delay::Waiting(fired)) {
            self.delays.insert(job.to_string(), Delay::Waiting(latest));
        }
    }

    /// Pops up to `limit` jobs whose next fire is at or before `now` (call again while
    /// `has_due` says more are waiting).
    #[cfg(test)]
    pub fn take_due(&mut self, now: DateTime<Utc>, rules: MisfireRules, limit: usize) -> Step {
        self.take_ahead(now, now, rules, limit)
    }

    /// Pops up to `limit` jobs whose next fire is at or before `horizon` (at or after `now`),
    /// so their fires can be claimed before their instant. Instants in the future are on
    /// time by definition; the misfire rules judge past ones against `now`. A job whose next
    /// instants all fall within the window yields each of them.
    pub fn take_ahead(
        &mut self,
        now: DateTime<Utc>,
        horizon: DateTime<Utc>,
        rules: MisfireRules,
        limit: usize,
    ) -> Step {
        debug_assert!(horizon >= now, "the window looks ahead");
        let mut step = Step::default();
        // `limit` counts fires; a job's fires are taken together, so a step can exceed it
        // by the instants of its last job.
        while let Some((t, _)) = self.queue.first() {
            if *t > horizon || step.due.len() >= limit {
                break;
            }
            let (scheduled, key) = self.queue.pop_first().expect("non-empty queue");
            let Some(next) = self.entries.get_mut(key.name()) else {
                continue;
            };
            let job = key.0.clone();
            let from = step.due.len();
            let schedule = schedule_of(&self.calendars, &self.delays, &job);
            let following = schedule.next_after(scheduled);
            if following.is_none_or(|f| f > now) && now - scheduled <= rules.tolerance {
                // The common case: exactly this instant is due, on time. One cron search.
                *next = following;
                step.due.push(DueFire {
                    job: job.clone(),
                    fire_time: scheduled,
                    misfire: false,
                });
            } else {
                *next = schedule.next_after(now);
                owed(
                    &job,
                    schedule,
                    scheduled - Duration::milliseconds(1),
                    now,
                    rules,
                    &mut step,
                );
            }
            if job.spec.timing.waits_for_the_previous_fire()
                && let Some(fired) = keep_latest(&mut step, from)
            {
                *next = None;
                self.delays
                    .insert(job.name().to_string(), Delay::Waiting(fired));
            }
            if let Some(n) = *next {
                self.queue.insert((n, key));
            }
        }
        step
    }

    /// Whether some job's next fire is at or before `at`.
    pub fn has_due(&self, at: DateTime<Utc>) -> bool {
        self.queue.first().is_some_and(|(t, _)| *t <= at)
    }

    /// Moves `job`'s next instant back to `at` when `at` is earlier: its fires from `at` on
    /// were taken but withdrawn before they were called, and are owed again (under the job's
    /// current definition once [`sync`](Self::sync) sees an edit).
    pub fn rewind(&mut self, job: &str, at: DateTime<Utc>) {
        let Some((key, &next)) = self.entries.get_key_value(job) else {
            return;
        };
        if next.is_some_and(|n| n <= at) {
            return;
        }
        let delay = self.delays.get(job).copied();
        if matches!(delay, Some(Delay::Waiting(w)) if w < at) {
            // Waiting for a fire before the withdrawn one: that fire decides what follows.
            return;
        }
        let job = key.0.clone();
        if let Some(Delay::Waiting(_)) = delay {
            // The fire waited for is the one withdrawn: it is owed again, not waited for.
            self.delays.remove(job.name().as_str());
        }
        self.remove(job.name().as_str());
        self.put(job, Some(at));
    }

    fn put(&mut self, job: Arc<JobDefinition>, next: Option<DateTime<Utc>>) {
        if let Some(n) = next {
            self.queue.insert((n, ByName(job.clone())));
        }
        self.entries.insert(ByName(job), next);
    }

    /// Drops a job's queue entry (where a `FIXED_DELAY` job stands between fires is kept);
    /// `true` when it had one.
    fn remove(&mut self, name: &str) -> bool {
        let Some((key, next)) = self.entries.remove_entry(name) else {
            return false;
        };
        if let Some(n) = next {
            self.queue.remove(&(n, key));
        }
        true
    }
}

/// The fires owed for `job`'s instants from `from` up to `now` under the misfire rules, for a
/// job this schedule does not hold (see `Engine::reload`). None for a `FIXED_DELAY` job: its
/// next instant follows the end of its latest fire, which only its owner waits for (it gained
/// the job waiting for the latest fire the database holds), so a fire owed here is the
/// owner's to make, once.
pub fn owed_from(
    job: &Arc<JobDefinition>,
    calendars: &Calendars,
    from: DateTime<Utc>,
    now: DateTime<Utc>,
    rules: MisfireRules,
) -> Step {
    let mut step = Step::default();
    if job.spec.timing.waits_for_the_previous_fire() {
        return step;
    }
    let schedule = job.spec.schedule(calendars);
    owed(
        job,
        schedule,
        from - Duration::milliseconds(1),
        now,
        rules,
        &mut step,
    );
    step
}

/// Adds the fires owed for `job`'s instants in `(after, now]` under the misfire rules.
fn owed(
    job: &Arc<JobDefinition>,
    schedule: Schedule<'_>,
    after: DateTime<Utc>,
    now: DateTime<Utc>,
    rules: MisfireRules,
    step: &mut Step,
) {
    let on_time_from = now - rules.tolerance;
    // The latest instant that is more than `tolerance` late: at most one such fire is owed.
    // (Skipped on the common path, a wake-up right at the scheduled instant.)
    let late = (after < on_time_from)
        .then(|| schedule.latest_at_or_before(on_time_from - Duration::milliseconds(1)))
        .flatten();
    if let Some(late) = late.filter(|l| *l > after) {
        if now - late <= rules.threshold && job.spec.misfire_policy == MisfirePolicy::FireOnceNow {
            step.due.push(DueFire {
                job: job.clone(),
                fire_time: late,
                misfire: true,
            });
        } else {
            step.skipped.push(SkippedFire {
                job: job.name().to_string(),
                fire_time: late,
            });
        }
    }
    // Every instant within the tolerance, oldest first.
    let mut cursor = after.max(on_time_from - Duration::milliseconds(1));
    while let Some(t) = schedule.next_after(cursor).filter(|t| *t <= now) {
        if t > after {
            step.due.push(DueFire {
                job: job.clone(),
                fire_time: t,
                misfire: false,
            });
        }
        cursor = t;
    }
}

#[cfg(test)]
mod tests;
