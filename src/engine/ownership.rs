//! Who schedules a job (docs/design.md, "Ownership"): lock-free, computed identically by every
//! instance from the sorted list of healthy scheduler instances.
//!
//! - `java-hash`: `sorted[|String.hashCode(name)| mod n]`, bit-for-bit what the Java JobFlow
//!   computes, so mixed fleets agree. The absolute value is taken in 64 bits: Java's
//!   `Math.abs(Integer.MIN_VALUE)` stays negative (and would index out of bounds); here it is
//!   2147483648. That is the one name class where the two can differ, and Java cannot
//!   schedule it at all.
//! - `rendezvous` (highest random weight): every instance scores every job and the highest
//!   score wins, so a join or leave moves only about 1/n of the jobs instead of most of them.

use crate::config::OwnershipStrategy;

/// Java's `String.hashCode()`: `s[0]*31^(n-1) + … + s[n-1]` over UTF-16 code units, wrapping.
pub fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32))
}

/// The index `java-hash` ownership picks among `n` instances.
pub fn java_hash_index(name: &str, n: usize) -> usize {
    ((java_hash(name) as i64).unsigned_abs() % n as u64) as usize
}

/// FNV-1a (64 bit) followed by the SplitMix64 finaliser: a fixed, documented hash, so every
/// instance and every version computes the same rendezvous scores.
fn rendezvous_score(instance: &str, job: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in instance
        .bytes()
        .chain(std::iter::once(0))
        .chain(job.bytes())
    {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The sorted instance list and the rule that maps a job to one of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnershipRing {
    instances: Vec<String>,
    strategy: OwnershipStrategy,
}

impl OwnershipRing {
    pub fn new(mut instances: Vec<String>, strategy: OwnershipStrategy) -> Self {
        instances.sort();
        instances.dedup();
        Self {
            instances,
            strategy,
        }
    }

    pub fn instances(&self) -> &[String] {
        &self.instances
    }

    pub fn strategy(&self) -> OwnershipStrategy {
        self.strategy
    }

    /// The instance that schedules `job`, or `None` when there are no instances.
    pub fn owner_of(&self, job: &str) -> Option<&str> {
        if self.instances.is_empty() {
            return None;
        }
        let owner = match self.strategy {
            OwnershipStrategy::JavaHash => {
                &self.instances[java_hash_index(job, self.instances.len())]
            }
            OwnershipStrategy::Rendezvous => self.instances.iter().max_by(|a, b| {
                rendezvous_score(a, job)
                    .cmp(&rendezvous_score(b, job))
                    .then_with(|| b.cmp(a))
            })?,
        };
        Some(owner.as_str())
    }

    /// Whether `me` owns `job`. An instance missing from the list owns nothing.
    pub fn owns(&self, me: &str, job: &str) -> bool {
        self.owner_of(job) == Some(me)
    }

    /// The compensation leader: the first instance of the sorted list.
    pub fn leader(&self) -> Option<&str> {
        self.instances.first().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_string_hash_code_vectors() {
        // Values from Java's definition, s[0]*31^(n-1) + … over UTF-16 code units.
        let vectors: [(&str, i32); 12] = [
            ("", 0),
            ("a", 97),
            ("hello", 99_162_322),
            ("Aa", 2112),
            ("BB", 2112),
            ("order-sync", 710_219_194),
            // U+4EFB U+52A1: 20219 * 31 + 21153.
            ("任务", 647_942),
            // A supplementary character hashes as its surrogate pair D83D DE00.
            ("😀", 55_357 * 31 + 56_832),
            // The design's own job names, as Java 17's String.hashCode gives them.
            ("订单对账", 1_086_176_128),
            ("支付对账", 791_839_126),
            ("报表生成", 786_824_820),
            // The famous Integer.MIN_VALUE string.
            ("polygenelubricants", i32::MIN),
        ];
        for (s, want) in vectors {
            assert_eq!(java_hash(s), want, "{s:?}");
        }
    }

    #[test]
    fn i32_min_does_not_panic_and_indexes_in_range() {
        assert_eq!(
            java_hash_index("polygenelubricants", 3),
            (2_147_483_648u64 % 3) as usize
        );
        let ring = OwnershipRing::new(
            vec!["b:1".into(), "a:1".into(), "c:1".into()],
            OwnershipStrategy::JavaHash,
        );
        assert!(ring.owner_of("polygenelubricants").is_some());
    }

    #[test]
    fn java_hash_picks_from_the_sorted_list() {
        let ring = OwnershipRing::new(
            vec![
                "10.0.0.3:8080".into(),
                "10.0.0.1:8080".into(),
                "10.0.0.2:8080".into(),
            ],
            OwnershipStrategy::JavaHash,
        );
        assert_eq!(
            ring.instances(),
            ["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"]
        );
        // "hello" = 99162322, mod 3 = 1.
        assert_eq!(ring.owner_of("hello"), Some("10.0.0.2:8080"));
        assert!(ring.owns("10.0.0.2:8080", "hello"));
        assert!(
            !ring.owns("10.0.0.9:8080", "hello"),
            "an unlisted instance owns nothing"
        );
        assert_eq!(ring.leader(), Some("10.0.0.1:8080"));
        assert_eq!(
            OwnershipRing::new(vec![], OwnershipStrategy::JavaHash).owner_of("x"),
            None
        );
    }

    #[test]
    fn rendezvous_moves_about_one_nth_on_join() {
        let names: Vec<String> = (0..10_000).map(|i| format!("job-{i}")).collect();
        let four: Vec<String> = (1..=4).map(|i| format!("10.0.0.{i}:8080")).collect();
        let mut five = four.clone();
        five.push("10.0.0.5:8080".into());
        let moved = |strategy| {
            let a = OwnershipRing::new(four.clone(), strategy);
            let b = OwnershipRing::new(five.clone(), strategy);
            names
                .iter()
                .filter(|n| a.owner_of(n) != b.owner_of(n))
                .count()
        };
        let rv = moved(OwnershipStrategy::Rendezvous);
        // Ideal: 1/5 of the jobs move, all of them to the new instance.
        assert!((1_600..2_400).contains(&rv), "rendezvous moved {rv}");
        let jh = moved(OwnershipStrategy::JavaHash);
        assert!(jh > 5_000, "modulo hashing reshuffles most jobs ({jh})");
        // Spread is even.
        let ring = OwnershipRing::new(five, OwnershipStrategy::Rendezvous);
        for inst in ring.instances() {
            let owned = names.iter().filter(|n| ring.owns(inst, n)).count();
            assert!((1_700..2_300).contains(&owned), "{inst} owns {owned}");
        }
    }
}
