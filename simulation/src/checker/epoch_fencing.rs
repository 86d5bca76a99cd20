//! Epoch fencing: a `TaskFinished` or `TaskFailed` is accepted only for the task's latest
//! dispatch in its job. Read from the canonical log in order: each dispatch answer
//! (`Response::Task`) sets the task's epoch in the job the `GetTask` was for; an accepted report
//! with any other epoch is a stale report let through. Task ids and epochs are a job's own.

use std::collections::BTreeMap;

use master::state::{Command, Response};

use super::job_directory::JobDirectory;
use super::per_job::PerJob;
use super::state_machine_safety::LogCursor;
use super::{CanonicalLog, Violation};

/// Per job, the latest dispatched epoch per task, and how far the canonical log was read.
#[derive(Default)]
pub struct EpochFencing {
    latest_epoch: PerJob<BTreeMap<u64, u64>>,
    cursor: LogCursor,
}

impl EpochFencing {
    pub fn check(
        &mut self,
        canonical: &CanonicalLog,
        jobs: &JobDirectory,
    ) -> Result<(), Violation> {
        for applied in self.cursor.read(canonical).into_iter().filter(|applied| !applied.replay) {
            let (request, response) = (applied.request, applied.response);
            let Some(job) = jobs.job_of(&request.command)? else { continue };
            let latest_epoch = self.latest_epoch.of(job);
            if let Response::Task(assignment) = response {
                latest_epoch.insert(assignment.task_id, assignment.epoch);
            }
            let (Command::TaskFinished { task_id, epoch }
            | Command::TaskFailed { task_id, epoch, .. }
            | Command::TaskFailedWithFault { task_id, epoch, .. }) = request.command.scoped().1
            else {
                continue;
            };
            let latest = latest_epoch.get(task_id).copied();
            if *response == Response::Accepted && latest != Some(*epoch) {
                return Err(Violation::new(
                    "epoch fencing",
                    format!(
                        "entry {} accepted a report for task {task_id} epoch {epoch} of job \
                         {job:?}, but its latest dispatch is epoch {latest:?}",
                        applied.log_id
                    ),
                ));
            }
        }
        Ok(())
    }
}
