//! Putting a job's queue back to a progress checkpoint: the pass it recorded, with exactly its
//! done tasks done. What was done after the checkpoint is done again (at least once).

use super::dataset::QueuePolicy;
use super::progress::DoneSet;
use super::task_queue::TaskQueue;

impl TaskQueue {
    /// Puts the queue back to `pass` with `done`'s tasks done. Every other task goes to todo
    /// in the pass's order (by id, or its permutation under `shuffle`) (a failed one too: it gets another try); nothing stays pending, so a late
    /// report of a task pending now is stale (epochs are kept, never reset); failure counts,
    /// reasons and failers restart as in a new pass. The result depends only on the
    /// checkpoint, so restoring the same one twice gives the same queue. How many tasks are
    /// to do.
    pub(crate) fn restore(
        &mut self,
        (pass, done): (u32, &DoneSet),
        passes: u32,
        policy: &QueuePolicy,
        shuffle: Option<u64>,
    ) -> u64 {
        let task_count = self.tasks.len() as u64;
        self.pending.clear();
        self.held.clear();
        self.failed.clear();
        self.failers.clear();
        self.done = (0..task_count).filter(|task_id| done.contains(*task_id)).collect();
        let todo = (0..task_count).filter(|task_id| !done.contains(*task_id)).collect();
        self.todo = super::task_queue::pass_order(todo, shuffle, pass);
        for task in &mut self.tasks {
            task.failures = 0;
            task.timeouts = 0;
            task.last_failure = None;
        }
        self.reason_bytes = 0;
        self.pass = pass;
        self.job_finished = false;
        let todo = self.todo.len() as u64;
        self.advance_if_drained(passes, policy, shuffle);
        todo
    }
}
