//! Epoch fencing: a `TaskFinished` or `TaskFailed` is accepted only for the task's latest
//! dispatch. Read from the canonical log in order: each dispatch answer (`Response::Task`) sets
//! the task's epoch; an accepted report with any other epoch is a stale report let through.

use std::collections::BTreeMap;

use master::state::{Command, Response};

use super::{CanonicalLog, Violation};

/// The latest dispatched epoch per task, and how far the canonical log was read.
#[derive(Default)]
pub struct EpochFencing {
    latest_epoch: BTreeMap<u64, u64>,
    next_index: u64,
}

impl EpochFencing {
    pub fn check(&mut self, canonical: &CanonicalLog) -> Result<(), Violation> {
        while let Some(entry) = canonical.entries.get(&self.next_index) {
            for command in entry.commands.iter().filter(|command| !command.replay) {
                let (Some(request), Some(response)) = (&command.request, &command.response) else {
                    continue;
                };
                if let Response::Task(assignment) = response {
                    self.latest_epoch.insert(assignment.task, assignment.epoch);
                }
                let (Command::TaskFinished { task, epoch }
                | Command::TaskFailed { task, epoch, .. }) = &request.command
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
                            entry.log_id
                        ),
                    ));
                }
            }
            self.next_index += 1;
        }
        Ok(())
    }
}
