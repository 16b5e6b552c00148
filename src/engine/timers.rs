//! The owned jobs' next fire times, in one ordered queue (SPEC §5). Pure logic: the engine
//! loop feeds it the owned jobs and the clock and gets back the fires that are due, so every
//! rule here is tested without real time passing.
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

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use crate::jobs::{ByName, JobDefinition, MisfirePolicy};

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
}

impl FireSchedule {
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
        let name = job.name().as_str();
        match self.entries.get_key_value(name) {
            Some((k, _)) if Arc::ptr_eq(&k.0, &job) => {}
            Some((k, &next)) if k.0.revision == job.revision && k.0.spec == job.spec => {
                // Adopt this load's copy, so only one generation of definitions lives.
                self.remove(name);
                self.put(job, next);
            }
            Some((_, prev)) => {
                // Changed: the new definition's instants from the old schedule's next
                // (not yet fired) instant up to now are owed under the misfire rules, so
                // an edit landing around a fire never loses it.
                let after = prev.map_or(now, |n| n - Duration::milliseconds(1));
                self.remove(name);
                if after < now {
                    owed(&job, after, now, rules, step);
                }
                self.insert(job, now);
            }
            None => {
                step.gained += 1;
                let after = match last_fired.get(name) {
                    Some(last) => job.enabled_since.max(*last),
                    None => job.enabled_since,
                };
                owed(&job, after, now, rules, step);
                // A fire the previous owner claimed ahead of its instant is its to call:
                // this schedule starts after it.
                self.insert(job, after.max(now));
            }
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
            let (cron, tz) = (&job.spec.cron, job.spec.timezone.tz());
            let following = cron.next_after(scheduled, tz);
            if following.is_none_or(|f| f > now) && now - scheduled <= rules.tolerance {
                // The common case: exactly this instant is due, on time. One cron search.
                *next = following;
                step.due.push(DueFire {
                    job: job.clone(),
                    fire_time: scheduled,
                    misfire: false,
                });
            } else {
                *next = cron.next_after(now, tz);
                owed(
                    &job,
                    scheduled - Duration::milliseconds(1),
                    now,
                    rules,
                    &mut step,
                );
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
        let job = key.0.clone();
        self.remove(job.name().as_str());
        self.put(job, Some(at));
    }

    fn insert(&mut self, job: Arc<JobDefinition>, now: DateTime<Utc>) {
        let next = job.spec.cron.next_after(now, job.spec.timezone.tz());
        self.put(job, next);
    }

    fn put(&mut self, job: Arc<JobDefinition>, next: Option<DateTime<Utc>>) {
        if let Some(n) = next {
            self.queue.insert((n, ByName(job.clone())));
        }
        self.entries.insert(ByName(job), next);
    }

    /// Drops a job's entry; `true` when it had one.
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
/// job this schedule does not hold (see `Engine::reload`).
pub fn owed_from(
    job: &Arc<JobDefinition>,
    from: DateTime<Utc>,
    now: DateTime<Utc>,
    rules: MisfireRules,
) -> Step {
    let mut step = Step::default();
    owed(job, from - Duration::milliseconds(1), now, rules, &mut step);
    step
}

/// Adds the fires owed for `job`'s instants in `(after, now]` under the misfire rules.
fn owed(
    job: &Arc<JobDefinition>,
    after: DateTime<Utc>,
    now: DateTime<Utc>,
    rules: MisfireRules,
    step: &mut Step,
) {
    let (cron, tz) = (&job.spec.cron, job.spec.timezone.tz());
    let on_time_from = now - rules.tolerance;
    // The latest instant that is more than `tolerance` late: at most one such fire is owed.
    // (Skipped on the common path, a wake-up right at the scheduled instant.)
    let late = (after < on_time_from)
        .then(|| cron.latest_at_or_before(on_time_from - Duration::milliseconds(1), tz))
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
    while let Some(t) = cron.next_after(cursor, tz).filter(|t| *t <= now) {
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
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn job(name: &str, cron: &str, policy: &str, updated: &str) -> Arc<JobDefinition> {
        let body = serde_json::json!({
            "name": name, "serviceName": "s", "handler": "h", "cron": cron, "misfirePolicy": policy
        });
        Arc::new(JobDefinition::stored(body, t(updated)))
    }

    const RULES: MisfireRules = MisfireRules {
        tolerance: Duration::seconds(5),
        threshold: Duration::seconds(600),
    };

    fn fires(step: &Step) -> Vec<(String, String, bool)> {
        step.due
            .iter()
            .map(|d| {
                (
                    d.job.name().to_string(),
                    d.fire_time.to_rfc3339(),
                    d.misfire,
                )
            })
            .collect()
    }

    #[test]
    fn fires_each_instant_once_in_order() {
        let mut s = FireSchedule::default();
        let a = job(
            "a",
            "*/10 * * * * ?",
            "FIRE_ONCE_NOW",
            "2024-01-01T00:00:00Z",
        );
        let b = job(
            "b",
            "*/15 * * * * ?",
            "FIRE_ONCE_NOW",
            "2024-01-01T00:00:00Z",
        );
        s.sync([a, b], t("2024-01-01T00:00:01Z"), RULES, &HashMap::new());
        assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:00:10Z")));
        let step = s.take_due(t("2024-01-01T00:00:09.999Z"), RULES, usize::MAX);
        assert!(step.due.is_empty());
        let step = s.take_due(t("2024-01-01T00:00:10.002Z"), RULES, usize::MAX);
        assert_eq!(
            fires(&step),
            [("a".into(), "2024-01-01T00:00:10+00:00".into(), false)]
        );
        let step = s.take_due(t("2024-01-01T00:00:15.001Z"), RULES, usize::MAX);
        assert_eq!(
            fires(&step),
            [("b".into(), "2024-01-01T00:00:15+00:00".into(), false)]
        );
        assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:00:20Z")));
    }

    #[test]
    fn due_fires_come_out_in_slices() {
        let mut s = FireSchedule::default();
        let jobs: Vec<_> = (0..5)
            .map(|i| {
                job(
                    &format!("j{i}"),
                    "0 * * * * ?",
                    "FIRE_ONCE_NOW",
                    "2024-01-01T00:00:00Z",
                )
            })
            .collect();
        s.sync(jobs, t("2024-01-01T00:00:30Z"), RULES, &HashMap::new());
        let now = t("2024-01-01T00:01:00.01Z");
        assert_eq!(s.take_due(now, RULES, 2).due.len(), 2);
        assert!(s.has_due(now));
        assert_eq!(s.take_due(now, RULES, 2).due.len(), 2);
        assert_eq!(s.take_due(now, RULES, 2).due.len(), 1);
        assert!(!s.has_due(now));
        assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:02:00Z")));
    }

    #[test]
    fn a_stall_collapses_missed_instants_into_one_catch_up() {
        let mut s = FireSchedule::default();
        let a = job("a", "* * * * * ?", "FIRE_ONCE_NOW", "2024-01-01T00:00:00Z");
        let d = job("d", "* * * * * ?", "DO_NOTHING", "2024-01-01T00:00:00Z");
        s.sync([a, d], t("2024-01-01T00:00:00.5Z"), RULES, &HashMap::new());
        // Woken 30 s late: the instants within the 5 s tolerance (27..=31) are late, not
        // missed, and fire for both; of the older ones only the latest (26) counts, fired for
        // FIRE_ONCE_NOW and skipped for DO_NOTHING.
        let step = s.take_due(t("2024-01-01T00:00:31.2Z"), RULES, usize::MAX);
        let of = |job: &str| -> Vec<(String, bool)> {
            let mut v: Vec<_> = step
                .due
                .iter()
                .filter(|d| d.job.name().as_str() == job)
                .map(|d| (d.fire_time.format("%S").to_string(), d.misfire))
                .collect();
            v.sort();
            v
        };
        let on_time = |s: &str| (s.to_string(), false);
        assert_eq!(
            of("a"),
            [
                ("26".to_string(), true),
                on_time("27"),
                on_time("28"),
                on_time("29"),
                on_time("30"),
                on_time("31")
            ]
        );
        assert_eq!(
            of("d"),
            [
                on_time("27"),
                on_time("28"),
                on_time("29"),
                on_time("30"),
                on_time("31")
            ]
        );
        assert_eq!(
            step.skipped,
            [SkippedFire {
                job: "d".into(),
                fire_time: t("2024-01-01T00:00:26Z")
            }]
        );
        assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:00:32Z")));
        // Every missed instant is older than the tolerance: a catches up, d skips.
        let mut s = FireSchedule::default();
        let d = job("d", "0 * * * * ?", "DO_NOTHING", "2024-01-01T00:00:00Z");
        let a = job("a", "0 * * * * ?", "FIRE_ONCE_NOW", "2024-01-01T00:00:00Z");
        s.sync([a, d], t("2024-01-01T00:00:30Z"), RULES, &HashMap::new());
        let step = s.take_due(t("2024-01-01T00:03:20Z"), RULES, usize::MAX);
        assert_eq!(
            fires(&step),
            [("a".into(), "2024-01-01T00:03:00+00:00".into(), true)]
        );
        assert_eq!(
            step.skipped,
            [SkippedFire {
                job: "d".into(),
                fire_time: t("2024-01-01T00:03:00Z")
            }]
        );
        assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:04:00Z")));
    }

    #[test]
    fn gaining_a_job_catches_up_the_missed_fire_once() {
        let a = job("a", "0 * * * * ?", "FIRE_ONCE_NOW", "2024-01-01T00:00:00Z");
        let d = job("d", "0 * * * * ?", "DO_NOTHING", "2024-01-01T00:00:00Z");
        let now = t("2024-01-01T01:00:20Z");

        let mut s = FireSchedule::default();
        let step = s.sync([a.clone(), d.clone()], now, RULES, &HashMap::new());
        assert_eq!(step.gained, 2);
        assert_eq!(
            fires(&step),
            [("a".into(), "2024-01-01T01:00:00+00:00".into(), true)]
        );
        assert_eq!(step.skipped.len(), 1);
        // A second sync with the same jobs changes nothing.
        let step = s.sync([a.clone(), d.clone()], now, RULES, &HashMap::new());
        assert!(step.due.is_empty() && step.gained == 0);

        // Already fired by the previous owner: nothing owed.
        let mut s = FireSchedule::default();
        let last = HashMap::from([("a".to_string(), t("2024-01-01T01:00:00Z"))]);
        assert!(s.sync([a.clone()], now, RULES, &last).due.is_empty());

        // Within the tolerance even DO_NOTHING fires (a failover a second after the instant).
        let mut s = FireSchedule::default();
        let step = s.sync(
            [d.clone()],
            t("2024-01-01T01:00:02Z"),
            RULES,
            &HashMap::new(),
        );
        assert_eq!(
            fires(&step),
            [("d".into(), "2024-01-01T01:00:00+00:00".into(), false)]
        );

        // Beyond the threshold nothing is owed.
        let mut s = FireSchedule::default();
        let step = s.sync(
            [a],
            t("2024-01-01T01:59:30Z"),
            MisfireRules {
                threshold: Duration::seconds(20),
                ..RULES
            },
            &HashMap::new(),
        );
        assert!(step.due.is_empty());
        assert_eq!(step.skipped.len(), 1);
    }

    #[test]
    fn a_quick_failover_loses_no_fire_of_a_second_level_job() {
        // The previous owner fired 10:00:05 and died; this instance gains the job 3.4 s later.
        let a = job("a", "* * * * * ?", "DO_NOTHING", "2024-01-01T00:00:00Z");
        let last = HashMap::from([("a".to_string(), t("2024-01-01T10:00:05Z"))]);
        let mut s = FireSchedule::default();
        let step = s.sync([a], t("2024-01-01T10:00:08.4Z"), RULES, &last);
        assert_eq!(
            fires(&step),
            ["06", "07", "08"].map(|sec| (
                "a".to_string(),
                format!("2024-01-01T10:00:{sec}+00:00"),
                false
            ))
        );
        assert!(step.skipped.is_empty());
    }

    #[test]
    fn fires_before_the_last_change_are_not_owed() {
        let mut s = FireSchedule::default();
        let a = job("a", "0 * * * * ?", "FIRE_ONCE_NOW", "2024-01-01T01:00:10Z");
        assert!(
            s.sync([a], t("2024-01-01T01:00:20Z"), RULES, &HashMap::new())
                .due
                .is_empty()
        );
    }

    #[test]
    fn changed_and_lost_jobs() {
        let mut s = FireSchedule::default();
        let a = job("a", "0 * * * * ?", "FIRE_ONCE_NOW", "2024-01-01T00:00:00Z");
        let b = job("b", "0 * * * * ?", "FIRE_ONCE_NOW", "2024-01-01T00:00:00Z");
        s.sync([a, b], t("2024-01-01T00:00:30Z"), RULES, &HashMap::new());
        assert_eq!(s.len(), 2);
        let a2 = job("a", "0 0 * * * ?", "FIRE_ONCE_NOW", "2024-01-01T00:00:40Z");
        let step = s.sync([a2], t("2024-01-01T00:00:41Z"), RULES, &HashMap::new());
        assert_eq!((step.gained, step.lost), (0, 1));
        assert_eq!(s.len(), 1);
        assert_eq!(s.next_deadline(), Some(t("2024-01-01T01:00:00Z")));
    }

    #[test]
    fn the_window_yields_every_instant_up_to_its_horizon_on_time() {
        let mut s = FireSchedule::default();
        let a = job("a", "* * * * * ?", "DO_NOTHING", "2024-01-01T00:00:00Z");
        s.sync([a], t("2024-01-01T00:00:00.5Z"), RULES, &HashMap::new());
        let step = s.take_ahead(
            t("2024-01-01T00:00:00.5Z"),
            t("2024-01-01T00:00:02.5Z"),
            RULES,
            usize::MAX,
        );
        assert_eq!(
            fires(&step),
            ["01", "02"].map(|sec| (
                "a".to_string(),
                format!("2024-01-01T00:00:{sec}+00:00"),
                false
            ))
        );
        assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:00:03Z")));
        // The next window starts where this one ended: nothing twice.
        let step = s.take_ahead(
            t("2024-01-01T00:00:01Z"),
            t("2024-01-01T00:00:03Z"),
            RULES,
            usize::MAX,
        );
        assert_eq!(
            fires(&step),
            [(
                "a".to_string(),
                "2024-01-01T00:00:03+00:00".to_string(),
                false
            )]
        );
    }

    #[test]
    fn withdrawn_instants_are_owed_again_under_the_edited_definition() {
        let mut s = FireSchedule::default();
        let a = job("a", "* * * * * ?", "DO_NOTHING", "2024-01-01T00:00:00Z");
        s.sync([a], t("2024-01-01T00:00:00.5Z"), RULES, &HashMap::new());
        let now = t("2024-01-01T00:00:00.5Z");
        s.take_ahead(now, t("2024-01-01T00:00:02.5Z"), RULES, usize::MAX);
        // Edited at 00:00:01.2 to fire every other second; the claims of 02 (and 01, which
        // waited for a call slot) were withdrawn, so the schedule rewinds to 01.
        s.rewind("a", t("2024-01-01T00:00:01Z"));
        let a2 = job("a", "*/2 * * * * ?", "DO_NOTHING", "2024-01-01T00:00:01.1Z");
        let now = t("2024-01-01T00:00:01.2Z");
        let step = s.sync([a2], now, RULES, &HashMap::new());
        assert!(step.due.is_empty(), "01 is not an instant of the new cron");
        assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:00:02Z")));
        // Rewinding to a later instant than the next one changes nothing.
        s.rewind("a", t("2024-01-01T00:00:04Z"));
        assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:00:02Z")));
    }

    #[test]
    fn a_withdrawn_instant_already_past_is_owed_under_the_new_definition() {
        let mut s = FireSchedule::default();
        let a = job("a", "* * * * * ?", "DO_NOTHING", "2024-01-01T00:00:00Z");
        s.sync([a], t("2024-01-01T00:00:00.5Z"), RULES, &HashMap::new());
        s.take_ahead(
            t("2024-01-01T00:00:00.5Z"),
            t("2024-01-01T00:00:02.5Z"),
            RULES,
            usize::MAX,
        );
        // The edit is seen at 02.1, after the instant 02, whose claim was still waiting.
        s.rewind("a", t("2024-01-01T00:00:02Z"));
        let a2 = job("a", "*/2 * * * * ?", "DO_NOTHING", "2024-01-01T00:00:01.9Z");
        let step = s.sync([a2], t("2024-01-01T00:00:02.1Z"), RULES, &HashMap::new());
        assert_eq!(
            fires(&step),
            [(
                "a".to_string(),
                "2024-01-01T00:00:02+00:00".to_string(),
                false
            )]
        );
    }

    #[test]
    fn a_gained_job_starts_after_the_fire_its_previous_owner_claimed_ahead() {
        let mut s = FireSchedule::default();
        let a = job("a", "* * * * * ?", "FIRE_ONCE_NOW", "2024-01-01T00:00:00Z");
        let last = HashMap::from([("a".to_string(), t("2024-01-01T00:00:12Z"))]);
        let step = s.sync([a], t("2024-01-01T00:00:10.5Z"), RULES, &last);
        assert!(step.due.is_empty());
        assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:00:13Z")));
    }

    /// The entries of `s` and their next instants, by name.
    fn entries(s: &FireSchedule) -> Vec<(String, Option<DateTime<Utc>>)> {
        let mut v: Vec<_> = s
            .entries
            .iter()
            .map(|(k, next)| (k.name().to_string(), *next))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn an_incremental_reload_changes_only_the_jobs_in_it() {
        let every_minute =
            |name: &str| job(name, "0 * * * * ?", "FIRE_ONCE_NOW", "2024-01-01T00:00:00Z");
        let mut s = FireSchedule::default();
        let jobs: Vec<_> = ["edited", "deleted", "disabled", "moved", "kept"]
            .into_iter()
            .map(every_minute)
            .collect();
        let kept = jobs[4].clone();
        s.sync(jobs, t("2024-01-01T00:00:30Z"), RULES, &HashMap::new());
        // The delta: one job edited to fire hourly; one deleted, one disabled and one now
        // owned by another instance (the engine names all three as not owned); one created.
        let edited = job(
            "edited",
            "0 0 * * * ?",
            "FIRE_ONCE_NOW",
            "2024-01-01T00:00:40Z",
        );
        let created = job(
            "created",
            "0 0 * * * ?",
            "FIRE_ONCE_NOW",
            "2024-01-01T00:00:40Z",
        );
        let step = s.apply(
            [edited, created],
            &["deleted", "disabled", "moved"],
            t("2024-01-01T00:00:41Z"),
            RULES,
            &HashMap::new(),
        );
        assert_eq!((step.gained, step.lost), (1, 3));
        assert!(step.due.is_empty() && step.skipped.is_empty());
        assert_eq!(
            entries(&s),
            [
                ("created".to_string(), Some(t("2024-01-01T01:00:00Z"))),
                ("edited".to_string(), Some(t("2024-01-01T01:00:00Z"))),
                ("kept".to_string(), Some(t("2024-01-01T00:01:00Z"))),
            ]
        );
        // The job the delta did not name kept its definition and its place in the queue.
        assert!(Arc::ptr_eq(
            &s.entries.get_key_value("kept").unwrap().0.0,
            &kept
        ));
        assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:01:00Z")));
        // Naming a job this instance never had is no loss.
        let step = s.apply(
            std::iter::empty(),
            &["never-here"],
            t("2024-01-01T00:00:42Z"),
            RULES,
            &HashMap::new(),
        );
        assert_eq!(step.lost, 0);
    }

    #[test]
    fn an_edit_around_a_fire_owes_the_same_in_a_delta_as_in_a_full_sync() {
        // Scheduled for 00:01:00; the edit (to every 30 s) lands 0.5 s after that instant,
        // before the loop took it: the new definition's 00:01:00 is owed, on time.
        let a = job("a", "0 * * * * ?", "FIRE_ONCE_NOW", "2024-01-01T00:00:00Z");
        let edit = job(
            "a",
            "0/30 * * * * ?",
            "FIRE_ONCE_NOW",
            "2024-01-01T00:01:00.4Z",
        );
        let now = t("2024-01-01T00:01:00.5Z");
        let mut full = FireSchedule::default();
        full.sync(
            [a.clone()],
            t("2024-01-01T00:00:30Z"),
            RULES,
            &HashMap::new(),
        );
        let by_sync = full.sync([edit.clone()], now, RULES, &HashMap::new());
        let mut delta = FireSchedule::default();
        delta.sync([a], t("2024-01-01T00:00:30Z"), RULES, &HashMap::new());
        let by_apply = delta.apply([edit], &[] as &[&str], now, RULES, &HashMap::new());
        let owed = [(
            "a".to_string(),
            "2024-01-01T00:01:00+00:00".to_string(),
            false,
        )];
        assert_eq!(fires(&by_sync), owed);
        assert_eq!(fires(&by_apply), owed);
        assert_eq!(entries(&full), entries(&delta));
        assert_eq!(delta.next_deadline(), Some(t("2024-01-01T00:01:30Z")));
    }

    #[test]
    fn a_job_gained_in_a_delta_gets_the_catch_up_rules() {
        // Enabled again at 01:00:10 (its enabled_since): the 01:00:00 instant, missed while
        // it was disabled, is not owed.
        let enabled = job("a", "0 * * * * ?", "FIRE_ONCE_NOW", "2024-01-01T01:00:10Z");
        let mut s = FireSchedule::default();
        let step = s.apply(
            [enabled],
            &[] as &[&str],
            t("2024-01-01T01:00:20Z"),
            RULES,
            &HashMap::new(),
        );
        assert_eq!(step.gained, 1);
        assert!(step.due.is_empty() && step.skipped.is_empty());
        // Handed over from an instance that last fired 01:00:00, 3 s after 01:01:00: that
        // instant is owed (late within the tolerance), nothing before it.
        let moved = job("b", "0 * * * * ?", "DO_NOTHING", "2024-01-01T00:00:00Z");
        let last = HashMap::from([("b".to_string(), t("2024-01-01T01:00:00Z"))]);
        let step = s.apply(
            [moved],
            &[] as &[&str],
            t("2024-01-01T01:01:03Z"),
            RULES,
            &last,
        );
        assert_eq!(
            fires(&step),
            [("b".into(), "2024-01-01T01:01:00+00:00".into(), false)]
        );
    }
}
