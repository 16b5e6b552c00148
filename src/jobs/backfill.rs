//! Backfills: a job's past instants between two times, run again on request.
//!
//! Rules:
//! - A backfill runs every instant of the job's schedule (its type, time zone and calendar as
//!   they are when the backfill starts) in `[from, to)`, each once, as trigger type
//!   `BACKFILL`. `to` may not lie ahead: the future is the schedule's own. A schedule with no
//!   instants (`NONE`) has nothing to backfill; neither has an empty interval.
//! - An instant's rows are named by the backfill's id and the instant
//!   ([`backfill_fire_id`](super::backfill_fire_id)), and the backfill's cursor (the next
//!   instant to record, and how many are done) moves in the transaction that records them.
//!   Whoever runs the backfill, and however often it dies, an instant is recorded once; the
//!   same `backfillId` sent again answers the backfill there is and starts nothing.
//! - At most `maxPerSecond` instants are recorded each second (default
//!   [`DEFAULT_PER_SECOND`]), so a backfill of a year of minutes does not flood the executors.
//! - A backfill is `RUNNING` until every instant is recorded (`DONE`), or until it is
//!   cancelled or its job deleted (`CANCELLED`; instants recorded by then run on).

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::Schedule;

/// The most instants one backfill may hold.
pub const MAX_FIRES: u32 = 10_000;
/// Instants recorded per second when the request does not say.
pub const DEFAULT_PER_SECOND: u32 = 10;
/// The most instants per second a backfill may ask for.
pub const MAX_PER_SECOND: u32 = 1_000;
/// The longest `backfillId`.
pub const MAX_ID: usize = 64;
/// [`parse_backfill_id`] as an ECMA-262 pattern (the OpenAPI document's).
pub const ID_PATTERN: &str = "^[A-Za-z0-9._:-]{1,64}$";

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    ToSchema,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantNames,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum BackfillStatus {
    Running,
    Done,
    Cancelled,
}

impl BackfillStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A backfill as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Backfill {
    pub job_name: String,
    pub backfill_id: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub max_per_second: u32,
    /// Instants in `[from, to)`.
    pub fires: u32,
    /// Instants recorded so far.
    pub done: u32,
    /// The next instant to record; `None` once every one is.
    pub next: Option<DateTime<Utc>>,
    pub status: BackfillStatus,
    pub created_at: DateTime<Utc>,
    pub created_by: Option<String>,
    pub updated_at: DateTime<Utc>,
}

/// A client's `backfillId`: 1-64 of `[A-Za-z0-9._:-]`.
pub fn parse_backfill_id(raw: &str) -> Result<String, String> {
    super::parse_plain(raw, MAX_ID)
}

/// The first instant of `schedule` at or after `from` and before `to`.
pub fn first_instant(
    schedule: &Schedule<'_>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    schedule
        .next_after(from - Duration::milliseconds(1))
        .filter(|t| *t < to)
}

/// How many instants `schedule` has in `[from, to)`; `None` beyond `cap`.
pub fn count_instants(
    schedule: &Schedule<'_>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cap: u32,
) -> Option<u32> {
    let mut n = 0;
    let mut next = first_instant(schedule, from, to);
    while let Some(t) = next {
        n += 1;
        if n > cap {
            return None;
        }
        next = schedule.next_after(t).filter(|t| *t < to);
    }
    Some(n)
}

/// Up to `count` instants from `next` (included) before `to`, and the instant after them
/// (`None` once `to` is reached).
pub fn batch(
    schedule: &Schedule<'_>,
    next: DateTime<Utc>,
    to: DateTime<Utc>,
    count: u32,
) -> (Vec<DateTime<Utc>>, Option<DateTime<Utc>>) {
    let mut instants = Vec::new();
    let mut cursor = Some(next).filter(|t| *t < to);
    while let Some(t) = cursor {
        if instants.len() as u32 == count {
            break;
        }
        instants.push(t);
        cursor = schedule.next_after(t).filter(|t| *t < to);
    }
    (instants, cursor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::{CronSchedule, Timing};

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn every_minute() -> Timing {
        Timing::Cron(CronSchedule::parse("0 * * * * ?").unwrap())
    }

    fn schedule(timing: &Timing) -> Schedule<'_> {
        Schedule {
            timing,
            tz: chrono_tz::UTC,
            calendar: None,
            restart: None,
        }
    }

    #[test]
    fn a_backfill_runs_the_instants_from_its_start_up_to_but_not_at_its_end() {
        let timing = every_minute();
        let s = schedule(&timing);
        let (from, to) = (utc("2026-01-01T00:00:00Z"), utc("2026-01-01T00:05:00Z"));
        assert_eq!(
            first_instant(&s, from, to),
            Some(from),
            "an instant at `from` counts"
        );
        assert_eq!(count_instants(&s, from, to, MAX_FIRES), Some(5));
        let late = utc("2026-01-01T00:00:00.500Z");
        assert_eq!(
            first_instant(&s, late, to),
            Some(utc("2026-01-01T00:01:00Z"))
        );
        assert_eq!(first_instant(&s, from, from), None, "an empty interval");
    }

    #[test]
    fn instants_are_recorded_in_batches_of_the_pace() {
        let timing = every_minute();
        let s = schedule(&timing);
        let to = utc("2026-01-01T00:05:00Z");
        let (first, next) = batch(&s, utc("2026-01-01T00:00:00Z"), to, 3);
        assert_eq!(first.len(), 3);
        assert_eq!(next, Some(utc("2026-01-01T00:03:00Z")));
        let (last, next) = batch(&s, next.unwrap(), to, 3);
        assert_eq!(
            last,
            [utc("2026-01-01T00:03:00Z"), utc("2026-01-01T00:04:00Z")]
        );
        assert_eq!(next, None, "all recorded");
    }

    #[test]
    fn a_backfill_holds_at_most_its_cap() {
        let timing = every_minute();
        let s = schedule(&timing);
        let from = utc("2026-01-01T00:00:00Z");
        assert_eq!(
            count_instants(&s, from, from + Duration::minutes(10), 10),
            Some(10)
        );
        assert_eq!(
            count_instants(&s, from, from + Duration::minutes(11), 10),
            None
        );
    }

    #[test]
    fn backfill_ids_are_short_and_plain() {
        assert_eq!(
            parse_backfill_id("fix-2026-11:run.1").unwrap(),
            "fix-2026-11:run.1"
        );
        assert!(parse_backfill_id("").is_err());
        assert!(parse_backfill_id("a b").is_err());
        assert!(parse_backfill_id(&"x".repeat(65)).is_err());
    }
}
