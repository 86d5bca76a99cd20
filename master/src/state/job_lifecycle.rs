//! A job's life beyond its queue: cancelling it, and recording and restoring its progress
//! (progress checkpoints). A job ends when its last pass drains or it is cancelled; the group
//! removes it once its retention passed.

use serde::{Deserialize, Serialize};

use super::job_state::JobState;
use super::progress::DoneSet;
use super::response::Response;

/// How and when a job ended.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobEnd {
    /// State clock when it ended: its retention counts from here.
    pub at_ms: u64,
    /// Cancelled rather than finished.
    pub cancelled: bool,
}

impl JobState {
    /// Ends the job as cancelled (a finished job stays finished; a repeat changes nothing).
    pub(crate) fn cancel(&mut self, now_ms: u64) -> Response {
        if self.ended.is_none() {
            self.ended = Some(JobEnd { at_ms: now_ms, cancelled: true });
        }
        Response::Accepted
    }

    /// Records the running pass and its done tasks as a progress checkpoint.
    pub(crate) fn checkpoint_progress(&mut self, now_ms: u64) -> Response {
        let Some(job) = &self.job else { return Response::NoDataset };
        let (pass, task_count) = (job.queue.pass, job.dataset.task_count());
        let done = DoneSet::new(task_count, job.queue.done.iter().copied());
        let count = done.count();
        let id = self.progress.record(pass, done, now_ms);
        Response::ProgressCheckpointed { id, pass, done: count }
    }

    /// Puts the queue back to progress checkpoint `id`; a finished job runs again.
    pub(crate) fn restore_progress(&mut self, id: u64) -> Response {
        let Some(job) = &mut self.job else { return Response::NoDataset };
        let Some(checkpoint) = self.progress.get(id) else {
            let kept = self.progress.ids();
            let reason = format!("no progress checkpoint {id} is kept (kept: {kept:?})");
            return Response::Rejected { reason };
        };
        let (passes, policy) = (job.dataset.passes, job.dataset.policy);
        let pass = checkpoint.pass;
        let todo = job.queue.restore((pass, &checkpoint.done), passes, &policy);
        self.ended = None;
        self.progress.restores += 1;
        Response::ProgressRestored { pass, todo }
    }

    /// Whether the job was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.ended.is_some_and(|end| end.cancelled)
    }

    /// How and when the job ended, if it did.
    pub fn ended(&self) -> Option<JobEnd> {
        self.ended
    }
}
