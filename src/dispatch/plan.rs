//! Splitting a job's fixed shard count over the live executors (SPEC §6.2).

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
}
