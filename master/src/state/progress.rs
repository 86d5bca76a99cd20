//! Progress checkpoints: a job's data position (its pass, and which of the pass's tasks are
//! done) recorded by one replicated entry, so a user's model checkpoint can carry its id and
//! the queue can be put back to it later (`TaskQueue::restore`).
//!
//! Each checkpoint keeps the done tasks as a bitmap of the job's task count, so the largest is
//! `TASK_COUNT_MAX / 8` bytes and a job keeps at most [`PROGRESS_CHECKPOINTS_KEPT`]: the bound
//! `limits.rs` measures. Older ones are dropped as newer ones are taken; their ids are never
//! reused.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// The most progress checkpoints one job keeps; taking another drops the oldest.
pub const PROGRESS_CHECKPOINTS_KEPT: usize = 16;

/// Which tasks of a job are done, one bit per task id.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct DoneSet {
    words: Vec<u64>,
    task_count: u64,
}

impl DoneSet {
    /// The set of `done` task ids (each below `task_count`).
    pub(crate) fn new(task_count: u64, done: impl IntoIterator<Item = u64>) -> Self {
        let word_count = usize::try_from(task_count.div_ceil(64)).expect("bounded task count");
        let mut words = vec![0u64; word_count];
        for task_id in done.into_iter().filter(|task_id| *task_id < task_count) {
            let index = usize::try_from(task_id / 64).expect("below the word count");
            words[index] |= 1 << (task_id % 64);
        }
        Self { words, task_count }
    }

    pub(crate) fn contains(&self, task_id: u64) -> bool {
        let index = usize::try_from(task_id / 64).ok();
        index
            .and_then(|index| self.words.get(index))
            .is_some_and(|word| word & (1 << (task_id % 64)) != 0)
    }

    /// How many tasks are in the set.
    pub(crate) fn count(&self) -> u64 {
        self.words.iter().map(|word| u64::from(word.count_ones())).sum()
    }

    /// The job's task count when the set was taken (a restore checks it against the job's).
    pub(crate) fn task_count(&self) -> u64 {
        self.task_count
    }

    /// Whether the bitmap is as long as its task count needs and has no bit at or past it.
    pub(crate) fn is_well_formed(&self) -> bool {
        let Ok(word_count) = usize::try_from(self.task_count.div_ceil(64)) else { return false };
        let tail_bits = self.task_count % 64;
        let tail_clear = match self.words.last() {
            Some(last) if tail_bits != 0 => last >> tail_bits == 0,
            _ => true,
        };
        self.words.len() == word_count && tail_clear
    }
}

/// One recorded data position.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProgressCheckpoint {
    pub(crate) id: u64,
    /// The pass running when it was taken.
    pub(crate) pass: u32,
    /// The tasks done in that pass.
    pub(crate) done: DoneSet,
    /// When it was taken (state clock).
    pub(crate) created_ms: u64,
}

/// A job's newest progress checkpoints, oldest first.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct ProgressLog {
    /// The id the next checkpoint gets; starts at 1 and only grows.
    pub(crate) next_id: u64,
    pub(crate) kept: VecDeque<ProgressCheckpoint>,
    /// How many restores the job went through: a restore may move the pass back, which the
    /// transition checks allow only across one.
    pub(crate) restores: u64,
}

impl Default for ProgressLog {
    fn default() -> Self {
        Self { next_id: 1, kept: VecDeque::new(), restores: 0 }
    }
}

impl ProgressLog {
    /// Records a checkpoint of `pass` with `done`; its id.
    pub(crate) fn record(&mut self, pass: u32, done: DoneSet, now_ms: u64) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.kept.push_back(ProgressCheckpoint { id, pass, done, created_ms: now_ms });
        while self.kept.len() > PROGRESS_CHECKPOINTS_KEPT {
            self.kept.pop_front();
        }
        id
    }

    pub(crate) fn get(&self, id: u64) -> Option<&ProgressCheckpoint> {
        self.kept.iter().find(|checkpoint| checkpoint.id == id)
    }

    /// The ids still kept, oldest first (for an error naming what can be restored).
    pub(crate) fn ids(&self) -> Vec<u64> {
        self.kept.iter().map(|checkpoint| checkpoint.id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_sets_hold_exactly_their_tasks() {
        let set = DoneSet::new(130, [0, 63, 64, 129, 500]);
        assert!([0, 63, 64, 129].iter().all(|task_id| set.contains(*task_id)));
        assert!(!set.contains(1) && !set.contains(128) && !set.contains(500));
        assert_eq!((set.count(), set.task_count()), (4, 130));
        assert!(set.is_well_formed());
        let empty = DoneSet::new(0, []);
        assert!(empty.is_well_formed() && empty.count() == 0 && !empty.contains(0));
    }

    #[test]
    fn the_log_keeps_the_newest_and_never_reuses_ids() {
        let mut log = ProgressLog::default();
        let ids: Vec<u64> = (0..PROGRESS_CHECKPOINTS_KEPT as u32 + 2)
            .map(|pass| log.record(pass, DoneSet::new(1, []), 5))
            .collect();
        assert_eq!(ids.first(), Some(&1));
        assert_eq!(log.kept.len(), PROGRESS_CHECKPOINTS_KEPT);
        assert!(log.get(1).is_none() && log.get(2).is_none(), "the oldest were dropped");
        assert_eq!(log.get(3).map(|checkpoint| checkpoint.pass), Some(2));
        assert_eq!(log.ids().last(), ids.last());
    }
}
