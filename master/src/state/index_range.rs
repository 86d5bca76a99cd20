//! An index dataset: the indices `[0, size)` cut into tasks of `shard_size` consecutive
//! indices, for data the trainers index themselves (Parquet, a Hugging Face dataset, a table).
//! The state stores two numbers; what a task covers is derived from its id, so neither the
//! state nor a session's kept answer grows with the data.

use std::num::NonZeroU64;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::dataset_limits::TASK_COUNT_MAX;

/// `[0, size)` in shards of `shard_size`: task i covers
/// `[i * shard_size, min(size, (i + 1) * shard_size))`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexRange {
    /// How many indices (samples) the dataset has; at least one once admitted.
    pub(crate) size: u64,
    /// Indices per task. Never zero by its type, so no snapshot, however corrupt, can make
    /// the task count divide by zero.
    shard_size: NonZeroU64,
}

impl IndexRange {
    /// Validates a report's range; the error names the field a person must fix.
    pub(crate) fn new(size: u64, shard_size: u64) -> Result<Self, String> {
        if size == 0 {
            return Err("size must be at least 1 (the dataset has no samples)".to_string());
        }
        let Some(shard_size) = NonZeroU64::new(shard_size) else {
            return Err("shard_size must be at least 1".to_string());
        };
        let range = Self { size, shard_size };
        let task_count = range.task_count();
        if task_count > TASK_COUNT_MAX {
            let smallest = size.div_ceil(TASK_COUNT_MAX);
            return Err(format!(
                "size {size} in shards of shard_size {shard_size} makes {task_count} tasks, more \
                 than the {TASK_COUNT_MAX} allowed (use a shard_size of at least {smallest})"
            ));
        }
        Ok(range)
    }

    pub(crate) fn shard_size(&self) -> u64 {
        self.shard_size.get()
    }

    /// `ceil(size / shard_size)`, the last shard possibly short.
    pub(crate) fn task_count(&self) -> u64 {
        self.size.div_ceil(self.shard_size.get())
    }

    /// The indices of `task_id`; empty, at `size`, for a task past the last one.
    pub(crate) fn task_range(&self, task_id: u64) -> Range<u64> {
        let start = task_id.saturating_mul(self.shard_size.get()).min(self.size);
        let end = start.saturating_add(self.shard_size.get()).min(self.size);
        start..end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cuts `size` by `shard_size` and compares every task's range, as (start, end).
    fn check(size: u64, shard_size: u64, expected: &[(u64, u64)]) {
        let range = IndexRange::new(size, shard_size).expect("a valid range");
        let actual: Vec<(u64, u64)> = (0..range.task_count())
            .map(|task_id| range.task_range(task_id))
            .map(|indices| (indices.start, indices.end))
            .collect();
        assert_eq!(actual, expected, "{size} by {shard_size}");
    }

    /// Tasks cover `[0, size)` in order, exactly once, the last shard short when the size is
    /// not a multiple of the shard size.
    #[test]
    fn tasks_cut_the_range_in_order() {
        let max = u64::MAX;
        check(1, 1, &[(0, 1)]);
        check(10, 5, &[(0, 5), (5, 10)]);
        check(11, 5, &[(0, 5), (5, 10), (10, 11)]);
        check(3, 100, &[(0, 3)]);
        check(max, max, &[(0, max)]);
        check(max, max / 2, &[(0, max / 2), (max / 2, max - 1), (max - 1, max)]);
    }

    /// The largest admitted ranges: exactly the task limit, and sizes near `u64::MAX` with the
    /// smallest shard size that keeps within it; their tasks end at `size` without overflow.
    #[test]
    fn the_task_limit_admits_its_edge_and_no_more() {
        let at_limit = IndexRange::new(TASK_COUNT_MAX, 1).expect("exactly the task limit");
        assert_eq!(at_limit.task_count(), TASK_COUNT_MAX);
        let smallest_shard = u64::MAX.div_ceil(TASK_COUNT_MAX);
        let huge = IndexRange::new(u64::MAX, smallest_shard).expect("the smallest shard admitted");
        assert!(huge.task_count() <= TASK_COUNT_MAX);
        let last = huge.task_count() - 1;
        assert_eq!(huge.task_range(last).end, u64::MAX, "the last task ends at the size");
        assert!(!huge.task_range(last).is_empty());
        assert_eq!(huge.task_range(last + 1), u64::MAX..u64::MAX, "past the end: empty");
        assert_eq!(huge.task_range(u64::MAX), u64::MAX..u64::MAX, "no overflow");
        let refused = IndexRange::new(u64::MAX, smallest_shard - 1).expect_err("one task too many");
        assert!(refused.contains(&format!("at least {smallest_shard}")), "{refused}");
        assert!(IndexRange::new(TASK_COUNT_MAX + 1, 1).is_err());
    }

    /// Each malformed range is refused with the field named first.
    #[test]
    fn invalid_ranges_are_refused_naming_the_field() {
        let cases = [
            (0, 1, "size must be at least 1"),
            (1, 0, "shard_size must be at least 1"),
            (0, 0, "size must be at least 1"),
            (TASK_COUNT_MAX * 2, 1, "size 2097152 in shards of shard_size 1 makes 2097152 tasks"),
        ];
        for (size, shard_size, expected) in cases {
            let reason = IndexRange::new(size, shard_size).expect_err("refused");
            assert!(reason.starts_with(expected), "{size}, {shard_size}: {reason}");
        }
    }

    /// A snapshot with a zero shard size does not decode (rather than divide by zero later).
    #[test]
    fn a_zero_shard_size_never_decodes() {
        #[derive(Serialize)]
        struct Raw {
            size: u64,
            shard_size: u64,
        }
        let bytes = super::super::codec::encode(&Raw { size: 5, shard_size: 0 });
        let decoded: Result<IndexRange, _> =
            super::super::codec::decode(&bytes, 1 << 10, "index range");
        assert!(decoded.is_err());
    }
}
