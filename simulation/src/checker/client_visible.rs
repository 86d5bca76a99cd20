//! Client-visible safety: what a client was told stays true.
//! - Every acknowledged write is in the log at the index it was acknowledged at, with the very
//!   answer the client got (nothing acknowledged is lost or answered differently).
//! - No accepted completion is lost: a task accepted as finished in a pass is never dispatched
//!   again in that pass (it stays in `done` until the pass advances past it).

use std::collections::BTreeMap;

use master::state::{Command, Response};

use super::{CanonicalLog, Violation};
use crate::history::AckedWrite;

/// Acknowledged writes whose entry is not applied anywhere yet, and the completions so far.
#[derive(Default)]
pub struct ClientVisible {
    waiting: Vec<AckedWrite>,
    /// The pass each task was last dispatched in.
    dispatched_pass: BTreeMap<u64, u32>,
    /// The pass in which each task was last accepted as finished, and the entry that did it.
    finished: BTreeMap<u64, (u32, u64)>,
    next_index: u64,
}

impl ClientVisible {
    pub fn check(
        &mut self,
        acked: &[AckedWrite],
        canonical: &CanonicalLog,
    ) -> Result<(), Violation> {
        self.waiting.extend(acked.iter().cloned());
        let mut still_waiting = Vec::new();
        for write in std::mem::take(&mut self.waiting) {
            match canonical.entries.get(&write.log_id.index) {
                None => still_waiting.push(write),
                Some(entry) => check_acked(&write, entry)?,
            }
        }
        self.waiting = still_waiting;
        self.check_completions(canonical)
    }

    fn check_completions(&mut self, canonical: &CanonicalLog) -> Result<(), Violation> {
        while let Some(entry) = canonical.entries.get(&self.next_index) {
            for command in entry.commands.iter().filter(|command| !command.replay) {
                let (Some(request), Some(response)) = (&command.request, &command.response) else {
                    continue;
                };
                if let Response::Task(assignment) = response {
                    let (task, pass) = (assignment.task, assignment.pass);
                    if let Some((finished_pass, index)) = self.finished.get(&task) {
                        if *finished_pass == pass {
                            return Err(Violation::new(
                                "client-visible safety",
                                format!(
                                    "task {task} was accepted as finished in pass {pass} at index \
                                     {index}, and dispatched again in that pass by {}",
                                    entry.log_id
                                ),
                            ));
                        }
                    }
                    self.dispatched_pass.insert(task, pass);
                }
                if let Command::TaskFinished { task, .. } = &request.command {
                    if *response == Response::Accepted {
                        let pass = self.dispatched_pass.get(task).copied().unwrap_or(0);
                        self.finished.insert(*task, (pass, self.next_index));
                    }
                }
            }
            self.next_index += 1;
        }
        Ok(())
    }
}

fn check_acked(
    write: &AckedWrite,
    entry: &super::state_machine_safety::CanonicalEntry,
) -> Result<(), Violation> {
    let lost = |why: &str| {
        Err(Violation::new(
            "client-visible safety",
            format!("client {} was acknowledged at {}, but {why}", write.client, write.log_id),
        ))
    };
    if entry.log_id != write.log_id {
        return lost(&format!("the log holds {} there", entry.log_id));
    }
    let Some(command) =
        entry.commands.iter().find(|command| command.request_bytes == write.request)
    else {
        return lost("the entry does not hold its command");
    };
    if command.response_bytes != write.response {
        return lost("the log answered it differently");
    }
    Ok(())
}
