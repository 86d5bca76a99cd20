//! Client-visible safety: what a client was told stays true.
//! - Every acknowledged write shows in the applied log with the answer the client got: a
//!   leader applies a command before it answers, so the fact must be there within a bound
//!   (nothing acknowledged is lost, nothing answered before it was committed).
//! - No accepted completion is lost: a task accepted as finished in a pass is never dispatched
//!   again in that pass (it stays in `done` until the pass advances past it).

use std::collections::{BTreeMap, BTreeSet};

use master::state::{Command, Response};

use super::state_machine_safety::LogCursor;
use super::{CanonicalLog, Violation};
use crate::history::{AckedWrite, Fact};

/// An acknowledged write must show in the applied log within this (simulated) time.
const SHOW_MS_MAX: u64 = 2_000;

/// Acknowledged writes not seen in the log yet, the facts the log shows, and the completions.
#[derive(Default)]
pub struct ClientVisible {
    waiting: Vec<AckedWrite>,
    facts: BTreeSet<Fact>,
    /// The pass each task was last dispatched in.
    dispatched_pass: BTreeMap<u64, u32>,
    /// The pass in which each task was last accepted as finished, and the entry that did it.
    finished: BTreeMap<u64, (u32, u64)>,
    cursor: LogCursor,
}

impl ClientVisible {
    pub fn check(
        &mut self,
        acked: &[AckedWrite],
        canonical: &CanonicalLog,
        now_ms: u64,
    ) -> Result<(), Violation> {
        self.read_log(canonical)?;
        self.waiting.extend(acked.iter().cloned());
        let facts = &self.facts;
        self.waiting.retain(|write| !facts.contains(&write.fact));
        match self.waiting.iter().find(|write| now_ms.saturating_sub(write.time_ms) > SHOW_MS_MAX) {
            None => Ok(()),
            Some(write) => Err(Violation::new(
                "client-visible safety",
                format!(
                    "client {} was told {:?} at {} ms, and no replica applied it by {now_ms} ms",
                    write.client, write.fact, write.time_ms
                ),
            )),
        }
    }

    fn read_log(&mut self, canonical: &CanonicalLog) -> Result<(), Violation> {
        for applied in self.cursor.read(canonical) {
            self.facts.extend(fact(applied.request.command.scoped().1, applied.response));
            if !applied.replay {
                self.completions(
                    applied.request.command.scoped().1,
                    applied.response,
                    applied.log_id,
                )?;
            }
        }
        Ok(())
    }

    fn completions(
        &mut self,
        command: &Command,
        response: &Response,
        log_id: openraft::LogId<u64>,
    ) -> Result<(), Violation> {
        if let Response::Task(assignment) = response {
            let (task, pass) = (assignment.task, assignment.pass);
            if let Some((finished_pass, index)) = self.finished.get(&task) {
                if *finished_pass == pass {
                    return Err(Violation::new(
                        "client-visible safety",
                        format!(
                            "task {task} was accepted as finished in pass {pass} at index \
                             {index}, and dispatched again in that pass by {log_id}"
                        ),
                    ));
                }
            }
            self.dispatched_pass.insert(task, pass);
        }
        if let (Command::TaskFinished { task, .. }, Response::Accepted) = (command, response) {
            let pass = self.dispatched_pass.get(task).copied().unwrap_or(0);
            self.finished.insert(*task, (pass, log_id.index));
        }
        Ok(())
    }
}

/// What an applied command with its answer tells a client.
fn fact(command: &Command, response: &Response) -> Option<Fact> {
    match (command, response) {
        (_, Response::Task(assignment)) => {
            Some(Fact::Dispatched { task: assignment.task, epoch: assignment.epoch })
        }
        (
            Command::TaskFinished { task, epoch }
            | Command::TaskFailed { task, epoch, .. }
            | Command::TaskFailedWithFault { task, epoch, .. },
            _,
        ) => {
            let accepted = *response == Response::Accepted;
            let stale = *response == Response::Stale;
            (accepted || stale).then_some(Fact::Reported { task: *task, epoch: *epoch, accepted })
        }
        (_, Response::TrainerRegistered { trainer }) => {
            Some(Fact::Registered { trainer: *trainer })
        }
        (_, Response::SlotClaimed { index, generation, .. }) => {
            Some(Fact::SlotGranted { index: *index, generation: *generation })
        }
        (Command::RecordCheckpoint { index, generation, meta }, Response::Accepted) => {
            let (index, generation, step) = (*index, *generation, meta.step);
            Some(Fact::CheckpointRecorded { index, generation, step })
        }
        _ => None,
    }
}
