//! The task queues (todo, pending, done, failed) and the pass they belong to.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::dataset::{QueuePolicy, TASK_COUNT_MAX};
use super::failers::{Failers, FAILERS_COUNT_FLOOR, FAILERS_COUNT_MAX};
use super::task::{PendingTask, Task};
use client::shuffle::task_rank;
use client::Fault;

/// The longest failure reason kept for one task; longer ones are cut (on a character
/// boundary): the reason is for a person and must not bloat the state. Clients cut to it too.
pub use client::FAILURE_REASON_BYTES_MAX;
/// The most bytes of failure reasons the whole group keeps: a million tasks each failed with a
/// long reason would otherwise take a gigabyte of state. Each job keeps its share (in
/// proportion to its tasks, [`share_of`]); past it, new reasons are cut to what is left; a
/// finished task's reason is dropped, which frees its bytes.
pub const FAILURE_REASONS_BYTES_MAX: u64 = 8 << 20;
/// The smallest share of the reason budget a job gets, however few tasks it has.
pub const FAILURE_REASONS_BYTES_FLOOR: u64 = 64 << 10;

/// A job's share of a group-wide budget `total`: in proportion to its tasks among the
/// [`TASK_COUNT_MAX`] the group admits, never below `floor` nor above `total`. The shares of
/// all jobs together stay below `total` plus one floor per job.
pub(crate) fn share_of(total: u64, task_count: u64, floor: u64) -> u64 {
    let share = u128::from(total) * u128::from(task_count) / u128::from(TASK_COUNT_MAX);
    u64::try_from(share).unwrap_or(u64::MAX).max(floor).min(total)
}

/// Every task is in exactly one of `todo`, `pending`, `done` or `failed`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct TaskQueue {
    /// Indexed by task id.
    pub(crate) tasks: Vec<Task>,
    /// Dispatched from the front; retries join at the back.
    pub(crate) todo: VecDeque<u64>,
    /// Dispatched tasks by id, ordered so expiry and requeues visit them alike on every replica.
    pub(crate) pending: BTreeMap<u64, PendingTask>,
    /// Finished in the current pass; they come back, sorted, when the next pass starts.
    pub(crate) done: BTreeSet<u64>,
    /// Tasks that exceeded `max_task_failures` in the current pass; kept visible, never dropped.
    pub(crate) failed: BTreeSet<u64>,
    /// The running pass; only grows.
    pub(crate) pass: u32,
    /// Set once the last pass drained (or nothing is left to run); never cleared.
    pub(crate) job_finished: bool,
    /// Integer moving average of successful completion times; `None` before the first one.
    pub(crate) completion_ms_average: Option<u64>,
    /// The task each trainer holds (pending on it): a trainer holds at most one, and asking
    /// again gives it the same one.
    pub(crate) held: BTreeMap<u64, u64>,
    /// The bytes of every task's `last_failure` together, at most the job's share
    /// ([`TaskQueue::reasons_bytes_max`]).
    pub(crate) reason_bytes: u64,
    /// Who failed which task in this pass: one trainer alone never spends a task's failure
    /// budget more than once.
    pub(crate) failers: Failers,
}

/// How a (task, epoch) report relates to the queue.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Report {
    /// The report is for the pending dispatch and was applied.
    Applied,
    /// The task is not pending under this epoch: fenced off, nothing changed.
    Stale,
    /// No task has this id.
    UnknownTask,
}

/// Where a task that did not succeed goes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Requeue {
    Todo,
    Failed,
}

impl TaskQueue {
    /// A queue for pass 0 with every task in todo, in id order or shuffled with `shuffle`.
    pub(crate) fn new(task_count: u64, shuffle: Option<u64>) -> Self {
        let count = usize::try_from(task_count).expect("task count is bounded by the chunk count");
        Self {
            tasks: vec![Task::default(); count],
            todo: pass_order((0..task_count).collect(), shuffle, 0),
            pending: BTreeMap::new(),
            done: BTreeSet::new(),
            failed: BTreeSet::new(),
            pass: 0,
            job_finished: false,
            completion_ms_average: None,
            held: BTreeMap::new(),
            reason_bytes: 0,
            failers: Failers::default(),
        }
    }

    /// The job's share of the failure reason budget.
    pub(crate) fn reasons_bytes_max(&self) -> u64 {
        share_of(FAILURE_REASONS_BYTES_MAX, self.tasks.len() as u64, FAILURE_REASONS_BYTES_FLOOR)
    }

    /// The job's share of the (task, trainer) failers the group remembers.
    pub(crate) fn failers_count_max(&self) -> u64 {
        share_of(FAILERS_COUNT_MAX, self.tasks.len() as u64, FAILERS_COUNT_FLOOR)
    }

    /// The task `trainer` holds, with its pending dispatch.
    pub(crate) fn held_by(&self, trainer: u64) -> Option<(u64, PendingTask)> {
        let task_id = *self.held.get(&trainer)?;
        let pending = self.pending.get(&task_id).expect("a held task is pending");
        Some((task_id, pending.clone()))
    }

    /// How long a task may take: never less than the minimum, and `k` times the usual
    /// completion time once there is one, so slow-but-healthy tasks are not taken back.
    pub(crate) fn timeout_ms(&self, policy: &QueuePolicy) -> u64 {
        let average = self.completion_ms_average.unwrap_or(0);
        let scaled = average.saturating_mul(u64::from(policy.timeout_factor));
        policy.task_timeout_min_ms.max(scaled)
    }

    /// Moves the deadline of `task_id`, pending under `epoch`, to a whole timeout from `now_ms`
    /// (never earlier than it was): its holder is still at work on it. The timeout, or `None`
    /// when the task is not pending under that epoch.
    pub(crate) fn extend(
        &mut self,
        (task_id, epoch): (u64, u64),
        now_ms: u64,
        policy: &QueuePolicy,
    ) -> Option<u64> {
        let timeout_ms = self.timeout_ms(policy);
        let pending = self.pending.get_mut(&task_id).filter(|pending| pending.epoch == epoch)?;
        pending.deadline_ms = pending.deadline_ms.max(now_ms.saturating_add(timeout_ms));
        Some(timeout_ms)
    }

    /// Pops the front of todo, bumps its epoch and marks it pending. `None` if todo is empty.
    pub(crate) fn dispatch(
        &mut self,
        trainer: u64,
        now_ms: u64,
        policy: &QueuePolicy,
    ) -> Option<(u64, PendingTask)> {
        let task_id = self.todo.pop_front()?;
        let deadline_ms = now_ms.saturating_add(self.timeout_ms(policy));
        let record = self.task_mut(task_id);
        record.epoch += 1;
        let pending =
            PendingTask { epoch: record.epoch, trainer, dispatched_at_ms: now_ms, deadline_ms };
        self.pending.insert(task_id, pending.clone());
        let previous = self.held.insert(trainer, task_id);
        assert!(previous.is_none(), "trainer {trainer} got a second task while holding one");
        Some((task_id, pending))
    }

    /// Marks a pending task done if `epoch` is its pending epoch, and learns its duration.
    pub(crate) fn finish(&mut self, task_id: u64, epoch: u64, now_ms: u64) -> Report {
        let Some(pending) = self.take_pending(task_id, epoch) else {
            return self.not_pending(task_id);
        };
        let sample = now_ms.saturating_sub(pending.dispatched_at_ms);
        self.completion_ms_average = Some(match self.completion_ms_average {
            None => sample,
            // Integer arithmetic in u128 so every replica computes the same value, overflow-free.
            Some(average) => {
                let next = (u128::from(average) * 7 + u128::from(sample)) / 8;
                u64::try_from(next).expect("a weighted mean of u64 values fits in u64")
            }
        });
        self.set_reason(task_id, None);
        self.failers.forget(task_id);
        self.done.insert(task_id);
        Report::Applied
    }

    /// A failure of the pending dispatch. A `Local` fault (the trainer could not read the
    /// data) requeues the task without spending its budget while another registered trainer
    /// has not failed it; a `Content` fault spends it once per distinct trainer (see
    /// [`Failers::spends_budget`]; `registered` are the live trainers). A failure that spends
    /// the budget requeues the task or marks it failed.
    pub(crate) fn fail(
        &mut self,
        (task_id, epoch): (u64, u64),
        reason: &str,
        fault: Fault,
        registered: impl IntoIterator<Item = u64>,
        policy: &QueuePolicy,
    ) -> Report {
        let Some(pending) = self.take_pending(task_id, epoch) else {
            return self.not_pending(task_id);
        };
        self.set_reason(task_id, Some(reason));
        let count_max = self.failers_count_max();
        let spends =
            self.failers.spends_budget((task_id, pending.trainer), fault, registered, count_max);
        if !spends {
            self.todo.push_back(task_id);
            return Report::Applied;
        }
        let record = self.task_mut(task_id);
        record.failures = record.failures.saturating_add(1);
        self.requeue_or_fail(task_id, policy);
        Report::Applied
    }

    /// Takes back every pending task whose deadline is at or before `now_ms`, in id order.
    pub(crate) fn expire(
        &mut self,
        now_ms: u64,
        reason: &str,
        policy: &QueuePolicy,
    ) -> (Vec<u64>, Vec<u64>) {
        let expired: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, pending)| pending.deadline_ms <= now_ms)
            .map(|(task_id, _)| *task_id)
            .collect();
        let (mut requeued, mut failed) = (Vec::new(), Vec::new());
        for task_id in expired {
            self.remove_pending(task_id);
            let record = self.task_mut(task_id);
            record.timeouts = record.timeouts.saturating_add(1);
            self.set_reason(task_id, Some(reason));
            match self.requeue_or_fail(task_id, policy) {
                Requeue::Todo => requeued.push(task_id),
                Requeue::Failed => failed.push(task_id),
            }
        }
        (requeued, failed)
    }

    /// Puts every task pending on `trainer` back at the end of todo, in id order. Not counted
    /// as a failure: the trainer died, the task did nothing wrong. Epochs stay as they are; the
    /// next dispatch bumps them, which fences any late report from the lost trainer.
    pub(crate) fn release_trainer(&mut self, trainer: u64) -> Vec<u64> {
        let Some(task_id) = self.held.get(&trainer).copied() else { return Vec::new() };
        self.remove_pending(task_id);
        self.todo.push_back(task_id);
        vec![task_id]
    }

    /// Starts the next pass, or finishes the job, once todo and pending are both empty. Called
    /// after every transition that takes a task out of todo or pending, including the one that
    /// moves a pass's last task to `failed`.
    pub(crate) fn advance_if_drained(
        &mut self,
        passes: u32,
        policy: &QueuePolicy,
        shuffle: Option<u64>,
    ) {
        if self.job_finished || !self.todo.is_empty() || !self.pending.is_empty() {
            return;
        }
        let mut next: Vec<u64> = self.done.iter().copied().collect();
        if policy.retry_failed_next_pass {
            next.extend(self.failed.iter().copied());
        }
        // A pass with nothing to run (every task failed and stays failed) would never end:
        // the job is over, with those tasks visible in `failed`.
        if self.pass.saturating_add(1) >= passes || next.is_empty() {
            self.job_finished = true;
            return;
        }
        self.done.clear();
        self.failers.clear();
        if policy.retry_failed_next_pass {
            self.failed.clear();
        }
        for task_id in &next {
            // Failure limits are per pass: a task gets the same chances in every pass.
            let record = self.task_mut(*task_id);
            record.failures = 0;
            record.timeouts = 0;
        }
        self.pass += 1;
        self.todo = pass_order(next, shuffle, self.pass);
    }

    fn requeue_or_fail(&mut self, task_id: u64, policy: &QueuePolicy) -> Requeue {
        let record = self.task_mut(task_id);
        if record.failures.saturating_add(record.timeouts) > policy.max_task_failures {
            self.failed.insert(task_id);
            return Requeue::Failed;
        }
        self.todo.push_back(task_id);
        Requeue::Todo
    }

    /// Removes and returns the pending entry for `task_id` if its epoch is `epoch`.
    fn take_pending(&mut self, task_id: u64, epoch: u64) -> Option<PendingTask> {
        match self.pending.get(&task_id) {
            Some(pending) if pending.epoch == epoch => self.remove_pending(task_id),
            _ => None,
        }
    }

    /// Takes `task_id` out of pending and out of its trainer's hands.
    fn remove_pending(&mut self, task_id: u64) -> Option<PendingTask> {
        let pending = self.pending.remove(&task_id)?;
        self.held.remove(&pending.trainer);
        Some(pending)
    }

    /// Replaces `task_id`'s failure reason, cut to the per-task limit and to what the job's
    /// budget has left; `None` drops it.
    fn set_reason(&mut self, task_id: u64, reason: Option<&str>) {
        let old = self.task_mut(task_id).last_failure.take();
        self.reason_bytes -= old.map_or(0, |old| old.len() as u64);
        let Some(reason) = reason else { return };
        let left = self.reasons_bytes_max().saturating_sub(self.reason_bytes);
        let bytes_max = FAILURE_REASON_BYTES_MAX.min(usize::try_from(left).unwrap_or(usize::MAX));
        let kept = truncate(reason, bytes_max);
        self.reason_bytes += kept.len() as u64;
        self.task_mut(task_id).last_failure = Some(kept);
    }

    fn not_pending(&self, task_id: u64) -> Report {
        if self.task_index(task_id).is_some() {
            Report::Stale
        } else {
            Report::UnknownTask
        }
    }

    fn task_index(&self, task_id: u64) -> Option<usize> {
        usize::try_from(task_id).ok().filter(|index| *index < self.tasks.len())
    }

    /// The record of a task id the queue itself produced (or one checked by `not_pending`).
    fn task_mut(&mut self, task_id: u64) -> &mut Task {
        let index = self.task_index(task_id).expect("queued task ids are below the task count");
        &mut self.tasks[index]
    }
}

/// The order a pass hands `tasks` out in: by id, or by their rank in the pass under the
/// job's shuffle seed (`client::shuffle`), a permutation computed afresh and never stored.
pub(crate) fn pass_order(mut tasks: Vec<u64>, shuffle: Option<u64>, pass: u32) -> VecDeque<u64> {
    let Some(seed) = shuffle else {
        tasks.sort_unstable();
        return tasks.into();
    };
    // Ranks are distinct, so sorting (rank, id) pairs is the permutation; pairs sort about
    // twice as fast as `sort_by_cached_key` (a million tasks: ~35 ms against ~70 ms).
    let mut ranked: Vec<(u64, u64)> =
        tasks.into_iter().map(|task_id| (task_rank(seed, pass, task_id), task_id)).collect();
    ranked.sort_unstable();
    ranked.into_iter().map(|(_, task_id)| task_id).collect()
}

/// Cuts `text` to at most `bytes_max` bytes without splitting a character.
pub fn truncate(text: &str, bytes_max: usize) -> String {
    let mut end = text.len().min(bytes_max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Truncation keeps at most the limit and never splits a UTF-8 character.
    #[test]
    fn truncate_respects_char_boundaries() {
        let cases =
            [("abc", 5, "abc"), ("abc", 2, "ab"), ("é", 1, ""), ("aé", 2, "a"), ("", 0, "")];
        for (text, bytes_max, expected) in cases {
            assert_eq!(truncate(text, bytes_max), expected, "{text:?} to {bytes_max}");
        }
    }

    /// Reasons are cut per task and by the job's budget, and a finished task frees its bytes.
    #[test]
    fn failure_reasons_stay_within_the_budget() {
        let budget = FAILURE_REASONS_BYTES_FLOOR;
        let count = budget / FAILURE_REASON_BYTES_MAX as u64 + 2;
        let mut queue = TaskQueue::new(count, None);
        assert_eq!(queue.reasons_bytes_max(), budget, "a small job gets the floor");
        let long = "x".repeat(FAILURE_REASON_BYTES_MAX * 2);
        for task_id in 0..count {
            queue.set_reason(task_id, Some(&long));
        }
        assert_eq!(queue.reason_bytes, budget);
        assert_eq!(
            queue.tasks[0].last_failure.as_ref().map(String::len),
            Some(FAILURE_REASON_BYTES_MAX)
        );
        assert_eq!(queue.tasks[count as usize - 1].last_failure.as_deref(), Some(""));
        queue.set_reason(0, None);
        assert_eq!(queue.reason_bytes, budget - FAILURE_REASON_BYTES_MAX as u64);
    }

    /// A job's share grows with its tasks, from the floor to the whole budget.
    #[test]
    fn shares_follow_the_task_count() {
        let total = FAILURE_REASONS_BYTES_MAX;
        assert_eq!(share_of(total, 1, FAILURE_REASONS_BYTES_FLOOR), FAILURE_REASONS_BYTES_FLOOR);
        assert_eq!(share_of(total, TASK_COUNT_MAX / 2, 0), total / 2);
        assert_eq!(share_of(total, TASK_COUNT_MAX, 0), total);
        assert_eq!(share_of(total, u64::MAX, 0), total);
    }
}
