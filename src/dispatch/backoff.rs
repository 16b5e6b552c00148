//! Retry delays: exponential with full jitter in the upper half, capped.

use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Backoff {
    /// The delay before retry number `attempt` (1 for the first retry): `base * 2^(attempt-1)`
    /// capped at `max`, then a random point in its upper half, so a burst of failures does
    /// not come back in lockstep.
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let capped = exp.min(self.max);
        let half = capped / 2;
        half + half.mul_f64(rand::random::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_caps() {
        let b = Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(60),
        };
        for _ in 0..100 {
            let d1 = b.delay(1);
            assert!(d1 >= Duration::from_millis(500) && d1 <= Duration::from_secs(1));
            let d3 = b.delay(3);
            assert!(d3 >= Duration::from_secs(2) && d3 <= Duration::from_secs(4));
            let d30 = b.delay(30);
            assert!(d30 >= Duration::from_secs(30) && d30 <= Duration::from_secs(60));
        }
    }
}
