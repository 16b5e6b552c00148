//! When a job fires by itself: its schedule type and the instants that type yields.
//!
//! Rules (docs/api.md, "Schedule types"):
//! - `CRON`: the cron expression's instants in the job's time zone;
//! - `FIXED_RATE`: `startAt + k × intervalSeconds` for every k ≥ 0, whatever the previous fire
//!   did; `startAt` is a whole second;
//! - `FIXED_DELAY`: `intervalSeconds` after the previous fire's last range ended, rounded up
//!   to the whole second: the first instant is `startAt` (or the first `startAt + k ×
//!   intervalSeconds` still ahead), and once a fire ends its instants start again from its
//!   end plus the interval ([`Schedule::restarted`](super::Schedule)). Until then they are
//!   `FIXED_RATE`'s, so a job whose instant passed without a fire (disabled, no instance up)
//!   goes on at its next one; the engine fires one at a time and waits for its end;
//! - `ONCE`: `startAt`, and nothing after it;
//! - `NONE`: no instant; the job runs only when triggered, as a child, or by a backfill.
//!
//! Every type's instants are a function of the definition alone (and, for `FIXED_DELAY`, of
//! the previous fire's end as the database records it), so any instance that owns the job
//! computes the same instants and the same execution ids: the exactly-once rules that hold
//! for cron fires hold for every type. The misfire rules need two questions answered, the first
//! instant after a moment and the latest at or before one, and every type answers both.

use chrono::{DateTime, Duration, SubsecRound, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{CronSchedule, FieldError, choose};

/// The schedule types, as the API names them.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
    Default,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumString,
    strum::VariantNames,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum ScheduleType {
    /// The instants of `cron` in `timezone`.
    #[default]
    Cron,
    /// Every `intervalSeconds` from `startAt`.
    FixedRate,
    /// `intervalSeconds` after the previous fire's last range ended.
    FixedDelay,
    /// Once, at `startAt`.
    Once,
    /// Never by itself: by trigger, as a child job, or by a backfill.
    None,
}

impl ScheduleType {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The longest interval of a `FIXED_RATE` or `FIXED_DELAY` job: a leap year, in seconds.
pub const MAX_INTERVAL_SECONDS: i64 = 366 * 86_400;

/// A job's schedule type with the values that type needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Timing {
    Cron(CronSchedule),
    FixedRate {
        /// Seconds between instants, 1..=[`MAX_INTERVAL_SECONDS`].
        interval: u32,
        /// The first instant, a whole second.
        start: DateTime<Utc>,
    },
    /// Like `FixedRate` until a fire ends; then from its end plus the interval.
    FixedDelay {
        interval: u32,
        start: DateTime<Utc>,
    },
    Once(DateTime<Utc>),
    None,
}

impl Timing {
    pub fn schedule_type(&self) -> ScheduleType {
        match self {
            Self::Cron(_) => ScheduleType::Cron,
            Self::FixedRate { .. } => ScheduleType::FixedRate,
            Self::FixedDelay { .. } => ScheduleType::FixedDelay,
            Self::Once(_) => ScheduleType::Once,
            Self::None => ScheduleType::None,
        }
    }

    /// The cron expression of a `CRON` job.
    pub fn cron(&self) -> Option<&CronSchedule> {
        match self {
            Self::Cron(c) => Some(c),
            _ => None,
        }
    }

    /// The interval of a `FIXED_RATE` or `FIXED_DELAY` job, in seconds.
    pub fn interval_seconds(&self) -> Option<u32> {
        match self {
            Self::FixedRate { interval, .. } | Self::FixedDelay { interval, .. } => Some(*interval),
            _ => None,
        }
    }

    /// The first instant of a `FIXED_RATE` or `FIXED_DELAY` job, the instant of a `ONCE` job.
    pub fn start_at(&self) -> Option<DateTime<Utc>> {
        match self {
            Self::FixedRate { start, .. } | Self::FixedDelay { start, .. } | Self::Once(start) => {
                Some(*start)
            }
            _ => None,
        }
    }

    /// Whether fires wait for the previous one to end (`FIXED_DELAY`).
    pub fn waits_for_the_previous_fire(&self) -> bool {
        matches!(self, Self::FixedDelay { .. })
    }

    /// Where a `FIXED_DELAY` job's instants start again after a fire that ended at `end`:
    /// the end rounded up to the whole second, plus the interval (`None` for other types).
    pub fn after_fire_ended(&self, end: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let Self::FixedDelay { interval, .. } = self else {
            return None;
        };
        delay_restart(end, *interval)
    }

    /// The first instant strictly after `after` (`tz` is the cron's time zone).
    pub fn next_after(&self, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        match self {
            Self::Cron(cron) => cron.next_after(after, tz),
            Self::FixedRate { interval, start } | Self::FixedDelay { interval, start } => {
                rate_next_after(*interval, *start, after)
            }
            Self::Once(at) => (*at > after).then_some(*at),
            Self::None => None,
        }
    }

    /// The latest instant at or before `at` (`tz` is the cron's time zone).
    pub fn latest_at_or_before(&self, at: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        match self {
            Self::Cron(cron) => cron.latest_at_or_before(at, tz),
            Self::FixedRate { interval, start } | Self::FixedDelay { interval, start } => {
                rate_latest_at_or_before(*interval, *start, at)
            }
            Self::Once(t) => (*t <= at).then_some(*t),
            Self::None => None,
        }
    }
}

/// The first of `start + k × interval` (k ≥ 0) strictly after `after`.
pub fn rate_next_after(
    interval: u32,
    start: DateTime<Utc>,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let step = i64::from(interval) * 1000;
    let k = match (after - start).num_milliseconds() {
        ms if ms < 0 => 0,
        ms => ms / step + 1,
    };
    start.checked_add_signed(Duration::milliseconds(k.checked_mul(step)?))
}

/// The latest of `start + k × interval` (k ≥ 0) at or before `at`.
pub fn rate_latest_at_or_before(
    interval: u32,
    start: DateTime<Utc>,
    at: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let step = i64::from(interval) * 1000;
    let ms = (at - start).num_milliseconds();
    (ms >= 0).then(|| start + Duration::milliseconds(ms / step * step))
}

/// The schedule fields of a job request, as given.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimingFields<'a> {
    pub schedule_type: Option<&'a str>,
    pub cron: Option<&'a str>,
    pub interval_seconds: Option<i64>,
    pub start_at: Option<&'a str>,
}

impl Timing {
    /// The schedule `given` describes: its type (default `CRON`) with exactly the fields that
    /// type takes, each valid; a cron must fire after `now` in `tz` (not checked without a
    /// time zone, which is then wrong itself). Every problem is named by its field.
    pub fn parse(
        given: TimingFields<'_>,
        tz: Option<Tz>,
        now: DateTime<Utc>,
    ) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        let kind = match given.schedule_type {
            None => ScheduleType::default(),
            Some(raw) => match choose::<ScheduleType>(raw) {
                Ok(kind) => kind,
                Err(m) => {
                    errors.push(FieldError::new("scheduleType", m));
                    return Err(errors);
                }
            },
        };
        let takes = |field: &str| {
            matches!(
                (kind, field),
                (ScheduleType::Cron, "cron")
                    | (
                        ScheduleType::FixedRate | ScheduleType::FixedDelay,
                        "intervalSeconds" | "startAt"
                    )
                    | (ScheduleType::Once, "startAt")
            )
        };
        let present = [
            ("cron", given.cron.is_some()),
            ("intervalSeconds", given.interval_seconds.is_some()),
            ("startAt", given.start_at.is_some()),
        ];
        for (field, _) in present.iter().filter(|(f, p)| *p && !takes(f)) {
            errors.push(FieldError::new(
                *field,
                format!("must be null for scheduleType {kind}"),
            ));
        }
        let required = format!("is required for scheduleType {kind}");
        let start_at = |raw: &str| parse_instant(raw).map(whole_second);
        let timing = match kind {
            ScheduleType::Cron => match given.cron.map(CronSchedule::parse) {
                None => Err(("cron", required)),
                Some(Err(m)) => Err(("cron", m)),
                Some(Ok(c)) if tz.is_some_and(|tz| c.next_after(now, tz).is_none()) => {
                    Err(("cron", "never fires in the future".to_string()))
                }
                Some(Ok(c)) => Ok(Self::Cron(c)),
            },
            ScheduleType::FixedRate | ScheduleType::FixedDelay => {
                let interval = match given.interval_seconds {
                    None => Err(("intervalSeconds", required)),
                    Some(i) if (1..=MAX_INTERVAL_SECONDS).contains(&i) => Ok(i as u32),
                    Some(_) => Err((
                        "intervalSeconds",
                        format!("must be between 1 and {MAX_INTERVAL_SECONDS}"),
                    )),
                };
                let start = given
                    .start_at
                    .map_or(Ok(whole_second(now)), start_at)
                    .map_err(|m| ("startAt", m));
                match (interval, start) {
                    (Ok(interval), Ok(start)) if kind == ScheduleType::FixedRate => {
                        Ok(Self::FixedRate { interval, start })
                    }
                    (Ok(interval), Ok(start)) => Ok(Self::FixedDelay { interval, start }),
                    (Err(e), Ok(_)) | (Ok(_), Err(e)) => Err(e),
                    (Err(e), Err(also)) => {
                        errors.push(FieldError::new(also.0, also.1));
                        Err(e)
                    }
                }
            }
            ScheduleType::Once => match given.start_at.map(start_at) {
                None => Err(("startAt", required)),
                Some(Err(m)) => Err(("startAt", m)),
                Some(Ok(at)) => Ok(Self::Once(at)),
            },
            ScheduleType::None => Ok(Self::None),
        };
        match timing {
            Ok(t) if errors.is_empty() => Ok(t),
            Ok(_) => Err(errors),
            Err((field, m)) => {
                errors.push(FieldError::new(field, m));
                Err(errors)
            }
        }
    }
}

/// An RFC 3339 `date-time` (the OpenAPI document's format) as a UTC instant. chrono also
/// takes a space between date and time; `date-time` takes only `T`.
pub fn parse_instant(raw: &str) -> Result<DateTime<Utc>, String> {
    let separated = matches!(raw.as_bytes().get(10), Some(b'T' | b't'));
    match DateTime::parse_from_rfc3339(raw) {
        Ok(t) if separated => Ok(t.with_timezone(&Utc)),
        Ok(_) => Err("must separate date and time with `T`".into()),
        Err(e) => Err(format!(
            "must be an RFC 3339 instant such as 2026-01-31T00:00:00Z ({e})"
        )),
    }
}

/// The instant `startAt` names, as stored: a whole second.
pub fn whole_second(t: DateTime<Utc>) -> DateTime<Utc> {
    t.trunc_subsecs(0)
}

/// Where a `FIXED_DELAY` job with `interval` seconds may fire again after a fire that ended
/// at `end`: the end rounded up to the whole second, plus the interval. The engine schedules
/// from it and the store refuses a fire's claim before it, so both read one rule.
pub fn delay_restart(end: DateTime<Utc>, interval: u32) -> Option<DateTime<Utc>> {
    let whole = whole_second(end);
    let up = if whole < end {
        whole + Duration::seconds(1)
    } else {
        whole
    };
    up.checked_add_signed(Duration::seconds(i64::from(interval)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn every(seconds: u32, from: &str) -> Timing {
        Timing::FixedRate {
            interval: seconds,
            start: utc(from),
        }
    }

    #[test]
    fn fixed_rate_instants_are_start_plus_whole_intervals() {
        let t = every(90, "2026-12-01T10:00:00Z");
        let tz = Tz::UTC;
        assert_eq!(
            t.next_after(utc("2026-11-30T00:00:00Z"), tz),
            Some(utc("2026-12-01T10:00:00Z")),
            "before the start: the start"
        );
        assert_eq!(
            t.next_after(utc("2026-12-01T10:00:00Z"), tz),
            Some(utc("2026-12-01T10:01:30Z")),
            "strictly after"
        );
        assert_eq!(
            t.next_after(utc("2026-12-01T10:01:29.999Z"), tz),
            Some(utc("2026-12-01T10:01:30Z"))
        );
        assert_eq!(
            t.latest_at_or_before(utc("2026-12-01T10:04:29Z"), tz),
            Some(utc("2026-12-01T10:03:00Z"))
        );
        assert_eq!(
            t.latest_at_or_before(utc("2026-12-01T10:03:00Z"), tz),
            Some(utc("2026-12-01T10:03:00Z")),
            "at or before"
        );
        assert_eq!(t.latest_at_or_before(utc("2026-12-01T09:59:59Z"), tz), None);
    }

    #[test]
    fn fixed_rate_ignores_the_time_zone_and_daylight_saving() {
        // Europe/Berlin leaves summer time at 2026-10-25T01:00Z: an hourly rate stays hourly.
        let t = every(3600, "2026-10-24T23:00:00Z");
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        let mut at = utc("2026-10-24T23:00:00Z");
        for _ in 0..4 {
            let next = t.next_after(at, berlin).unwrap();
            assert_eq!(next - at, Duration::hours(1));
            at = next;
        }
    }

    #[test]
    fn once_fires_at_its_instant_only() {
        let t = Timing::Once(utc("2026-12-24T18:00:00Z"));
        assert_eq!(
            t.next_after(utc("2026-12-01T00:00:00Z"), Tz::UTC),
            Some(utc("2026-12-24T18:00:00Z"))
        );
        assert_eq!(t.next_after(utc("2026-12-24T18:00:00Z"), Tz::UTC), None);
        assert_eq!(
            t.latest_at_or_before(utc("2027-01-01T00:00:00Z"), Tz::UTC),
            Some(utc("2026-12-24T18:00:00Z"))
        );
        assert_eq!(
            t.latest_at_or_before(utc("2026-12-24T17:59:59Z"), Tz::UTC),
            None
        );
    }

    #[test]
    fn none_never_fires() {
        let now = utc("2026-12-01T00:00:00Z");
        assert_eq!(Timing::None.next_after(now, Tz::UTC), None);
        assert_eq!(Timing::None.latest_at_or_before(now, Tz::UTC), None);
    }

    #[test]
    fn cron_is_the_expressions_instants() {
        let cron = CronSchedule::parse("0 0 2 * * ?").unwrap();
        let t = Timing::Cron(cron.clone());
        let at = utc("2026-12-01T05:00:00Z");
        assert_eq!(t.next_after(at, Tz::UTC), cron.next_after(at, Tz::UTC));
        assert_eq!(
            t.latest_at_or_before(at, Tz::UTC),
            cron.latest_at_or_before(at, Tz::UTC)
        );
    }
}
