//! Repeated alerts for one job and event within `min_interval` are suppressed and counted;
//! the next alert that goes out says how many were suppressed before it.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// What to do with one alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Throttled {
    /// Send it; `suppressed` repeats were held back since the previous one was sent.
    Send { suppressed: u64 },
    /// A repeat within the interval: counted, not sent.
    Suppress,
}

#[derive(Debug)]
struct Slot {
    last_sent: Instant,
    suppressed: u64,
}

/// Per key (job and event) throttle. Pure: the caller passes the time.
#[derive(Debug)]
pub struct Throttle<K> {
    interval: Duration,
    slots: HashMap<K, Slot>,
}

impl<K: std::hash::Hash + Eq> Throttle<K> {
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            slots: HashMap::new(),
        }
    }

    pub fn check(&mut self, key: K, now: Instant) -> Throttled {
        match self.slots.get_mut(&key) {
            Some(slot) if now.saturating_duration_since(slot.last_sent) < self.interval => {
                slot.suppressed += 1;
                Throttled::Suppress
            }
            Some(slot) => {
                let suppressed = std::mem::take(&mut slot.suppressed);
                slot.last_sent = now;
                Throttled::Send { suppressed }
            }
            None => {
                self.slots.insert(
                    key,
                    Slot {
                        last_sent: now,
                        suppressed: 0,
                    },
                );
                Throttled::Send { suppressed: 0 }
            }
        }
    }

    /// Drops slots idle for longer than the interval (they would send anyway), keeping the
    /// map as small as the set of recently alerting jobs. Suppressed counts of dropped slots
    /// are lost; they are in the metrics.
    pub fn forget_idle(&mut self, now: Instant) {
        let interval = self.interval;
        self.slots
            .retain(|_, s| now.saturating_duration_since(s.last_sent) < interval);
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_within_the_interval_are_counted_then_reported() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut t = Throttle::new(s(300));
        assert_eq!(t.check("a", t0), Throttled::Send { suppressed: 0 });
        assert_eq!(t.check("a", t0 + s(10)), Throttled::Suppress);
        assert_eq!(t.check("a", t0 + s(299)), Throttled::Suppress);
        // Other keys are independent.
        assert_eq!(t.check("b", t0 + s(20)), Throttled::Send { suppressed: 0 });
        assert_eq!(t.check("a", t0 + s(300)), Throttled::Send { suppressed: 2 });
        assert_eq!(t.check("a", t0 + s(301)), Throttled::Suppress);
        assert_eq!(t.check("a", t0 + s(700)), Throttled::Send { suppressed: 1 });
        t.forget_idle(t0 + s(700));
        assert_eq!(t.len(), 1, "b was idle for longer than the interval");
    }

    #[test]
    fn zero_interval_never_suppresses() {
        let t0 = Instant::now();
        let mut t = Throttle::new(Duration::ZERO);
        for _ in 0..3 {
            assert_eq!(t.check(1, t0), Throttled::Send { suppressed: 0 });
        }
    }
}
