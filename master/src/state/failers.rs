//! `Failers`: which trainers failed which task in the current pass, so one trainer cannot
//! spend a task's failure budget alone, and its own faults spend none of it while another
//! trainer may still read the task.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::violation::InvariantViolation;
use client::Fault;

/// The most (task, trainer) pairs the job remembers. Past it, a content failure from a trainer
/// not remembered spends the budget (the rule before trainers were told apart) and a local one
/// never does: the state stays bounded whatever trainers report, and the bound is counted in
/// the largest admitted state (`limits.rs`).
pub const FAILERS_COUNT_MAX: u64 = 1 << 16;
/// The fewest pairs a job may remember, however few tasks it has: each job remembers its share
/// of [`FAILERS_COUNT_MAX`] (`TaskQueue::failers_count_max`).
pub const FAILERS_COUNT_FLOOR: u64 = 1024;

/// The trainers that failed each task, by task id; cleared per task when it finishes and for
/// all when a pass starts.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub(crate) struct Failers {
    pub(crate) by_task: BTreeMap<u64, BTreeSet<u64>>,
    /// The pairs in `by_task`, at most the job's share of [`FAILERS_COUNT_MAX`].
    pub(crate) count: u64,
}

impl Failers {
    /// `trainer` failed `task_id` with `fault`: whether the failure spends the task's budget.
    /// `registered` are the live trainers; one that has not failed the task yet is "untried".
    /// A `Content` failure spends it the first time each trainer fails the task, and again
    /// once nobody is untried (a job with one trainer still fails a corrupt chunk). A `Local`
    /// failure spends it only once nobody is untried: while another trainer may read the task,
    /// one trainer's broken view costs nothing, but a file cut short for every trainer still
    /// ends in `failed` with its reason.
    pub(crate) fn spends_budget(
        &mut self,
        (task_id, trainer): (u64, u64),
        fault: Fault,
        registered: impl IntoIterator<Item = u64>,
        count_max: u64,
    ) -> bool {
        let failers = self.by_task.entry(task_id).or_default();
        let first = !failers.contains(&trainer);
        if first && self.count < count_max {
            failers.insert(trainer);
            self.count += 1;
        }
        let untried = registered.into_iter().any(|other| !failers.contains(&other));
        if failers.is_empty() {
            self.by_task.remove(&task_id);
        }
        match fault {
            Fault::Content => first || !untried,
            Fault::Local => !untried,
        }
    }

    /// Forgets who failed `task_id` (it finished).
    pub(crate) fn forget(&mut self, task_id: u64) {
        if let Some(failers) = self.by_task.remove(&task_id) {
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

    /// The invariant: the pairs are counted exactly, within their bound `count_max`, and name
    /// tasks of a job of `task_count` tasks.
    pub(crate) fn check(&self, task_count: u64, count_max: u64) -> Result<(), InvariantViolation> {
        let (actual, counted) = (self.counted(), self.count);
        if actual != counted || counted > count_max {
            return Err(InvariantViolation::FailersMismatch { actual, counted, count_max });
        }
        match self.by_task.keys().find(|task_id| **task_id >= task_count) {
            Some(task_id) => Err(InvariantViolation::TaskIdOutOfRange {
                task_id: *task_id,
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

    /// A trainer spends a task's budget once for content, and for its own faults only once
    /// nobody else is left to try; a finished task and a new pass forget the failers.
    #[test]
    fn budget_spent_once_per_distinct_trainer() {
        let mut failers = Failers::default();
        let (content, local) = (Fault::Content, Fault::Local);
        assert!(
            !failers.spends_budget((3, 1), local, [1, 2], FAILERS_COUNT_MAX),
            "trainer 2 may read it"
        );
        assert!(!failers.spends_budget((3, 1), local, [1, 2], FAILERS_COUNT_MAX), "still");
        assert!(
            failers.spends_budget((3, 2), local, [1, 2], FAILERS_COUNT_MAX),
            "nobody can read it"
        );
        assert!(
            failers.spends_budget((4, 1), content, [1, 2], FAILERS_COUNT_MAX),
            "trainer 1's first failure"
        );
        assert!(
            !failers.spends_budget((4, 1), content, [1, 2], FAILERS_COUNT_MAX),
            "trainer 2 has not tried yet"
        );
        assert!(
            failers.spends_budget((4, 2), content, [1, 2], FAILERS_COUNT_MAX),
            "trainer 2's first failure"
        );
        assert!(
            failers.spends_budget((4, 1), content, [1, 2], FAILERS_COUNT_MAX),
            "both tried: nobody else is left"
        );
        assert!(
            failers.spends_budget((5, 1), content, [1], FAILERS_COUNT_MAX),
            "a lone trainer's first failure"
        );
        assert!(
            failers.spends_budget((5, 1), content, [1], FAILERS_COUNT_MAX),
            "a lone trainer spends every failure"
        );
        assert_eq!((failers.count, failers.counted()), (5, 5));
        failers.forget(4);
        assert_eq!((failers.count, failers.counted()), (3, 3));
        failers.clear();
        assert_eq!((failers.count, failers.counted()), (0, 0));
    }
}
