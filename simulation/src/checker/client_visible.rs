//! Client-visible safety: what a client was told stays true, in the client's own job (task ids,
//! trainer ids and slot generations are a job's own: a fact of one job never stands in for the
//! same numbers in another).
//! - Every acknowledged write shows in the applied log, in the client's job, with the answer
//!   the client got: a leader applies a command before it answers, so the fact must be there
//!   within a bound (nothing acknowledged is lost, nothing answered before it was committed).
//! - No accepted completion is lost: a task accepted as finished in a pass is never dispatched
//!   again in that pass of its job (it stays in `done` until the pass advances past it), unless
//!   a restore of the job put its queue back since (a restore with the model puts it back once
//!   the pservers reloaded, before any task is handed out again: what was accepted until the
//!   first dispatch after it may be handed out anew).

use std::collections::{BTreeMap, BTreeSet};

use master::state::{Command, Response};

use super::job_directory::JobDirectory;
use super::per_job::PerJob;
use super::state_machine_safety::LogCursor;
use super::{CanonicalLog, Violation};
use crate::history::{AckedWrite, Fact};

/// An acknowledged write must show in the applied log within this (simulated) time.
const SHOW_MS_MAX: u64 = 2_000;

/// Acknowledged writes not seen in the log yet, and per job the facts the log shows and the
/// completions.
#[derive(Default)]
pub struct ClientVisible {
    waiting: Vec<AckedWrite>,
    facts: PerJob<BTreeSet<Fact>>,
    completions: PerJob<Completions>,
    cursor: LogCursor,
}

/// One job's dispatches and accepted completions, by task.
#[derive(Default)]
struct Completions {
    /// The pass each task was last dispatched in.
    dispatched_pass: BTreeMap<u64, u32>,
    /// The pass in which each task was last accepted as finished, and the entry that did it.
    finished: BTreeMap<u64, (u32, u64)>,
    /// A restore with the model was asked: its queue goes back before the next dispatch.
    restore_pending: bool,
}

/// How many distinct tasks of a job the log showed dispatched, and accepted as finished.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TasksSeen {
    pub dispatched: u64,
    pub finished: u64,
}

impl ClientVisible {
    pub fn check(
        &mut self,
        acked: &[AckedWrite],
        canonical: &CanonicalLog,
        jobs: &JobDirectory,
        now_ms: u64,
    ) -> Result<(), Violation> {
        self.read_log(canonical, jobs)?;
        self.waiting.extend(acked.iter().cloned());
        let facts = &self.facts;
        let shown = |write: &AckedWrite| {
            facts.get(&write.job).is_some_and(|facts| facts.contains(&write.fact))
        };
        self.waiting.retain(|write| !shown(write));
        match self.waiting.iter().find(|write| now_ms.saturating_sub(write.time_ms) > SHOW_MS_MAX) {
            None => Ok(()),
            Some(write) => Err(Violation::new(
                "client-visible safety",
                format!(
                    "client {} of job {:?} was told {:?} at {} ms, and no replica applied it by \
                     {now_ms} ms",
                    write.client, write.job, write.fact, write.time_ms
                ),
            )),
        }
    }

    /// Per job, the distinct tasks the log showed dispatched and accepted as finished.
    pub fn tasks_seen(&self) -> BTreeMap<String, TasksSeen> {
        let seen = |completions: &Completions| TasksSeen {
            dispatched: completions.dispatched_pass.len() as u64,
            finished: completions.finished.len() as u64,
        };
        self.completions
            .iter()
            .map(|(job, completions)| (job.to_string(), seen(completions)))
            .collect()
    }

    fn read_log(&mut self, canonical: &CanonicalLog, jobs: &JobDirectory) -> Result<(), Violation> {
        for applied in self.cursor.read(canonical) {
            let Some(job) = jobs.job_of(&applied.request.command)? else { continue };
            let command = applied.request.command.scoped().1;
            self.facts.of(job).extend(fact(command, applied.response));
            if !applied.replay {
                let completions = self.completions.of(job);
                completions.record(job, command, applied.response, applied.log_id)?;
            }
        }
        Ok(())
    }
}

impl Completions {
    fn record(
        &mut self,
        job: &str,
        command: &Command,
        response: &Response,
        log_id: openraft::LogId<u64>,
    ) -> Result<(), Violation> {
        match response {
            Response::ProgressRestored { .. } => self.finished.clear(),
            Response::RestoreWaiting { .. } => self.restore_pending = true,
            Response::Task(_) if self.restore_pending => {
                self.finished.clear();
                self.restore_pending = false;
            }
            _ => {}
        }
        if let Response::Task(assignment) = response {
            let (task_id, pass) = (assignment.task_id, assignment.pass);
            if let Some((finished_pass, index)) = self.finished.get(&task_id) {
                if *finished_pass == pass {
                    return Err(Violation::new(
                        "client-visible safety",
                        format!(
                            "task {task_id} of job {job:?} was accepted as finished in pass {pass} \
                             at index {index}, and dispatched again in that pass by {log_id}"
                        ),
                    ));
                }
            }
            self.dispatched_pass.insert(task_id, pass);
        }
        if let (Command::TaskFinished { task_id, .. }, Response::Accepted) = (command, response) {
            let pass = self.dispatched_pass.get(task_id).copied().unwrap_or(0);
            self.finished.insert(*task_id, (pass, log_id.index));
        }
        Ok(())
    }
}

/// What an applied command with its answer tells a client of its job.
fn fact(command: &Command, response: &Response) -> Option<Fact> {
    match (command, response) {
        (_, Response::Task(assignment)) => {
            Some(Fact::Dispatched { task_id: assignment.task_id, epoch: assignment.epoch })
        }
        (
            Command::TaskFinished { task_id, epoch }
            | Command::TaskFailed { task_id, epoch, .. }
            | Command::TaskFailedWithFault { task_id, epoch, .. },
            _,
        ) => {
            let accepted = *response == Response::Accepted;
            let stale = *response == Response::Stale;
            (accepted || stale).then_some(Fact::Reported {
                task_id: *task_id,
                epoch: *epoch,
                accepted,
            })
        }
        (_, Response::TrainerRegistered { trainer }) => {
            Some(Fact::Registered { trainer: *trainer })
        }
        (_, Response::SlotClaimed { slot, generation, .. }) => {
            Some(Fact::SlotGranted { slot: *slot, generation: *generation })
        }
        (Command::RecordCheckpoint { slot, generation, meta }, Response::Accepted) => {
            let (slot, generation, step) = (*slot, *generation, meta.step);
            Some(Fact::CheckpointRecorded { slot, generation, step })
        }
        _ => None,
    }
}
