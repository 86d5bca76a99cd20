//! Rendezvous keys: each run's keys, modelled by replaying the applied `Command::Rendezvous`
//! entries of the canonical log in order (with the runs' exactly-once sessions), must answer
//! what the model answers. Above all a `CompareVersion` answered `set: true` named the key's
//! version as of the moment it applied (torch's backend fences with it), and every write
//! takes the run's next version, so versions never repeat; a retried stamp is answered what
//! it was first answered and changes nothing. What the agents were told
//! (`rendezvous_agents.rs`) must be a write of the model at the version they were told, and
//! the counter the agents only add to holds at least the sum of the adds acknowledged and at
//! most the sum of the adds asked for.

use std::collections::{BTreeMap, BTreeSet};

use client::{RendezvousWrite, RendezvousWritten};
use master::state::{
    ClientStamp, Command, RendezvousEntry, RendezvousOp, RendezvousReply, Response,
};
use openraft::LogId;

use super::state_machine_safety::LogCursor;
use super::{CanonicalLog, Violation};
use crate::history::RendezvousEvent;

const INVARIANT: &str = "rendezvous keys";

/// One run as the model holds it.
struct RunModel {
    keys: BTreeMap<String, RendezvousEntry>,
    next_version: u64,
    /// Per client, its last applied stamp and what it was answered.
    sessions: BTreeMap<u64, (u64, RendezvousReply)>,
    /// The write that took each version: its key and operation.
    writes: BTreeMap<u64, (String, RendezvousOp)>,
}

impl RunModel {
    fn new() -> Self {
        Self {
            keys: BTreeMap::new(),
            next_version: 1,
            sessions: BTreeMap::new(),
            writes: BTreeMap::new(),
        }
    }

    /// What `op` answers applied afresh, applying it.
    fn apply(&mut self, op: &RendezvousOp) -> RendezvousReply {
        let key = op.key();
        let current = self.keys.get(key).cloned();
        match op {
            RendezvousOp::Set { value, .. } => self.write(op, value.clone()),
            RendezvousOp::CompareSet { expected, value, .. } => {
                let matches =
                    current.as_ref().map_or(expected.is_empty(), |entry| &entry.value == expected);
                match matches {
                    true => self.write(op, value.clone()),
                    false => RendezvousReply::Written { entry: current, set: false },
                }
            }
            RendezvousOp::CompareVersion { version, value, .. } => {
                match current.as_ref().map_or(0, |entry| entry.version) == *version {
                    true => self.write(op, value.clone()),
                    false => RendezvousReply::Written { entry: current, set: false },
                }
            }
            RendezvousOp::Add { delta, .. } => {
                let count = current.map_or(Some(0), |entry| count_of(&entry.value));
                let Some(sum) = count.and_then(|count| count.checked_add(*delta)) else {
                    // The state refuses it (not an integer, or an overflow): no reply to model.
                    return RendezvousReply::Deleted { existed: false };
                };
                match self.write(op, sum.to_string().into_bytes()) {
                    RendezvousReply::Written { entry: Some(entry), .. } => {
                        RendezvousReply::Added { value: sum, version: entry.version }
                    }
                    other => other,
                }
            }
            RendezvousOp::Delete { .. } => {
                RendezvousReply::Deleted { existed: self.keys.remove(key).is_some() }
            }
        }
    }

    fn write(&mut self, op: &RendezvousOp, value: Vec<u8>) -> RendezvousReply {
        let entry = RendezvousEntry { value, version: self.next_version };
        self.next_version += 1;
        self.writes.insert(entry.version, (op.key().to_string(), op.clone()));
        self.keys.insert(op.key().to_string(), entry.clone());
        RendezvousReply::Written { entry: Some(entry), set: true }
    }
}

/// The model of every run, how far the canonical log was read, and the counter's bounds.
#[derive(Default)]
pub struct RendezvousKeys {
    runs: BTreeMap<String, RunModel>,
    /// Runs removed at some point: versions restart in a run made again, so the agents'
    /// answers are not looked up in them.
    removed: BTreeSet<String>,
    cursor: LogCursor,
    /// Per run and counter key: the deltas of the adds acknowledged, and of all asked for.
    added: BTreeMap<(String, String), (i64, i64)>,
}

impl RendezvousKeys {
    pub fn check(
        &mut self,
        canonical: &CanonicalLog,
        events: &[RendezvousEvent],
    ) -> Result<(), Violation> {
        for applied in self.cursor.read(canonical) {
            let (request, response) = (applied.request, applied.response);
            match &request.command {
                Command::Rendezvous { run, op } => {
                    self.applied(applied.log_id, (run, op), request.client, response)?;
                }
                Command::RemoveRendezvous { run, .. } => {
                    if matches!(response, Response::RendezvousRemoved { existed: true }) {
                        self.runs.remove(run);
                        self.removed.insert(run.clone());
                    }
                }
                _ => {}
            }
        }
        for event in events {
            self.told(event)?;
        }
        self.counters_bounded()
    }

    /// One applied rendezvous command, against the model.
    fn applied(
        &mut self,
        log_id: LogId<u64>,
        (run, op): (&str, &RendezvousOp),
        stamp: Option<ClientStamp>,
        response: &Response,
    ) -> Result<(), Violation> {
        // Any other answer (a refusal, a stale or reused stamp, a full run) changed nothing.
        let Response::Rendezvous(reply) = response else { return Ok(()) };
        let is_new = !self.runs.contains_key(run);
        if is_new && matches!(op, RendezvousOp::Delete { .. }) {
            return Ok(());
        }
        let model = self.runs.entry(run.to_string()).or_insert_with(RunModel::new);
        let kept = stamp.and_then(|stamp| model.sessions.get(&stamp.client_id));
        if let (Some(stamp), Some((last_seq, first))) = (stamp, kept) {
            if stamp.seq <= *last_seq {
                return replayed(log_id, (run, op), (stamp, *last_seq), (first, reply));
            }
        }
        let expected = model.apply(op);
        if let Some(stamp) = stamp {
            model.sessions.insert(stamp.client_id, (stamp.seq, expected.clone()));
        }
        if is_new && model.keys.is_empty() {
            self.runs.remove(run);
        }
        if *reply == expected {
            return Ok(());
        }
        let what = match (op, reply) {
            (
                RendezvousOp::CompareVersion { version, .. },
                RendezvousReply::Written { set: true, .. },
            ) => format!(
                "a CompareVersion naming version {version} was answered set: true, but the \
                 key's version then was {}",
                current_version(&expected)
            ),
            _ => "the answer is not the model's".to_string(),
        };
        Err(Violation::new(
            INVARIANT,
            format!(
                "entry {log_id}, run {run:?} key {:?}: {what}: answered {}, the model answers \
                 {}",
                op.key(),
                brief(reply),
                brief(&expected)
            ),
        ))
    }

    /// What an agent was asked or told, against the model and the counter's bounds.
    fn told(&mut self, event: &RendezvousEvent) -> Result<(), Violation> {
        let counted = (event.run.clone(), event.key.clone());
        let RendezvousWrite::Add(delta) = event.write else {
            return match &event.answer {
                Some(Some(written)) => self.answer_applied(event, written),
                _ => Ok(()),
            };
        };
        let (acked, asked) = self.added.entry(counted).or_default();
        match &event.answer {
            None => *asked += delta,
            Some(Some(_)) => *acked += delta,
            Some(None) => {}
        }
        match &event.answer {
            Some(Some(written)) => self.answer_applied(event, written),
            _ => Ok(()),
        }
    }

    /// An answer an agent got that wrote: the model's write at the version told, of the same
    /// key and operation.
    fn answer_applied(
        &self,
        event: &RendezvousEvent,
        written: &RendezvousWritten,
    ) -> Result<(), Violation> {
        let Some(version) = written.entry.as_ref().map(|entry| entry.version) else {
            return Ok(());
        };
        let wrote = written.set || matches!(event.write, RendezvousWrite::Add(_));
        if !wrote || self.removed.contains(&event.run) {
            return Ok(());
        }
        let model = self.runs.get(&event.run).and_then(|run| run.writes.get(&version));
        let matches = model.is_some_and(|(key, op)| key == &event.key && same(op, &event.write));
        if matches {
            return Ok(());
        }
        Err(Violation::new(
            INVARIANT,
            format!(
                "agent {} was told its {:?} on {:?} of run {:?} wrote version {version}, but \
                 in the applied log version {version} is {model:?}",
                event.agent, event.write, event.key, event.run
            ),
        ))
    }

    /// Every counter holds at least the acknowledged adds and at most all adds asked for.
    fn counters_bounded(&self) -> Result<(), Violation> {
        for ((run, key), (acked, asked)) in &self.added {
            if self.removed.contains(run) {
                continue;
            }
            let entry = self.runs.get(run).and_then(|model| model.keys.get(key));
            let count = entry.map_or(Some(0), |entry| count_of(&entry.value));
            if count.is_some_and(|count| *acked <= count && count <= *asked) {
                continue;
            }
            return Err(Violation::new(
                INVARIANT,
                format!(
                    "counter {key:?} of run {run:?} holds {count:?}, but the adds acknowledged \
                     sum to {acked} and all asked for to {asked}"
                ),
            ));
        }
        Ok(())
    }
}

/// A retried stamp: the state keeps its first answer and changes nothing; an add or a write
/// must be answered what it first was (its version; a compare's refusal may show the key now).
fn replayed(
    log_id: LogId<u64>,
    (run, op): (&str, &RendezvousOp),
    (stamp, last_seq): (ClientStamp, u64),
    (first, reply): (&RendezvousReply, &RendezvousReply),
) -> Result<(), Violation> {
    let same = match (first, reply) {
        (RendezvousReply::Written { set: true, .. }, RendezvousReply::Written { set, .. }) => {
            *set && current_version(first) == current_version(reply)
        }
        (RendezvousReply::Written { set: false, .. }, _) => true,
        _ => first == reply,
    };
    if stamp.seq < last_seq || same {
        return Ok(());
    }
    Err(Violation::new(
        INVARIANT,
        format!(
            "entry {log_id}, run {run:?} key {:?}: client {} retried stamp {} and was answered \
             {}, first answered {}",
            op.key(),
            stamp.client_id,
            stamp.seq,
            brief(reply),
            brief(first)
        ),
    ))
}

/// A reply without its value, for a person.
fn brief(reply: &RendezvousReply) -> String {
    match reply {
        RendezvousReply::Written { set, .. } => {
            format!("set: {set} at version {}", current_version(reply))
        }
        other => format!("{other:?}"),
    }
}

/// The version a written reply shows (0: the key is absent).
fn current_version(reply: &RendezvousReply) -> u64 {
    match reply {
        RendezvousReply::Written { entry, .. } => entry.as_ref().map_or(0, |entry| entry.version),
        RendezvousReply::Added { version, .. } => *version,
        RendezvousReply::Deleted { .. } => 0,
    }
}

/// Whether `op`, as applied, is the agent's `write`.
fn same(op: &RendezvousOp, write: &RendezvousWrite) -> bool {
    match (op, write) {
        (RendezvousOp::Set { value, .. }, RendezvousWrite::Set(asked)) => value == asked,
        (
            RendezvousOp::CompareVersion { version, value, .. },
            RendezvousWrite::CompareVersion { version: asked, value: asked_value },
        ) => version == asked && value == asked_value,
        (RendezvousOp::Add { delta, .. }, RendezvousWrite::Add(asked)) => delta == asked,
        (
            RendezvousOp::CompareSet { expected, value, .. },
            RendezvousWrite::CompareSet { expected: asked, value: asked_value },
        ) => expected == asked && value == asked_value,
        _ => false,
    }
}

/// The count a key holds for `add`.
fn count_of(value: &[u8]) -> Option<i64> {
    std::str::from_utf8(value).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use master::state::{encode_request, encode_response, MasterState, Request};
    use openraft::CommittedLeaderId;

    use super::*;
    use crate::checker::StateMachineSafety;
    use crate::observer::{AppliedCommand, AppliedEntry};

    const KEY: &str = "rdzv/state";

    fn request(client_id: u64, seq: u64, op: RendezvousOp) -> Request {
        let command = Command::Rendezvous { run: "run".to_string(), op };
        Request { client: Some(ClientStamp { client_id, seq }), now_ms: 1, term: None, command }
    }

    fn by_version(version: u64) -> RendezvousOp {
        RendezvousOp::CompareVersion { key: KEY.to_string(), version, value: vec![version as u8] }
    }

    fn add(delta: i64) -> RendezvousOp {
        RendezvousOp::Add { key: "counter".to_string(), delta }
    }

    /// Feeds `requests` as one entry each to the checker, answered by a real state machine
    /// (or, for `Some`, by the answer given).
    fn check(requests: Vec<(Request, Option<Response>)>) -> Result<(), Violation> {
        let mut state = MasterState::new();
        let mut safety = StateMachineSafety::default();
        let mut keys = RendezvousKeys::default();
        for (index, (request, forged)) in (0..).zip(requests) {
            let answered = state.apply_in_term(&request, 1);
            let response = forged.unwrap_or(answered);
            let command = AppliedCommand {
                request: encode_request(&request),
                response: encode_response(&response),
            };
            let log_id = LogId::new(CommittedLeaderId::new(1, 1), index);
            let commands = vec![command];
            let entry = AppliedEntry { log_id, payload_hash: index, commands, membership: None };
            safety.check(&[(1, entry)]).map_err(|violation| panic!("{violation}"))?;
            keys.check(safety.canonical(), &[])?;
        }
        Ok(())
    }

    fn written(version: u64, set: bool) -> Option<Response> {
        let entry = Some(RendezvousEntry { value: vec![0], version });
        Some(Response::Rendezvous(RendezvousReply::Written { entry, set }))
    }

    /// Racing compares by version, adds and a retried stamp, as the state machine answers
    /// them, agree with the model.
    #[test]
    fn the_state_machines_answers_pass() {
        let requests = vec![
            (request(1, 1, by_version(0)), None),
            (request(2, 1, add(3)), None),
            (request(1, 1, by_version(0)), None),
            (request(2, 2, by_version(0)), None),
            (request(2, 3, by_version(1)), None),
            (request(2, 4, add(2)), None),
        ];
        check(requests).expect("the state machine's answers are the model's");
    }

    /// A compare naming the version before the key's current one, answered as written.
    #[test]
    fn a_compare_by_a_stale_version_that_wrote_is_caught() {
        let requests = vec![
            (request(1, 1, by_version(0)), None),
            (request(2, 1, by_version(1)), None),
            (request(3, 1, by_version(1)), written(3, true)),
        ];
        let violation = check(requests).expect_err("a stale compare wrote");
        assert!(violation.detail.contains("naming version 1"), "{violation}");
        assert!(violation.detail.contains("version then was 2"), "{violation}");
    }

    /// A retried add answered with a second sum: counted twice.
    #[test]
    fn a_retried_add_counted_twice_is_caught() {
        let twice = Some(Response::Rendezvous(RendezvousReply::Added { value: 6, version: 2 }));
        let requests = vec![(request(2, 1, add(3)), None), (request(2, 1, add(3)), twice)];
        let violation = check(requests).expect_err("a retry counted twice");
        assert!(violation.detail.contains("retried stamp 1"), "{violation}");
    }

    /// A write that reuses a version already taken.
    #[test]
    fn a_repeated_version_is_caught() {
        let requests =
            vec![(request(1, 1, by_version(0)), None), (request(2, 1, add(1)), written(1, true))];
        assert!(check(requests).is_err(), "version 1 was taken twice");
    }
}
