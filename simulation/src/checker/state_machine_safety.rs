//! State machine safety (Raft §5.4.3): no two nodes (or two incarnations of one node) apply
//! different entries at one index, and applying the same entry answers the same. The first
//! apply at each index makes the canonical log the other checkers read.

use std::collections::BTreeMap;

use master::state::{decode_request, decode_response, Command, Request, Response};
use openraft::LogId;

use super::Violation;
use crate::observer::{AppliedEntry, MembershipSeen};

/// One command of the canonical log, decoded.
pub struct CanonicalCommand {
    pub request: Option<Request>,
    pub response: Option<Response>,
    pub request_bytes: Vec<u8>,
    pub response_bytes: Vec<u8>,
    /// A retry of a stamp already applied: answered from the session, changed nothing.
    pub replay: bool,
    /// A task hand-off in one command (`FinishedThenGetTask`) as the commands it applies in
    /// turn (each `TaskFinished`, then the `GetTask`) with their answers: what the checkers
    /// read in its place. Empty for any other command.
    pub parts: Vec<(Request, Response)>,
}

/// One entry of the canonical log.
pub struct CanonicalEntry {
    pub log_id: LogId<u64>,
    pub payload_hash: u64,
    pub commands: Vec<CanonicalCommand>,
    /// The configuration a membership entry sets.
    pub membership: Option<MembershipSeen>,
}

/// One decoded command of the canonical log, and the entry that holds it.
pub struct AppliedCommand<'a> {
    pub log_id: LogId<u64>,
    pub request: &'a Request,
    pub response: &'a Response,
    /// A retry of a stamp already applied: answered from the session, changed nothing.
    pub replay: bool,
}

/// How far one checker has read the canonical log.
#[derive(Default)]
pub struct LogCursor {
    next_index: u64,
}

impl LogCursor {
    /// The decoded commands of the entries applied since the last call, in log order (the
    /// canonical log has no gaps: every committed entry was applied one by one somewhere).
    pub fn read<'a>(&mut self, canonical: &'a CanonicalLog) -> Vec<AppliedCommand<'a>> {
        let mut read = Vec::new();
        while let Some(entry) = canonical.entries.get(&self.next_index) {
            for command in &entry.commands {
                let (Some(request), Some(response)) = (&command.request, &command.response) else {
                    continue;
                };
                let (log_id, replay) = (entry.log_id, command.replay);
                if command.parts.is_empty() {
                    read.push(AppliedCommand { log_id, request, response, replay });
                    continue;
                }
                for (request, response) in &command.parts {
                    read.push(AppliedCommand { log_id, request, response, replay });
                }
            }
            self.next_index += 1;
        }
        read
    }
}

/// The log as applied, by index.
#[derive(Default)]
pub struct CanonicalLog {
    pub entries: BTreeMap<u64, CanonicalEntry>,
    /// The highest sequence number per client whose answer the state keeps, to tell replays
    /// apart: an answer that changed nothing is not kept, so its retry is applied afresh.
    last_seq: BTreeMap<u64, u64>,
}

impl CanonicalLog {
    fn insert(&mut self, applied: &AppliedEntry) {
        let mut commands = Vec::new();
        for command in &applied.commands {
            let request = decode_request(&command.request).ok();
            let response = decode_response(&command.response).ok();
            let stamp = request.as_ref().and_then(|request| request.client);
            let replay = stamp.is_some_and(|stamp| {
                self.last_seq.get(&stamp.client_id).is_some_and(|last| stamp.seq <= *last)
            });
            let kept = response.as_ref().is_some_and(|response| response.must_be_replayed());
            if let Some(stamp) = stamp.filter(|_| kept && !replay) {
                self.last_seq.insert(stamp.client_id, stamp.seq);
            }
            let parts = match (&request, &response) {
                (Some(request), Some(response)) => hand_off_parts(request, response),
                _ => Vec::new(),
            };
            commands.push(CanonicalCommand {
                parts,
                request,
                response,
                request_bytes: command.request.clone(),
                response_bytes: command.response.clone(),
                replay,
            });
        }
        let entry = CanonicalEntry {
            log_id: applied.log_id,
            payload_hash: applied.payload_hash,
            commands,
            membership: applied.membership.clone(),
        };
        self.entries.insert(applied.log_id.index, entry);
    }
}

/// A `FinishedThenGetTask` answered `FinishedThenTask` as its parts, each in the same job
/// envelope (empty for any other command, or a hand-off refused or answered whole, as a
/// cancelled job answers it).
fn hand_off_parts(request: &Request, response: &Response) -> Vec<(Request, Response)> {
    let (job, command) = request.command.scoped();
    let (
        Command::FinishedThenGetTask { finished, trainer, pass },
        Response::FinishedThenTask { finished: answers, then },
    ) = (command, response)
    else {
        return Vec::new();
    };
    let part = |command: Command| {
        let command = match job {
            Some(job) => Command::InJob { job: job.clone(), command: Box::new(command) },
            None => command,
        };
        Request { command, ..request.clone() }
    };
    let reports = finished.iter().zip(answers).map(|(&(task_id, epoch), answer)| {
        (part(Command::TaskFinished { task_id, epoch }), answer.clone())
    });
    let ask = (part(Command::GetTask { trainer: *trainer, pass: *pass }), (**then).clone());
    reports.chain(std::iter::once(ask)).collect()
}

/// Keeps the canonical log and compares every apply against it.
#[derive(Default)]
pub struct StateMachineSafety {
    canonical: CanonicalLog,
}

impl StateMachineSafety {
    pub fn check(&mut self, applied: &[(u64, AppliedEntry)]) -> Result<(), Violation> {
        for (node, entry) in applied {
            let index = entry.log_id.index;
            let Some(canonical) = self.canonical.entries.get(&index) else {
                self.canonical.insert(entry);
                continue;
            };
            if canonical.log_id != entry.log_id || canonical.payload_hash != entry.payload_hash {
                return Err(Violation::new(
                    "state machine safety",
                    format!(
                        "node {node} applied {} at index {index}, where {} was applied before",
                        entry.log_id, canonical.log_id
                    ),
                ));
            }
            let responses = entry.commands.iter().map(|command| &command.response);
            let canonical_responses =
                canonical.commands.iter().map(|command| &command.response_bytes);
            if !responses.eq(canonical_responses) {
                return Err(Violation::new(
                    "state machine safety",
                    format!("node {node} answered entry {} differently", entry.log_id),
                ));
            }
        }
        Ok(())
    }

    /// The log as applied so far.
    pub fn canonical(&self) -> &CanonicalLog {
        &self.canonical
    }
}
