//! Splitting a job's fixed shard count over the live executors (docs/design.md, "Dispatch"), and
//! routing: which executor of the sorted list a fire goes to first (docs/production.md, "Routing").
//!
//! **Stable range placement**: a sharded job's range `i` goes to executor `i` of the sorted
//! list, on every fire while the list is unchanged, whatever its routing strategy: an
//! executor that caches the data of its range keeps it ("shard 0 is always handled by
//! instance 1"). With fewer executors than shards, `split` gives one range per executor.
//!
//! Routing strategies choose the executor of an unsharded job's fire, each a pure function of
//! its inputs so that it is tested without a cluster:
//! - `ROUND_ROBIN` (default): the job's own counter, advanced once per fire, modulo the number
//!   of executors: consecutive fires of a job visit every executor in turn. The counter is per
//!   job, so two jobs firing alternately do not each stick to one executor.
//! - `FIRST`: the executor that sorts first (the only behaviour before routing existed).
//! - `RANDOM`: a uniformly random executor (the caller supplies the random number).
//! - `CONSISTENT_HASH`: rendezvous (highest random weight) hashing of the key (the job name)
//!   with each executor's `ip:port`: a job keeps its executor while the list is unchanged, and
//!   when an executor joins or leaves only the jobs that go to or came from it move (~1/n).
//! - `LEAST_BUSY`: the executor with the fewest executions in flight from this scheduler
//!   instance; ties go to the first tied executor at or after the round-robin position, so an
//!   idle pool is still used evenly.
//! - `BROADCAST`: no choice to make: every live executor gets a row of its own over every
//!   shard (see [`rows::fire_rows`](super::rows::fire_rows)).
//!
//! [`assign`] maps range `i` to executor `(first + i) mod k`; `first` is 0 for a sharded job.
//! Ranges themselves never depend on the strategy.

use std::sync::Mutex;

use foldhash::HashMap;

use crate::jobs::RouteStrategy;

/// One contiguous range of shard indexes, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardRange {
    pub start: u32,
    pub end: u32,
}

/// `min(S, k)` contiguous ranges over `0..S`, sizes differing by at most one, larger first:
/// 100 over 3 executors is 0-33, 34-66, 67-99. Range `i` goes to executor `i` of the sorted
/// list. The shard a record belongs to depends only on S, never on k.
pub fn split(shard_count: u32, executors: usize) -> Vec<ShardRange> {
    let s = shard_count.max(1);
    let k = (executors as u32).min(s);
    if k == 0 {
        return Vec::new();
    }
    let (base, larger) = (s / k, s % k);
    let mut start = 0;
    (0..k)
        .map(|i| {
            let len = base + u32::from(i < larger);
            let r = ShardRange {
                start,
                end: start + len - 1,
            };
            start += len;
            r
        })
        .collect()
}

/// The index of the executor that a range starting at `shard_start` goes to under the current
/// plan (used to re-dispatch a stored range after the executor list changed).
pub fn executor_for(shard_start: u32, shard_count: u32, executors: usize) -> Option<usize> {
    split(shard_count, executors)
        .iter()
        .position(|r| (r.start..=r.end).contains(&shard_start))
}

/// Everything a routing decision may use besides the sorted executor list.
#[derive(Debug, Clone, Copy)]
pub struct RouteInput<'a> {
    pub strategy: RouteStrategy,
    /// What `CONSISTENT_HASH` hashes: the job name.
    pub key: &'a str,
    /// Executions in flight from this instance per executor, in the order of the executor
    /// list (for `LEAST_BUSY`; missing entries count as 0).
    pub in_flight: &'a [usize],
    /// This fire's value of the job's round-robin counter (`RoundRobin::next`).
    pub round_robin: u64,
    /// A random number for `RANDOM`.
    pub random: u64,
}

/// The index in `executors` (sorted `ip:port`) that a fire goes to first; `None` when there
/// is no executor.
pub fn route(executors: &[&str], input: &RouteInput<'_>) -> Option<usize> {
    let k = executors.len();
    if k == 0 {
        return None;
    }
    let rotation = (input.round_robin % k as u64) as usize;
    Some(match input.strategy {
        // Every executor gets a row of its own (see `rows::fire_rows`).
        RouteStrategy::First | RouteStrategy::Broadcast => 0,
        RouteStrategy::RoundRobin => rotation,
        RouteStrategy::Random => (input.random % k as u64) as usize,
        RouteStrategy::ConsistentHash => executors
            .iter()
            .enumerate()
            .max_by_key(|(_, e)| rendezvous_weight(input.key, e))
            .map(|(i, _)| i)
            .expect("at least one executor"),
        RouteStrategy::LeastBusy => {
            let load = |i: usize| input.in_flight.get(i).copied().unwrap_or(0);
            (0..k)
                .map(|step| (rotation + step) % k)
                .min_by_key(|&i| load(i))
                .expect("at least one executor")
        }
    })
}

/// Range `i` of `split(shard_count, k)` with the executor it goes to, when the mapping starts
/// at executor `first`.
pub fn assign(shard_count: u32, executors: usize, first: usize) -> Vec<(ShardRange, usize)> {
    split(shard_count, executors)
        .into_iter()
        .enumerate()
        .map(|(i, r)| (r, (first + i) % executors))
        .collect()
}

/// FNV-1a (64 bit) of `key`, a separator and `executor`, then the SplitMix64 finaliser: fixed
/// and documented, so every scheduler instance and version weighs alike.
fn rendezvous_weight(key: &str, executor: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes().chain([0u8]).chain(executor.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Per-job round-robin counters of one scheduler instance (a job fires on its owner only, so
/// an instance-local counter rotates it fully).
#[derive(Debug, Default)]
pub struct RoundRobin {
    counters: Mutex<HashMap<String, u64>>,
}

impl RoundRobin {
    /// This fire's counter value for `job`: 0, 1, 2, … per job.
    pub fn next(&self, job: &str) -> u64 {
        let mut counters = self.counters.lock().expect("round-robin counters poisoned");
        // Called on every fire: the job's name is copied only on its first.
        if let Some(c) = counters.get_mut(job) {
            let v = *c;
            *c = c.wrapping_add(1);
            return v;
        }
        counters.insert(job.to_string(), 1);
        0
    }

    /// Forgets jobs that no longer exist (their counters only cost memory).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.counters
            .lock()
            .expect("round-robin counters poisoned")
            .retain(|job, _| keep(job));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[ShardRange]) -> Vec<(u32, u32)> {
        v.iter().map(|r| (r.start, r.end)).collect()
    }

    #[test]
    fn spec_examples() {
        assert_eq!(pairs(&split(100, 3)), [(0, 33), (34, 66), (67, 99)]);
        assert_eq!(pairs(&split(10, 3)), [(0, 3), (4, 6), (7, 9)]);
        assert_eq!(pairs(&split(2, 5)), [(0, 0), (1, 1)]);
        assert_eq!(pairs(&split(1, 1)), [(0, 0)]);
        assert!(split(4, 0).is_empty());
    }

    #[test]
    fn ranges_cover_every_shard_once() {
        for s in 1..60 {
            for k in 1..12 {
                let plan = split(s, k);
                assert_eq!(plan.len() as u32, s.min(k as u32));
                let mut next = 0;
                for (i, r) in plan.iter().enumerate() {
                    assert_eq!(r.start, next);
                    next = r.end + 1;
                    if i > 0 {
                        let (prev, cur) = (plan[i - 1].end - plan[i - 1].start, r.end - r.start);
                        assert!(
                            prev == cur || prev == cur + 1,
                            "larger first, differing by one"
                        );
                    }
                }
                assert_eq!(next, s);
            }
        }
    }

    #[test]
    fn executor_for_follows_the_plan() {
        assert_eq!(executor_for(4, 10, 3), Some(1));
        assert_eq!(executor_for(0, 10, 1), Some(0));
        assert_eq!(executor_for(4, 10, 0), None);
        // A stored range 5-9 from a 2-executor plan maps to the executor holding shard 5 now.
        assert_eq!(executor_for(5, 10, 3), Some(1));
    }

    const EXECUTORS: [&str; 3] = ["10.0.0.1:9001", "10.0.0.2:9001", "10.0.0.3:9001"];

    fn input(strategy: RouteStrategy) -> RouteInput<'static> {
        RouteInput {
            strategy,
            key: "order-sync",
            in_flight: &[],
            round_robin: 0,
            random: 0,
        }
    }

    #[test]
    fn no_executor_no_route() {
        for s in [
            RouteStrategy::RoundRobin,
            RouteStrategy::First,
            RouteStrategy::Random,
            RouteStrategy::ConsistentHash,
            RouteStrategy::LeastBusy,
        ] {
            assert_eq!(route(&[], &input(s)), None);
        }
    }

    #[test]
    fn first_and_round_robin() {
        let rr = RoundRobin::default();
        let picks: Vec<_> = (0..7)
            .map(|_| {
                let r = RouteInput {
                    round_robin: rr.next("a"),
                    ..input(RouteStrategy::RoundRobin)
                };
                route(&EXECUTORS, &r).unwrap()
            })
            .collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2, 0]);
        // Counters are per job: another job starts at the beginning.
        assert_eq!(rr.next("b"), 0);
        assert_eq!(rr.next("a"), 7);
        rr.retain(|j| j == "b");
        assert_eq!(rr.next("a"), 0);
        let r = RouteInput {
            round_robin: 5,
            ..input(RouteStrategy::First)
        };
        assert_eq!(route(&EXECUTORS, &r), Some(0));
    }

    #[test]
    fn random_uses_the_number_given() {
        for (n, want) in [(0, 0), (1, 1), (5, 2), (u64::MAX, 0)] {
            let r = RouteInput {
                random: n,
                ..input(RouteStrategy::Random)
            };
            assert_eq!(route(&EXECUTORS, &r), Some(want), "{n}");
        }
    }

    #[test]
    fn consistent_hash_is_stable_and_moves_about_one_nth() {
        let names: Vec<String> = (0..3000).map(|i| format!("job-{i}")).collect();
        let pick = |execs: &[&str], job: &str| {
            let r = RouteInput {
                key: job,
                ..input(RouteStrategy::ConsistentHash)
            };
            execs[route(execs, &r).unwrap()].to_string()
        };
        let before: Vec<String> = names.iter().map(|j| pick(&EXECUTORS, j)).collect();
        // Same inputs, same answer (a pure function, fixed hash).
        assert_eq!(before[17], pick(&EXECUTORS, "job-17"));
        assert_eq!(pick(&EXECUTORS, "order-sync"), "10.0.0.2:9001");
        // Spread: each executor gets a fair share.
        for e in EXECUTORS {
            let n = before.iter().filter(|p| *p == e).count();
            assert!((800..1200).contains(&n), "{e}: {n}");
        }
        // A fourth executor takes ~1/4 of the jobs; the others stay where they were.
        let four = [EXECUTORS[0], EXECUTORS[1], EXECUTORS[2], "10.0.0.4:9001"];
        let mut moved = 0;
        for (j, was) in names.iter().zip(&before) {
            let now = pick(&four, j);
            if &now != was {
                assert_eq!(now, "10.0.0.4:9001", "a job moved between old executors");
                moved += 1;
            }
        }
        assert!((600..900).contains(&moved), "{moved}");
    }

    #[test]
    fn least_busy_prefers_the_idlest_and_rotates_ties() {
        let r = |in_flight: &'static [usize], rr: u64| RouteInput {
            in_flight,
            round_robin: rr,
            ..input(RouteStrategy::LeastBusy)
        };
        assert_eq!(route(&EXECUTORS, &r(&[4, 1, 3], 0)), Some(1));
        assert_eq!(route(&EXECUTORS, &r(&[4, 1, 0], 9)), Some(2));
        // All idle: the round-robin position decides, so the pool is used evenly.
        assert_eq!(route(&EXECUTORS, &r(&[0, 0, 0], 0)), Some(0));
        assert_eq!(route(&EXECUTORS, &r(&[0, 0, 0], 1)), Some(1));
        assert_eq!(route(&EXECUTORS, &r(&[], 2)), Some(2));
        // Ties among the least busy: the first at or after the position.
        assert_eq!(route(&EXECUTORS, &r(&[1, 5, 1], 1)), Some(2));
    }

    #[test]
    fn sharded_mapping_starts_at_the_chosen_executor() {
        let pairs = |v: Vec<(ShardRange, usize)>| -> Vec<(u32, u32, usize)> {
            v.into_iter().map(|(r, e)| (r.start, r.end, e)).collect()
        };
        assert_eq!(
            pairs(assign(100, 3, 0)),
            [(0, 33, 0), (34, 66, 1), (67, 99, 2)]
        );
        assert_eq!(
            pairs(assign(100, 3, 2)),
            [(0, 33, 2), (34, 66, 0), (67, 99, 1)]
        );
        // Fewer shards than executors: each range still gets its own executor.
        assert_eq!(pairs(assign(2, 5, 4)), [(0, 0, 4), (1, 1, 0)]);
        assert!(assign(4, 0, 0).is_empty());
    }
}
