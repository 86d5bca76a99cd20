//! A job's life beyond its queue: cancelling it, and recording and restoring its progress
//! (progress checkpoints). A job ends when its last pass drains or it is cancelled; the group
//! removes it once its retention passed.

use serde::{Deserialize, Serialize};

use super::command::Command;
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
    /// A restore under way ends with it: nothing that completes the restore later (a waiting
    /// slot released a lease after its holder exited) may put the queue back.
    pub(crate) fn cancel(&mut self, now_ms: u64) -> Response {
        if self.ended.is_none() {
            self.ended = Some(JobEnd { at_ms: now_ms, cancelled: true });
        }
        self.models.restoring = None;
        Response::Accepted
    }

    /// Ends the job as finished once its queue finished, unless a restore with the model
    /// waits for its pservers: that puts the queue back when they reloaded, so the last task
    /// finished meanwhile does not end the job (it ends, if it does, at the restored queue's).
    pub(crate) fn end_if_finished(&mut self, now_ms: u64) {
        if self.ended.is_none() && !self.is_restoring() && self.job_finished() {
            self.ended = Some(JobEnd { at_ms: now_ms, cancelled: false });
        }
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

    /// Puts the queue back to progress checkpoint `id`. An ended job (finished or cancelled)
    /// never runs again: its restore is refused.
    pub(crate) fn restore_progress(&mut self, id: u64) -> Response {
        if let Some(refusal) = self.refusal_if_ended() {
            return refusal;
        }
        let Some(job) = &mut self.job else { return Response::NoDataset };
        let Some(checkpoint) = self.progress.get(id) else {
            let kept = self.progress.ids();
            let reason = format!("no progress checkpoint {id} is kept (kept: {kept:?})");
            return Response::Rejected { reason };
        };
        let (passes, policy) = (job.dataset.passes, job.dataset.policy);
        let pass = checkpoint.pass;
        let todo = job.queue.restore((pass, &checkpoint.done), passes, &policy, job.shuffle);
        self.progress.restores += 1;
        if crate::planted::active("restore-revives-ended") {
            self.ended = None;
        }
        Response::ProgressRestored { pass, todo }
    }

    /// The answer to a command that would make an ended job run again, if it ended.
    pub(crate) fn refusal_if_ended(&self) -> Option<Response> {
        if crate::planted::active("restore-revives-ended") {
            return None;
        }
        let end = self.ended?;
        let how = if end.cancelled { "was cancelled" } else { "finished" };
        let reason = format!(
            "job {:?} {how} (state clock {} ms); an ended job never runs again: submit a new \
             job to train from its checkpoint",
            self.name, end.at_ms
        );
        Some(Response::Rejected { reason })
    }

    /// Whether the job was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.ended.is_some_and(|end| end.cancelled)
    }

    /// How and when the job ended, if it did.
    pub fn ended(&self) -> Option<JobEnd> {
        self.ended
    }

    /// The job's restores with the model asked so far (the number of the newest).
    pub fn model_restores(&self) -> u64 {
        self.models.restores_asked
    }
}

/// Whether planted bug `restore-revives-ended` lets `command` (a restore) reach a cancelled
/// job.
pub(crate) fn planted_revival(command: &Command) -> bool {
    matches!(command, Command::RestoreProgress { .. })
        && crate::planted::active("restore-revives-ended")
}
