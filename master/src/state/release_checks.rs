//! The invariants cheap enough to check after every apply in release builds too (TigerBeetle's
//! habit): each is O(1), so a replica that breaks one stops at the entry that broke it instead
//! of serving, snapshotting and replicating a wrong state. The full, O(tasks) check is
//! `invariant.rs`, run after every apply in debug builds.

use super::job_state::JobState;
use super::pserver_slots::PSERVER_COUNT_MAX;
use super::sessions::{MEMBER_SESSION_COUNT_MAX, SESSION_COUNT_MAX, STRANGER_SESSION_COUNT_MAX};
use super::task_queue::TaskQueue;
use super::trainer_registry::TRAINER_COUNT_MAX;

impl JobState {
    /// Panics if an apply that started at state clock `clock_before` broke a cheap invariant.
    pub(crate) fn assert_cheap_invariants(&self, clock_before: u64) {
        assert!(self.clock_ms >= clock_before, "the state's clock went back from {clock_before}");
        assert!(self.trainers.trainers.len() <= TRAINER_COUNT_MAX, "trainers over their limit");
        assert!(
            self.trainers
                .trainers
                .last_key_value()
                .is_none_or(|(id, _)| *id < self.trainers.next_trainer_id),
            "a trainer id at or above the next one to be drawn"
        );
        assert!(self.pservers.holders.len() <= PSERVER_COUNT_MAX as usize, "slots over the limit");
        assert!(self.pservers.next_generation >= 1, "generation 0 is never granted");
        let sessions = &self.sessions;
        assert!(sessions.sessions.len() <= SESSION_COUNT_MAX, "sessions over their limit");
        assert!(sessions.strangers_by_age.len() <= STRANGER_SESSION_COUNT_MAX, "strangers over");
        assert!(sessions.by_member.len() <= MEMBER_SESSION_COUNT_MAX, "members over their pool");
        if let Some(job) = &self.job {
            assert!(job.queue.pass < job.dataset.passes, "a pass beyond the job's last");
            job.queue.assert_conserved();
        }
    }
}

impl TaskQueue {
    /// Every task is in exactly one queue's count, a trainer holds only pending tasks, and the
    /// failure reasons stay within their budget.
    pub(crate) fn assert_conserved(&self) {
        let queued = self.todo.len() + self.pending.len() + self.done.len() + self.failed.len();
        assert_eq!(queued, self.tasks.len(), "tasks gained or lost between queues");
        assert!(self.held.len() <= self.pending.len(), "a trainer holds a task not pending");
        assert!(self.reason_bytes <= self.reasons_bytes_max(), "failure reasons over budget");
    }
}
