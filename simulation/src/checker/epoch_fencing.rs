//! Epoch fencing: a `TaskFinished` or `TaskFailed` is accepted only for the task's latest
//! dispatch. Read from the canonical log in order: each dispatch answer (`Response::Task`) sets
//! the task's epoch; an accepted report with any other epoch is a stale report let through.

use std::collections::BTreeMap;

use master::state::{Command, Response};

use super::state_machine_safety::LogCursor;
use super::{CanonicalLog, Violation};

/// The latest dispatched epoch per task, and how far the canonical log was read.
#[derive(Default)]
pub struct EpochFencing {
    latest_epoch: BTreeMap<u64, u64>,
    cursor: LogCursor,
}

impl EpochFencing {
    pub fn check(&mut self, canonical: &CanonicalLog) -> Result<(), Violation> {
        for applied in self.cursor.read(canonical).into_iter().filter(|applied| !applied.replay) {
            let (request, response) = (applied.request, applied.response);
            if let Response::Task(assignment) = response {
                self.latest_epoch.insert(assignment.task, assignment.epoch);
            }
            let (Command::TaskFinished { task, epoch }
            | Command::TaskFailed { task, epoch, .. }
            | Command::TaskFailedWithFault { task, epoch, .. }) = request.command.scoped().1
            else {
                continue;
            };
            let latest = self.latest_epoch.get(task).copied();
            if *response == Response::Accepted && latest != Some(*epoch) {
                return Err(Violation::new(
                    "epoch fencing",
                    format!(
                        "entry {} accepted a report for task {task} epoch {epoch}, but its \
                         latest dispatch is epoch {latest:?}",
                        applied.log_id
                    ),
                ));
            }
        }
        Ok(())
    }
}
