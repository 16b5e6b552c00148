//! The one clock every part of JobFlow reads the time from.
//!
//! A scheduler's logic is about instants: when a fire is due, when a lease runs out, how late
//! a call is. Reading `Utc::now()` wherever it is needed ties that logic to real time, so its
//! tests sleep real seconds. Everything takes a [`Clock`] instead, built once at start-up and
//! passed down:
//! - [`Clock::system`] is the wall clock, for production: cron instants are wall-clock
//!   instants, so a corrected system clock is followed;
//! - [`Clock::tokio`] reads tokio's time from a fixed starting instant. Under
//!   `tokio::time::pause()` it stands still until the runtime advances it, so a test can run
//!   minutes of schedule in milliseconds, and sleeping until an instant ([`Clock::sleep_until`])
//!   is a timer the paused runtime fires exactly.

use chrono::{DateTime, Utc};
use tokio::time::Instant;

#[derive(Debug, Clone, Copy)]
pub struct Clock(Source);

#[derive(Debug, Clone, Copy)]
enum Source {
    System,
    Tokio { epoch: DateTime<Utc>, at: Instant },
}

impl Clock {
    pub fn system() -> Self {
        Self(Source::System)
    }

    /// A clock that reads `epoch` now and then moves with tokio's time.
    pub fn tokio(epoch: DateTime<Utc>) -> Self {
        Self(Source::Tokio {
            epoch,
            at: Instant::now(),
        })
    }

    pub fn now(&self) -> DateTime<Utc> {
        match self.0 {
            Source::System => Utc::now(),
            Source::Tokio { epoch, at } => {
                epoch + chrono::Duration::from_std(at.elapsed()).unwrap_or_default()
            }
        }
    }

    /// How long until `t` (zero when it has passed).
    pub fn until(&self, t: DateTime<Utc>) -> std::time::Duration {
        (t - self.now()).to_std().unwrap_or_default()
    }

    /// The tokio instant at which this clock reads `t` (now, when `t` has passed).
    pub fn instant_at(&self, t: DateTime<Utc>) -> Instant {
        Instant::now() + self.until(t)
    }

    /// Resolves when this clock reads `t`.
    pub async fn sleep_until(&self, t: DateTime<Utc>) {
        tokio::time::sleep_until(self.instant_at(t)).await
    }
}

/// `t` as `yyyyMMddHHmmss`, the text of `t.format("%Y%m%d%H%M%S")`: the instant in a cron
/// fire's execution id. Written field by field: `chrono`'s `format` reads its pattern anew at
/// every call (about 2,800 instructions a call, where this takes a tenth), and every fire's id
/// and every range's is built with it.
pub fn compact(t: DateTime<Utc>) -> String {
    let mut out = String::with_capacity(14);
    if write_fields(&mut out, t, [None; 5]) {
        out
    } else {
        t.format("%Y%m%d%H%M%S").to_string()
    }
}

/// `t` as RFC 3339 in whole seconds, UTC (`2026-03-01T02:00:00Z`), the text of
/// `t.to_rfc3339_opts(SecondsFormat::Secs, true)`: the `X-Fire-Time` of every call, written
/// as [`compact`] is.
pub fn rfc3339_seconds(t: DateTime<Utc>) -> String {
    let mut out = String::with_capacity(20);
    if write_fields(
        &mut out,
        t,
        [Some('-'), Some('-'), Some('T'), Some(':'), Some(':')],
    ) {
        out.push('Z');
        out
    } else {
        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }
}

/// Year, month, day, hour, minute and second of `t`, each field after its separator; `false`
/// (nothing written) for what `chrono` writes otherwise: a year outside 0-9999, a leap second.
fn write_fields(out: &mut String, t: DateTime<Utc>, separators: [Option<char>; 5]) -> bool {
    use chrono::{Datelike, Timelike};
    let Ok(year) = u32::try_from(t.year()) else {
        return false;
    };
    if year > 9999 || t.nanosecond() >= 1_000_000_000 {
        return false;
    }
    let digits = |out: &mut String, value: u32, width: u32| {
        for place in (0..width).rev() {
            let digit = (value / 10u32.pow(place)) % 10;
            out.push(char::from(b'0' + digit as u8));
        }
    };
    digits(out, year, 4);
    let fields = [t.month(), t.day(), t.hour(), t.minute(), t.second()];
    for (value, separator) in fields.into_iter().zip(separators) {
        out.extend(separator);
        digits(out, value, 2);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_is_written_as_chrono_writes_it() {
        let mut instants: Vec<DateTime<Utc>> = [
            "0000-01-01T00:00:00Z",
            "0999-12-31T23:59:59Z",
            "1970-01-01T00:00:00Z",
            "2024-02-29T12:34:56.789Z",
            "2026-03-01T02:00:00Z",
            "9999-12-31T23:59:59.999999999Z",
        ]
        .iter()
        .map(|t| t.parse().unwrap())
        .collect();
        // Every hour of a leap year, at a second that differs each time.
        let start: DateTime<Utc> = "2028-01-01T00:00:00Z".parse().unwrap();
        instants.extend((0..366 * 24).map(|h| start + chrono::Duration::seconds(h * 3607)));
        for t in instants {
            assert_eq!(compact(t), t.format("%Y%m%d%H%M%S").to_string());
            assert_eq!(
                rfc3339_seconds(t),
                t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
        }
    }

    #[test]
    fn what_the_fields_cannot_write_is_left_to_chrono() {
        let far = chrono::NaiveDate::from_ymd_opt(12026, 1, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc();
        let before = chrono::NaiveDate::from_ymd_opt(-1, 1, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc();
        let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
            .unwrap()
            .and_hms_nano_opt(23, 59, 59, 1_000_000_000)
            .unwrap()
            .and_utc();
        for t in [far, before, leap] {
            assert_eq!(compact(t), t.format("%Y%m%d%H%M%S").to_string());
            assert_eq!(
                rfc3339_seconds(t),
                t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
        }
        assert_eq!(compact(leap), "20161231235960");
    }

    #[tokio::test(start_paused = true)]
    async fn a_paused_clock_moves_only_with_tokio_time() {
        let start: DateTime<Utc> = "2026-03-01T00:00:00Z".parse().unwrap();
        let clock = Clock::tokio(start);
        assert_eq!(clock.now(), start);
        clock
            .sleep_until(start + chrono::Duration::seconds(90))
            .await;
        assert_eq!(clock.now(), start + chrono::Duration::seconds(90));
        assert_eq!(clock.until(start), std::time::Duration::ZERO);
    }
}
