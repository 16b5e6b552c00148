//! The schedule's rules, instant by instant, with the clock in the test's hand.
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

#[test]
fn a_job_naming_a_calendar_is_neither_fired_nor_owed_on_its_excluded_dates() {
    let holidays =
        crate::jobs::Calendar::parse(chrono_tz::Tz::UTC, &["2024-01-02/2024-01-03".to_string()])
            .unwrap();
    let calendars: Calendars = [("holidays".to_string(), Arc::new(holidays))].into();
    let mut s = FireSchedule::new(Arc::new(calendars));
    let body = serde_json::json!({
        "name": "daily", "serviceName": "s", "handler": "h", "cron": "0 0 2 * * ?",
        "calendar": "holidays"
    });
    let daily = Arc::new(JobDefinition::stored(body, t("2024-01-01T00:00:00Z")));
    s.sync([daily], t("2024-01-01T03:00:00Z"), RULES, &HashMap::new());
    assert_eq!(
        s.next_deadline(),
        Some(t("2024-01-04T02:00:00Z")),
        "the 2nd and the 3rd are excluded"
    );
    // On the 4th: its own instant, and nothing for the excluded dates before it.
    let step = s.take_due(t("2024-01-04T02:00:01Z"), RULES, usize::MAX);
    assert_eq!(
        fires(&step),
        [("daily".into(), "2024-01-04T02:00:00+00:00".into(), false)]
    );
    // Owed again from the 2nd (its fires withdrawn): only allowed instants come back.
    let job = s.entries.keys().next().unwrap().0.clone();
    let step = owed_from(
        &job,
        &s.calendars,
        t("2024-01-02T00:00:00Z"),
        t("2024-01-04T02:00:02Z"),
        RULES,
    );
    assert_eq!(
        fires(&step),
        [("daily".into(), "2024-01-04T02:00:00+00:00".into(), false)]
    );
}

fn timed(name: &str, schedule: serde_json::Value, updated: &str) -> Arc<JobDefinition> {
    let mut body = serde_json::json!({"name": name, "serviceName": "s", "handler": "h"});
    body.as_object_mut()
        .unwrap()
        .extend(schedule.as_object().unwrap().clone());
    Arc::new(JobDefinition::stored(body, t(updated)))
}

#[test]
fn a_fixed_rate_job_gained_late_fires_its_latest_missed_instant_once_then_keeps_its_grid() {
    let mut s = FireSchedule::default();
    let every_7s = timed(
        "rate",
        serde_json::json!({"scheduleType": "FIXED_RATE", "intervalSeconds": 7,
            "startAt": "2024-01-01T00:00:00Z"}),
        "2024-01-01T00:00:00Z",
    );
    // Instants 00, 07, …, 56, 63 (01:03): gained at 01:05 with the last recorded fire at 00:21.
    let last = HashMap::from([("rate".to_string(), t("2024-01-01T00:00:21Z"))]);
    let step = s.sync([every_7s], t("2024-01-01T00:01:05Z"), RULES, &last);
    assert_eq!(
        fires(&step),
        [
            ("rate".into(), "2024-01-01T00:00:56+00:00".into(), true),
            ("rate".into(), "2024-01-01T00:01:03+00:00".into(), false)
        ]
    );
    assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:01:10Z")));
    let step = s.take_due(t("2024-01-01T00:01:10.001Z"), RULES, usize::MAX);
    assert_eq!(
        fires(&step),
        [("rate".into(), "2024-01-01T00:01:10+00:00".into(), false)]
    );
}

#[test]
fn a_once_job_fires_at_its_instant_and_leaves_the_queue() {
    let mut s = FireSchedule::default();
    let once = timed(
        "once",
        serde_json::json!({"scheduleType": "ONCE", "startAt": "2024-01-01T00:00:30Z"}),
        "2024-01-01T00:00:00Z",
    );
    let none = timed(
        "none",
        serde_json::json!({"scheduleType": "NONE"}),
        "2024-01-01T00:00:00Z",
    );
    s.sync(
        [once, none],
        t("2024-01-01T00:00:01Z"),
        RULES,
        &HashMap::new(),
    );
    assert_eq!(s.len(), 2, "both are owned");
    assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:00:30Z")));
    let step = s.take_due(t("2024-01-01T00:00:30.004Z"), RULES, usize::MAX);
    assert_eq!(
        fires(&step),
        [("once".into(), "2024-01-01T00:00:30+00:00".into(), false)]
    );
    assert_eq!(s.next_deadline(), None, "nothing more, for either job");
}

fn fixed_delay(seconds: u32, updated: &str) -> Arc<JobDefinition> {
    timed(
        "delay",
        serde_json::json!({"scheduleType": "FIXED_DELAY", "intervalSeconds": seconds,
            "startAt": "2024-01-01T00:00:10Z"}),
        updated,
    )
}

/// A 5 s delay from 10, its first fire just taken.
fn fired_at_10() -> FireSchedule {
    let mut s = FireSchedule::default();
    s.sync(
        [fixed_delay(5, "2024-01-01T00:00:00Z")],
        t("2024-01-01T00:00:01Z"),
        RULES,
        &HashMap::new(),
    );
    assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:00:10Z")));
    let step = s.take_due(t("2024-01-01T00:00:10.003Z"), RULES, usize::MAX);
    assert_eq!(
        fires(&step),
        [("delay".into(), "2024-01-01T00:00:10+00:00".into(), false)]
    );
    s
}

#[test]
fn a_fixed_delay_job_fires_again_its_interval_after_the_previous_fire_ended() {
    let mut s = fired_at_10();
    assert_eq!(
        s.next_deadline(),
        None,
        "nothing is due while the fire runs"
    );
    assert_eq!(
        s.waiting(),
        [("delay".to_string(), t("2024-01-01T00:00:10Z"))]
    );
    // Its rate would have fired at 15 and 20: a fire that runs 12.2 s has no instant then.
    assert!(
        s.take_due(t("2024-01-01T00:00:21Z"), RULES, usize::MAX)
            .due
            .is_empty()
    );
    // Ended at 22.2: the next instant is 23 + 5.
    let step = s.fire_ended(
        "delay",
        t("2024-01-01T00:00:10Z"),
        Some(t("2024-01-01T00:00:22.2Z")),
        t("2024-01-01T00:00:22.9Z"),
        RULES,
    );
    assert!(step.due.is_empty());
    assert!(s.waiting().is_empty());
    assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:00:28Z")));
    let step = s.take_due(t("2024-01-01T00:00:28.001Z"), RULES, usize::MAX);
    assert_eq!(
        fires(&step),
        [("delay".into(), "2024-01-01T00:00:28+00:00".into(), false)]
    );
    assert_eq!(s.next_deadline(), None);
}

#[test]
fn the_end_of_a_fire_the_job_no_longer_waits_for_changes_nothing() {
    let mut s = fired_at_10();
    let other = s.fire_ended(
        "delay",
        t("2024-01-01T00:00:05Z"),
        Some(t("2024-01-01T00:00:06Z")),
        t("2024-01-01T00:00:11Z"),
        RULES,
    );
    assert!(other.due.is_empty());
    assert_eq!(s.waiting().len(), 1, "still waiting for the fire at 10");
    assert_eq!(s.next_deadline(), None);
}

#[test]
fn a_fixed_delay_job_gained_waits_for_its_previous_owners_last_fire() {
    let mut s = FireSchedule::default();
    let last = HashMap::from([("delay".to_string(), t("2024-01-01T00:00:40Z"))]);
    let step = s.sync(
        [fixed_delay(5, "2024-01-01T00:00:00Z")],
        t("2024-01-01T00:01:00Z"),
        RULES,
        &last,
    );
    assert!(step.due.is_empty(), "no catch-up while that fire may run");
    assert_eq!(s.next_deadline(), None);
    assert_eq!(
        s.waiting(),
        [("delay".to_string(), t("2024-01-01T00:00:40Z"))]
    );
    // It ended at 00:44 long ago: its instants 00:49, 00:54, 00:59 passed; the latest is
    // caught up under FIRE_ONCE_NOW (the default), and the job waits for it.
    let step = s.fire_ended(
        "delay",
        t("2024-01-01T00:00:40Z"),
        Some(t("2024-01-01T00:00:44Z")),
        t("2024-01-01T00:01:00Z"),
        RULES,
    );
    assert_eq!(
        fires(&step),
        [("delay".into(), "2024-01-01T00:00:59+00:00".into(), false)],
        "within the tolerance: on time"
    );
    assert_eq!(
        s.waiting(),
        [("delay".to_string(), t("2024-01-01T00:00:59Z"))]
    );
}

#[test]
fn a_fixed_delay_job_not_held_here_is_owed_nothing_its_owner_waits_for_its_latest_fire() {
    // A fire at 38 owed back (the database cut while it was recorded) after its job moved;
    // the instants 38 to 43 passed within the tolerance. A job on a rate owes each of them;
    // a fixed delay's owner derives its next fire from the end of its latest, so here none.
    let owed = |schedule_type: &str| {
        let job = timed(
            "j",
            serde_json::json!({"scheduleType": schedule_type, "intervalSeconds": 1,
                "startAt": "2024-01-01T00:00:10Z"}),
            "2024-01-01T00:00:00Z",
        );
        let from = t("2024-01-01T00:00:38Z");
        let step = owed_from(
            &job,
            &Calendars::default(),
            from,
            from + Duration::milliseconds(5_500),
            RULES,
        );
        assert!(step.skipped.is_empty());
        step.due.len()
    };
    assert_eq!(owed("FIXED_RATE"), 6);
    assert_eq!(owed("FIXED_DELAY"), 0);
}

#[test]
fn a_fixed_delay_fire_the_store_refused_waits_for_the_fire_it_names() {
    let mut s = fired_at_10();
    // The fire at 10 was refused: another scheduler's fire at 8 is the latest, still open.
    s.behind(
        "delay",
        t("2024-01-01T00:00:10Z"),
        t("2024-01-01T00:00:08Z"),
    );
    assert_eq!(
        s.waiting(),
        [("delay".to_string(), t("2024-01-01T00:00:08Z"))]
    );
    assert_eq!(s.next_deadline(), None, "nothing due while that fire runs");
    // A refusal of a fire the job no longer waits for changes nothing.
    s.behind(
        "delay",
        t("2024-01-01T00:00:10Z"),
        t("2024-01-01T00:00:30Z"),
    );
    assert_eq!(
        s.waiting(),
        [("delay".to_string(), t("2024-01-01T00:00:08Z"))]
    );
    // It ended at 12.5: the next instant is 13 + 5.
    s.fire_ended(
        "delay",
        t("2024-01-01T00:00:08Z"),
        Some(t("2024-01-01T00:00:12.5Z")),
        t("2024-01-01T00:00:12.9Z"),
        RULES,
    );
    assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:00:18Z")));
}

#[test]
fn a_fixed_delay_job_owed_several_instants_fires_only_the_latest() {
    let mut s = FireSchedule::default();
    // Gained with no fire known, 3 s after instants 10 and 11 of a 1 s rate (tolerance 5 s).
    let step = s.sync(
        [fixed_delay(1, "2024-01-01T00:00:00Z")],
        t("2024-01-01T00:00:12.5Z"),
        RULES,
        &HashMap::new(),
    );
    assert_eq!(
        fires(&step),
        [("delay".into(), "2024-01-01T00:00:12+00:00".into(), false)]
    );
    assert_eq!(s.next_deadline(), None);
}

#[test]
fn an_edit_while_a_fixed_delay_fire_runs_changes_the_next_wait_not_this_one() {
    let mut s = fired_at_10();
    let edited = fixed_delay(30, "2024-01-01T00:00:11Z");
    let step = s.apply(
        [edited],
        &[] as &[&str],
        t("2024-01-01T00:00:11Z"),
        RULES,
        &HashMap::new(),
    );
    assert!(step.due.is_empty());
    assert_eq!(s.next_deadline(), None, "still waiting");
    s.fire_ended(
        "delay",
        t("2024-01-01T00:00:10Z"),
        Some(t("2024-01-01T00:00:12Z")),
        t("2024-01-01T00:00:12.5Z"),
        RULES,
    );
    assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:00:42Z")));
}

#[test]
fn a_withdrawn_fixed_delay_fire_is_owed_again_and_waited_for_again() {
    let mut s = FireSchedule::default();
    s.sync(
        [fixed_delay(5, "2024-01-01T00:00:00Z")],
        t("2024-01-01T00:00:01Z"),
        RULES,
        &HashMap::new(),
    );
    s.take_due(t("2024-01-01T00:00:09.9Z"), RULES, usize::MAX);
    s.take_ahead(
        t("2024-01-01T00:00:09.9Z"),
        t("2024-01-01T00:00:10Z"),
        RULES,
        usize::MAX,
    );
    assert_eq!(s.waiting().len(), 1);
    s.rewind("delay", t("2024-01-01T00:00:10Z"));
    assert!(s.waiting().is_empty());
    assert_eq!(s.next_deadline(), Some(t("2024-01-01T00:00:10Z")));
}
