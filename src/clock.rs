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

#[cfg(test)]
mod tests {
    use super::*;

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
