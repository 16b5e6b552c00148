//! Calendars: named sets of excluded dates (configuration `[[calendars]]`), and a job's
//! schedule under one.
//!
//! Rules:
//! - a calendar excludes whole dates in its own time zone: every instant from the first
//!   moment of an excluded date to the first moment of the next date;
//! - a job naming a calendar has exactly its schedule's instants minus the excluded ones, for
//!   firing, for the misfire rules (the latest missed instant is the latest *allowed* one)
//!   and for the preview of next fire times;
//! - excluded dates never fire late: an instant on an excluded date is not owed, and nothing
//!   is caught up when the excluded dates end.
//!
//! A run of excluded dates costs one cron search, however long it is: the search jumps to the
//! first moment after it.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;

use super::Timing;
use super::timing::{rate_latest_at_or_before, rate_next_after};

/// A calendar of excluded dates in a time zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    tz: Tz,
    /// Disjoint, sorted, inclusive date ranges, adjacent ones merged.
    excluded: Vec<(NaiveDate, NaiveDate)>,
}

/// Every configured calendar, by name.
pub type Calendars = BTreeMap<String, Arc<Calendar>>;

impl Calendar {
    /// A calendar excluding `exclude` (`2026-10-01`, or an inclusive range
    /// `2026-10-02/2026-10-07`) in `tz`.
    pub fn parse(tz: Tz, exclude: &[String]) -> Result<Self, String> {
        let mut ranges = Vec::with_capacity(exclude.len());
        for entry in exclude {
            let date = |s: &str| {
                NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
                    .map_err(|_| format!("`{entry}` is not a date (YYYY-MM-DD) or a range of them"))
            };
            let (from, to) = match entry.split_once('/') {
                Some((a, b)) => (date(a)?, date(b)?),
                None => (date(entry)?, date(entry)?),
            };
            if from > to {
                return Err(format!("`{entry}` ends before it starts"));
            }
            ranges.push((from, to));
        }
        ranges.sort();
        let mut excluded: Vec<(NaiveDate, NaiveDate)> = Vec::with_capacity(ranges.len());
        for (from, to) in ranges {
            match excluded.last_mut() {
                Some(last) if from <= last.1.succ_opt().unwrap_or(last.1) => {
                    last.1 = last.1.max(to)
                }
                _ => excluded.push((from, to)),
            }
        }
        Ok(Self { tz, excluded })
    }

    /// The run of excluded dates `at` falls in, as instants: from its first moment to the
    /// first moment after it.
    pub fn excluded_run(&self, at: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let date = at.with_timezone(&self.tz).date_naive();
        let i = self.excluded.partition_point(|(_, to)| *to < date);
        let (from, to) = *self.excluded.get(i).filter(|(from, _)| *from <= date)?;
        Some((self.day_start(from), self.day_start(to.succ_opt()?)))
    }

    /// The first moment of `date` here (a date that starts in a DST gap starts at its first
    /// existing moment).
    fn day_start(&self, date: NaiveDate) -> DateTime<Utc> {
        let midnight = date.and_hms_opt(0, 0, 0).expect("midnight exists");
        (0..24 * 60)
            .find_map(|m| {
                self.tz
                    .from_local_datetime(&(midnight + Duration::minutes(m)))
                    .earliest()
            })
            .map_or_else(|| midnight.and_utc(), |t| t.with_timezone(&Utc))
    }
}

/// A job's instants (its schedule type's, a cron's in a time zone), minus a calendar's
/// excluded dates.
#[derive(Debug, Clone, Copy)]
pub struct Schedule<'a> {
    pub timing: &'a Timing,
    pub tz: Tz,
    pub calendar: Option<&'a Calendar>,
    /// For a `FIXED_DELAY` job whose previous fire has ended: where its instants start again
    /// (see [`Timing::after_fire_ended`]); ignored by the other types.
    pub restart: Option<DateTime<Utc>>,
}

impl Schedule<'_> {
    /// The same schedule, a `FIXED_DELAY` job's instants starting again at `at`.
    pub fn restarted(self, at: DateTime<Utc>) -> Self {
        Self {
            restart: Some(at),
            ..self
        }
    }

    fn timing_next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match (self.timing, self.restart) {
            (Timing::FixedDelay { interval, start }, Some(at)) => {
                rate_next_after(*interval, at.max(*start), after)
            }
            (timing, _) => timing.next_after(after, self.tz),
        }
    }

    fn timing_latest_at_or_before(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match (self.timing, self.restart) {
            (Timing::FixedDelay { interval, start }, Some(from)) => {
                rate_latest_at_or_before(*interval, from.max(*start), at)
            }
            (timing, _) => timing.latest_at_or_before(at, self.tz),
        }
    }

    /// The first allowed instant strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut cursor = after;
        loop {
            let t = self.timing_next_after(cursor)?;
            match self.calendar.and_then(|c| c.excluded_run(t)) {
                None => return Some(t),
                // On to the first instant after the excluded run.
                Some((_, end)) => cursor = end - Duration::seconds(1),
            }
        }
    }

    /// The latest allowed instant at or before `at`.
    pub fn latest_at_or_before(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut cursor = at;
        loop {
            let t = self.timing_latest_at_or_before(cursor)?;
            match self.calendar.and_then(|c| c.excluded_run(t)) {
                None => return Some(t),
                Some((start, _)) => cursor = start - Duration::seconds(1),
            }
        }
    }

    /// Up to `count` allowed instants strictly after `after`.
    pub fn upcoming(&self, after: DateTime<Utc>, count: usize) -> Vec<DateTime<Utc>> {
        let mut out = Vec::with_capacity(count);
        let mut cursor = after;
        while out.len() < count {
            let Some(next) = self.next_after(cursor) else {
                break;
            };
            out.push(next);
            cursor = next;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::CronSchedule;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn cal(tz: &str, exclude: &[&str]) -> Calendar {
        let exclude: Vec<String> = exclude.iter().map(|s| s.to_string()).collect();
        Calendar::parse(tz.parse().unwrap(), &exclude).unwrap()
    }

    #[test]
    fn dates_and_inclusive_ranges_parse_and_merge() {
        let c = cal(
            "UTC",
            &["2026-10-03/2026-10-07", "2026-10-01", "2026-10-02"],
        );
        assert_eq!(
            c.excluded,
            [(
                NaiveDate::from_ymd_opt(2026, 10, 1).unwrap(),
                NaiveDate::from_ymd_opt(2026, 10, 7).unwrap()
            )]
        );
        for bad in [
            "2026-13-01",
            "2026-10-07/2026-10-01",
            "tomorrow",
            "2026-10-01/",
        ] {
            assert!(
                Calendar::parse(Tz::UTC, &[bad.to_string()]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_excluded_date_is_excluded_in_the_calendars_time_zone() {
        // 2026-10-01 in Shanghai is 2026-09-30T16:00Z to 2026-10-01T16:00Z.
        let c = cal("Asia/Shanghai", &["2026-10-01"]);
        assert_eq!(
            c.excluded_run(utc("2026-10-01T02:00:00Z")),
            Some((utc("2026-09-30T16:00:00Z"), utc("2026-10-01T16:00:00Z")))
        );
        assert!(c.excluded_run(utc("2026-09-30T15:59:59Z")).is_none());
        assert!(c.excluded_run(utc("2026-10-01T16:00:00Z")).is_none());
    }

    #[test]
    fn a_job_with_a_calendar_skips_the_excluded_dates_in_one_search() {
        let cron = Timing::Cron(CronSchedule::parse("0 0 2 * * ?").unwrap());
        let c = cal("UTC", &["2026-10-01/2026-10-07"]);
        let s = Schedule {
            timing: &cron,
            tz: Tz::UTC,
            calendar: Some(&c),
            restart: None,
        };
        assert_eq!(
            s.upcoming(utc("2026-09-29T12:00:00Z"), 3),
            [
                utc("2026-09-30T02:00:00Z"),
                utc("2026-10-08T02:00:00Z"),
                utc("2026-10-09T02:00:00Z")
            ]
        );
        assert_eq!(
            s.latest_at_or_before(utc("2026-10-05T12:00:00Z")),
            Some(utc("2026-09-30T02:00:00Z")),
            "the latest missed instant is the latest allowed one"
        );
        // Every second, a week excluded: the next instant is the first second after it.
        let every = Timing::Cron(CronSchedule::parse("* * * * * ?").unwrap());
        let s = Schedule {
            timing: &every,
            ..s
        };
        assert_eq!(
            s.next_after(utc("2026-10-01T00:00:00Z")),
            Some(utc("2026-10-08T00:00:00Z"))
        );
        assert_eq!(
            s.latest_at_or_before(utc("2026-10-07T23:59:59Z")),
            Some(utc("2026-09-30T23:59:59Z"))
        );
    }

    #[test]
    fn a_fixed_rate_job_with_a_calendar_resumes_on_its_grid_after_the_excluded_dates() {
        let every_7h = Timing::FixedRate {
            interval: 7 * 3600,
            start: utc("2026-09-30T00:00:00Z"),
        };
        let c = cal("UTC", &["2026-10-01"]);
        let s = Schedule {
            timing: &every_7h,
            tz: Tz::UTC,
            calendar: Some(&c),
            restart: None,
        };
        // 09-30 21:00, then 10-01 04:00, 11:00, 18:00 are excluded; 10-02 01:00 is next.
        assert_eq!(
            s.upcoming(utc("2026-09-30T20:00:00Z"), 2),
            [utc("2026-09-30T21:00:00Z"), utc("2026-10-02T01:00:00Z")]
        );
        assert_eq!(
            s.latest_at_or_before(utc("2026-10-02T00:00:00Z")),
            Some(utc("2026-09-30T21:00:00Z"))
        );
    }

    #[test]
    fn without_a_calendar_the_schedule_is_the_cron() {
        let cron = CronSchedule::parse("0 30 * * * ?").unwrap();
        let timing = Timing::Cron(cron.clone());
        let s = Schedule {
            timing: &timing,
            tz: Tz::UTC,
            calendar: None,
            restart: None,
        };
        assert_eq!(
            s.next_after(utc("2026-10-01T00:00:00Z")),
            cron.next_after(utc("2026-10-01T00:00:00Z"), Tz::UTC)
        );
    }
}
