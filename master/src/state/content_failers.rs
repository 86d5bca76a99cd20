//! `ContentFailers`: which trainers failed which task for its content in the current pass, so
//! one trainer cannot spend a task's whole failure budget alone.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::invariant::InvariantViolation;

/// The most (task, trainer) pairs the job remembers. Past it, every content failure spends the
/// budget (the rule before trainers were told apart): the state stays bounded whatever trainers
/// report, and the bound is counted in the largest admitted state (`limits.rs`).
pub const CONTENT_FAILERS_COUNT_MAX: u64 = 1 << 16;

/// The trainers that failed each task for its content, by task id; cleared per task when it
/// finishes and for all when a pass starts.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub(crate) struct ContentFailers {
    pub(crate) by_task: BTreeMap<u64, BTreeSet<u64>>,
    /// The pairs in `by_task`, at most [`CONTENT_FAILERS_COUNT_MAX`].
    pub(crate) count: u64,
}

impl ContentFailers {
    /// `trainer` failed `task` for its content: whether the failure spends the task's budget.
    /// It does the first time each trainer fails the task, and again only when no registered
    /// trainer other than those that failed it is left to try (a job with one trainer still
    /// fails a corrupt chunk), or when the job-wide bound is reached.
    pub(crate) fn spends_budget(
        &mut self,
        task: u64,
        trainer: u64,
        registered: impl IntoIterator<Item = u64>,
    ) -> bool {
        let failers = self.by_task.entry(task).or_default();
        if !failers.contains(&trainer) {
            if self.count < CONTENT_FAILERS_COUNT_MAX {
                failers.insert(trainer);
                self.count += 1;
            }
            return true;
        }
        let untried = registered.into_iter().any(|other| !failers.contains(&other));
        !untried
    }

    /// Forgets who failed `task` (it finished).
    pub(crate) fn forget(&mut self, task: u64) {
        if let Some(failers) = self.by_task.remove(&task) {
            self.count -= failers.len() as u64;
        }
    }

    /// Forgets everything (a pass starts: every task gets the same chances in every pass).
    pub(crate) fn clear(&mut self) {
        self.by_task.clear();
        self.count = 0;
    }

    /// The pairs actually held, for the invariant that `count` counts them.
    pub(crate) fn counted(&self) -> u64 {
        self.by_task.values().map(|failers| failers.len() as u64).sum()
    }

    /// The invariant: the pairs are counted exactly, within their bound, and name tasks of a
    /// job of `task_count` tasks.
    pub(crate) fn check(&self, task_count: u64) -> Result<(), InvariantViolation> {
        let (actual, counted) = (self.counted(), self.count);
        if actual != counted || counted > CONTENT_FAILERS_COUNT_MAX {
            let count_max = CONTENT_FAILERS_COUNT_MAX;
            return Err(InvariantViolation::ContentFailersMismatch { actual, counted, count_max });
        }
        match self.by_task.keys().find(|task| **task >= task_count) {
            Some(task) => Err(InvariantViolation::TaskIdOutOfRange {
                task: *task,
                queue: "content failers",
                task_count,
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trainer spends a task's budget once; again only when nobody else is left to try; a
    /// finished task and a new pass forget the failers.
    #[test]
    fn budget_spent_once_per_distinct_trainer() {
        let mut failers = ContentFailers::default();
        assert!(failers.spends_budget(4, 1, [1, 2]), "trainer 1's first failure");
        assert!(!failers.spends_budget(4, 1, [1, 2]), "trainer 2 has not tried yet");
        assert!(failers.spends_budget(4, 2, [1, 2]), "trainer 2's first failure");
        assert!(failers.spends_budget(4, 1, [1, 2]), "both tried: nobody else is left");
        assert!(failers.spends_budget(5, 1, [1]), "a lone trainer's first failure");
        assert!(failers.spends_budget(5, 1, [1]), "a lone trainer spends every failure");
        assert_eq!((failers.count, failers.counted()), (3, 3));
        failers.forget(4);
        assert_eq!((failers.count, failers.counted()), (1, 1));
        failers.clear();
        assert_eq!((failers.count, failers.counted()), (0, 0));
    }
}
