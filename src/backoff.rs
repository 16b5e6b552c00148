//! Delays between attempts, the one backoff every retry loop of JobFlow uses: exponential
//! (doubling from `base`), capped at `max`, and with jitter where many callers would
//! otherwise come back in lockstep.

use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
    /// Spread each delay over the upper half of its value.
    pub jitter: bool,
}

impl Backoff {
    /// Doubling from `base` up to `max`, the same for every caller.
    pub const fn doubling(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            jitter: false,
        }
    }

    /// Doubling from `base` up to `max`, each delay a random point in the upper half of its
    /// value, so a burst of failures does not come back in lockstep.
    pub const fn jittered(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            jitter: true,
        }
    }

    /// The delay before attempt number `attempt` after the first (1 for the first retry):
    /// `base * 2^(attempt-1)` capped at `max`.
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let capped = exp.min(self.max);
        if !self.jitter {
            return capped;
        }
        let half = capped / 2;
        half + half.mul_f64(rand::random::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_caps() {
        let b = Backoff::jittered(Duration::from_secs(1), Duration::from_secs(60));
        for _ in 0..100 {
            let d1 = b.delay(1);
            assert!(d1 >= Duration::from_millis(500) && d1 <= Duration::from_secs(1));
            let d3 = b.delay(3);
            assert!(d3 >= Duration::from_secs(2) && d3 <= Duration::from_secs(4));
            let d30 = b.delay(30);
            assert!(d30 >= Duration::from_secs(30) && d30 <= Duration::from_secs(60));
        }
        let plain = Backoff::doubling(Duration::from_millis(100), Duration::from_secs(5));
        let delays: Vec<u128> = (1..=8).map(|a| plain.delay(a).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
    }
}
