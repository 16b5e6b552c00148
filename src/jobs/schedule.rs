//! Cron expressions and time zones.
//!
//! Two dialects, told apart by the number of fields:
//! - 6 or 7 fields: Quartz/Spring (`sec min hour dom month dow [year]`), `?`, `L`, `W`, `#`,
//!   `0/5` steps, names; numeric weekdays are Quartz's (1 = SUN … 7 = SAT), and a restricted
//!   day-of-month and day-of-week must both match.
//! - 5 fields and `@daily`-style nicknames: Unix cron (seconds = 0, 0/7 = SUN, day-of-month
//!   OR day-of-week as in Vixie cron).
//!
//! Times are evaluated in the job's IANA time zone by croner, which follows the OCPS rules
//! for daylight saving: a wall-clock time skipped by a spring-forward gap fires at the first
//! instant after the gap (fixed-time jobs only; interval jobs such as `0 */5 * * * ?` simply
//! have no fire inside the gap), and a wall-clock time repeated by a fall-back overlap fires
//! once, at its first occurrence, for fixed-time jobs, and at both for interval jobs.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use chrono::{DateTime, SubsecRound, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::Serialize;

/// A parsed cron expression together with the text it came from.
///
/// Parsed patterns are interned: croner keeps a byte per possible value of every field (the
/// year field alone spans 5000 years, about 5 KB), and real fleets share a handful of
/// schedules across thousands of jobs, so identical texts share one parsed pattern.
#[derive(Clone)]
pub struct CronSchedule {
    text: String,
    cron: Arc<Cron>,
}

fn interned(text: &str, parse: impl FnOnce() -> Result<Cron, String>) -> Result<Arc<Cron>, String> {
    static CACHE: OnceLock<Mutex<HashMap<String, Weak<Cron>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(live) = cache
        .lock()
        .expect("cron cache lock")
        .get(text)
        .and_then(Weak::upgrade)
    {
        return Ok(live);
    }
    let cron = Arc::new(parse()?);
    let mut map = cache.lock().expect("cron cache lock");
    map.insert(text.to_string(), Arc::downgrade(&cron));
    if map.len() >= 1024 && map.len().is_power_of_two() {
        map.retain(|_, w| w.strong_count() > 0);
    }
    Ok(cron)
}

impl fmt::Debug for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CronSchedule").field(&self.text).finish()
    }
}

impl PartialEq for CronSchedule {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl CronSchedule {
    pub const MAX_LEN: usize = 100;

    pub fn parse(raw: &str) -> Result<Self, String> {
        let text = raw.trim();
        if text.is_empty() || text.len() > Self::MAX_LEN {
            return Err(format!("must be 1 to {} characters long", Self::MAX_LEN));
        }
        let fields = text.split_whitespace().count();
        let parser = match fields {
            6 | 7 => CronParser::builder()
                .seconds(Seconds::Required)
                .year(Year::Optional)
                .alternative_weekdays(true)
                .dom_and_dow(true)
                .sloppy_ranges(true)
                .build(),
            5 => CronParser::builder()
                .seconds(Seconds::Disallowed)
                .year(Year::Disallowed)
                .sloppy_ranges(true)
                .build(),
            1 if text.starts_with('@') => CronParser::builder()
                .seconds(Seconds::Disallowed)
                .year(Year::Disallowed)
                .build(),
            n => {
                return Err(format!(
                    "expected 6 or 7 fields (Quartz: sec min hour day month weekday [year]) or 5 (Unix), found {n}"
                ));
            }
        };
        let cron = interned(text, || {
            parser
                .parse(text)
                .map_err(|e| format!("invalid cron expression: {e}"))
        })?;
        Ok(Self {
            text: text.to_string(),
            cron,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The first fire strictly after `after`, evaluated in `tz`, at second precision.
    pub fn next_after(&self, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        let local = after.trunc_subsecs(0).with_timezone(&tz);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    /// The latest fire at or before `at` (second precision), if any.
    pub fn latest_at_or_before(&self, at: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        let local = at.trunc_subsecs(0).with_timezone(&tz);
        self.cron
            .find_previous_occurrence(&local, true)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    /// Up to `count` fire times strictly after `after`.
    pub fn upcoming(&self, after: DateTime<Utc>, tz: Tz, count: usize) -> Vec<DateTime<Utc>> {
        let mut out = Vec::with_capacity(count);
        let mut cursor = after;
        while out.len() < count {
            match self.next_after(cursor, tz) {
                Some(next) => {
                    out.push(next);
                    cursor = next;
                }
                None => break,
            }
        }
        out
    }
}

/// A known IANA time zone name such as `Asia/Shanghai`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeZoneName(Tz);

impl TimeZoneName {
    pub const UTC: Self = Self(Tz::UTC);

    pub fn parse(raw: &str) -> Result<Self, String> {
        Tz::from_str(raw).map(Self).map_err(|_| {
            format!(
                "`{}` is not a known IANA time zone",
                raw.chars().take(64).collect::<String>()
            )
        })
    }

    pub fn tz(self) -> Tz {
        self.0
    }

    pub fn name(self) -> &'static str {
        self.0.name()
    }
}

impl Serialize for TimeZoneName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for TimeZoneName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <String as serde::Deserialize>::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn next(expr: &str, tz: &str, after: &str) -> String {
        let tz: Tz = tz.parse().unwrap();
        CronSchedule::parse(expr)
            .unwrap()
            .next_after(utc(after), tz)
            .unwrap()
            .to_rfc3339()
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "hello",
            "* * *",
            "61 * * * * ?",
            "0 0 25 * * ?",
            "0 0 0 32 * ?",
            "0 0 0 ? * 9",
            "a b c d e f",
        ] {
            assert!(CronSchedule::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn known_next_fire_times() {
        let table = [
            // Quartz daily at 02:00.
            (
                "0 0 2 * * ?",
                "UTC",
                "2024-01-01T03:00:00Z",
                "2024-01-02T02:00:00+00:00",
            ),
            // Steps with a start value.
            (
                "0/5 * * * * ?",
                "UTC",
                "2024-01-01T00:00:02Z",
                "2024-01-01T00:00:05+00:00",
            ),
            // Last day of month, leap year February.
            (
                "0 0 12 L * ?",
                "UTC",
                "2024-02-10T00:00:00Z",
                "2024-02-29T12:00:00+00:00",
            ),
            (
                "0 0 12 L * ?",
                "UTC",
                "2023-02-10T00:00:00Z",
                "2023-02-28T12:00:00+00:00",
            ),
            // Month end across a 30-day month.
            (
                "0 0 0 L * ?",
                "UTC",
                "2024-04-30T00:00:01Z",
                "2024-05-31T00:00:00+00:00",
            ),
            // Quartz 6#3: third Friday (1 = SUN in Quartz numbering).
            (
                "0 0 10 ? * 6#3",
                "UTC",
                "2024-03-01T00:00:00Z",
                "2024-03-15T10:00:00+00:00",
            ),
            (
                "0 0 10 ? * FRI#3",
                "UTC",
                "2024-03-01T00:00:00Z",
                "2024-03-15T10:00:00+00:00",
            ),
            // LW: last weekday of the month (2024-03-31 is a Sunday).
            (
                "0 0 18 LW * ?",
                "UTC",
                "2024-03-01T00:00:00Z",
                "2024-03-29T18:00:00+00:00",
            ),
            // 15W: nearest weekday to the 15th (2024-06-15 is a Saturday).
            (
                "0 0 9 15W * ?",
                "UTC",
                "2024-06-01T00:00:00Z",
                "2024-06-14T09:00:00+00:00",
            ),
            // Optional year field.
            (
                "0 0 0 1 1 ? 2030",
                "UTC",
                "2024-06-01T00:00:00Z",
                "2030-01-01T00:00:00+00:00",
            ),
            // Weekday names and ranges.
            (
                "0 30 9 ? * MON-FRI",
                "UTC",
                "2024-06-08T00:00:00Z",
                "2024-06-10T09:30:00+00:00",
            ),
            // Unix 5-field: Sunday is 0.
            (
                "30 9 * * 0",
                "UTC",
                "2024-06-03T00:00:00Z",
                "2024-06-09T09:30:00+00:00",
            ),
            (
                "@daily",
                "UTC",
                "2024-06-03T10:00:00Z",
                "2024-06-04T00:00:00+00:00",
            ),
            // Time zones.
            (
                "0 0 2 * * ?",
                "Asia/Shanghai",
                "2024-01-01T00:00:00Z",
                "2024-01-01T18:00:00+00:00",
            ),
            // DST gap, Europe/Berlin 2024-03-31 02:00 -> 03:00: 02:30 fires at 03:00 CEST.
            (
                "0 30 2 * * ?",
                "Europe/Berlin",
                "2024-03-30T12:00:00Z",
                "2024-03-31T01:00:00+00:00",
            ),
            // DST overlap, Europe/Berlin 2024-10-27 03:00 -> 02:00: 02:30 fires once (CEST).
            (
                "0 30 2 * * ?",
                "Europe/Berlin",
                "2024-10-26T12:00:00Z",
                "2024-10-27T00:30:00+00:00",
            ),
            (
                "0 30 2 * * ?",
                "Europe/Berlin",
                "2024-10-27T00:30:00Z",
                "2024-10-28T01:30:00+00:00",
            ),
            // New York spring forward 2024-03-10 02:00 -> 03:00.
            (
                "0 30 2 * * ?",
                "America/New_York",
                "2024-03-09T12:00:00Z",
                "2024-03-10T07:00:00+00:00",
            ),
        ];
        for (expr, tz, after, want) in table {
            assert_eq!(next(expr, tz, after), want, "{expr} in {tz} after {after}");
        }
    }

    #[test]
    fn interval_jobs_run_on_both_sides_of_an_overlap() {
        // New York falls back 2024-11-03 02:00 EDT -> 01:00 EST: 01:30 happens twice.
        let tz: Tz = "America/New_York".parse().unwrap();
        let s = CronSchedule::parse("0 */30 * * * ?").unwrap();
        let times = s.upcoming(utc("2024-11-03T04:45:00Z"), tz, 4);
        let want = [
            "2024-11-03T05:00:00+00:00",
            "2024-11-03T05:30:00+00:00",
            "2024-11-03T06:00:00+00:00",
            "2024-11-03T06:30:00+00:00",
        ];
        assert_eq!(
            times.iter().map(|t| t.to_rfc3339()).collect::<Vec<_>>(),
            want
        );
    }

    #[test]
    fn next_is_strictly_after_and_second_aligned() {
        let s = CronSchedule::parse("* * * * * ?").unwrap();
        let t = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap()
            + chrono::Duration::milliseconds(400);
        assert_eq!(
            s.next_after(t, Tz::UTC).unwrap().to_rfc3339(),
            "2024-01-01T00:00:01+00:00"
        );
    }

    #[test]
    fn latest_at_or_before_includes_the_instant() {
        let s = CronSchedule::parse("0 */10 * * * ?").unwrap();
        let at = utc("2024-01-01T00:20:00Z");
        assert_eq!(s.latest_at_or_before(at, Tz::UTC), Some(at));
        assert_eq!(
            s.latest_at_or_before(utc("2024-01-01T00:29:59.900Z"), Tz::UTC),
            Some(at)
        );
    }

    #[test]
    fn identical_expressions_share_one_parsed_pattern() {
        let a = CronSchedule::parse("0 15 10 ? * MON-FRI").unwrap();
        let b = CronSchedule::parse("0 15 10 ? * MON-FRI").unwrap();
        assert!(Arc::ptr_eq(&a.cron, &b.cron));
        assert!(!Arc::ptr_eq(
            &a.cron,
            &CronSchedule::parse("0 15 11 ? * MON-FRI").unwrap().cron
        ));
        assert!(
            CronSchedule::parse("0 15 10 ? * MON-FRX").is_err(),
            "errors are not cached as patterns"
        );
    }

    #[test]
    fn time_zones() {
        assert!(TimeZoneName::parse("Asia/Shanghai").is_ok());
        assert!(TimeZoneName::parse("Mars/Base").is_err());
    }
}
