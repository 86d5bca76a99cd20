//! The rendezvous key space: torchrun's `RendezvousBackend` state and c10d `Store` keys, per
//! run, replicated like every other state. Every dimension is bounded (`rendezvous_op.rs`): a
//! client can fill its own run and nothing else; a run nobody wrote to for the leader's idle
//! time is removed by the leader (`Command::RemoveRendezvous`, only if untouched since).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::command::Command;
use super::rendezvous_op::{
    check_op, check_run_id, RendezvousEntry, RendezvousOp, RendezvousRefusal, RendezvousReply,
    RUN_COUNT_MAX,
};
use super::rendezvous_run::RendezvousRun;
use super::request::{ClientStamp, Envelope};
use super::response::Response;
use super::sessions::{request_digest, Lookup};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RendezvousSpace {
    pub(crate) runs: BTreeMap<String, RendezvousRun>,
}

impl RendezvousSpace {
    /// Applies a client's operation on run `run` (made by its first write), exactly once per
    /// stamp.
    pub(crate) fn apply(
        &mut self,
        run: &str,
        op: &RendezvousOp,
        request: Envelope<'_>,
    ) -> Response {
        if let Err(refusal) = check_run_id(run).and_then(|()| check_op(op)) {
            return Response::Rejected { reason: refusal.to_string() };
        }
        let now_ms = request.now_ms;
        let is_new = !self.runs.contains_key(run);
        if is_new && matches!(op, RendezvousOp::Delete { .. }) {
            return Response::Rendezvous(RendezvousReply::Deleted { existed: false });
        }
        if is_new && self.runs.len() >= RUN_COUNT_MAX {
            return full(RendezvousRefusal::TooManyRuns);
        }
        let state = self.runs.entry(run.to_string()).or_insert_with(|| RendezvousRun::new(now_ms));
        let response = match request.client {
            Some(stamp) => stamped(state, run, op, (stamp, request.command), now_ms),
            None => answer(state.apply(run, op, now_ms)),
        };
        // A run is made by a write that wrote: a refused or empty first operation leaves none
        // (its retry, applied again, writes nothing again).
        if is_new && self.runs.get(run).is_some_and(|state| state.keys.is_empty()) {
            self.runs.remove(run);
        }
        response
    }

    /// Removes run `run`: an operator's delete (`touched_ms` `None`), or the leader's expiry
    /// of a run untouched since `touched_ms` (kept if written to since).
    pub(crate) fn remove(&mut self, run: &str, touched_ms: Option<u64>) -> Response {
        let Some(state) = self.runs.get(run) else {
            return Response::RendezvousRemoved { existed: false };
        };
        if touched_ms.is_some_and(|touched_ms| touched_ms != state.touched_ms) {
            return Response::RendezvousRemoved { existed: false };
        }
        self.runs.remove(run);
        Response::RendezvousRemoved { existed: true }
    }

    /// Key `key` of run `run`, if both exist.
    pub(crate) fn entry(&self, run: &str, key: &str) -> Option<&RendezvousEntry> {
        self.runs.get(run)?.keys.get(key)
    }

    /// How many keys run `run` holds (0 for a run that does not exist).
    pub(crate) fn key_count(&self, run: &str) -> u64 {
        self.runs.get(run).map_or(0, |state| state.keys.len() as u64)
    }

    /// Every run, by id.
    pub(crate) fn views(&self) -> Vec<RendezvousRunView> {
        let view = |(run, state): (&String, &RendezvousRun)| RendezvousRunView {
            run: run.clone(),
            key_count: state.keys.len() as u64,
            bytes: state.bytes,
            touched_ms: state.touched_ms,
            summary: summary_of(state),
        };
        self.runs.iter().map(view).collect()
    }

    /// The runs nobody wrote to since `before_ms`, with when they were last written.
    pub(crate) fn idle_since(&self, before_ms: u64) -> Vec<(String, u64)> {
        let idle = |(run, state): (&String, &RendezvousRun)| {
            (state.touched_ms < before_ms).then(|| (run.clone(), state.touched_ms))
        };
        self.runs.iter().filter_map(idle).collect()
    }

    /// Whether every run is consistent and within the group's bounds.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.runs.len() > RUN_COUNT_MAX {
            return Err(format!("{} rendezvous runs, over {RUN_COUNT_MAX}", self.runs.len()));
        }
        for (run, state) in &self.runs {
            if check_run_id(run).is_err() || !state.is_consistent() {
                return Err(format!("rendezvous run {run:?} is inconsistent"));
            }
        }
        Ok(())
    }
}

impl RendezvousSpace {
    /// The rules about one step: within a run that stayed, versions only grow and a key's
    /// entry changes only to a version never issued before.
    pub(crate) fn check_transition(before: &Self, after: &Self) -> Result<(), String> {
        for (run, was) in &before.runs {
            let Some(now) = after.runs.get(run) else { continue };
            if now.next_version < was.next_version {
                return Err(format!("rendezvous run {run:?}: its next version went back"));
            }
            let rewritten = |(key, entry): (&String, &RendezvousEntry)| {
                let old = was.keys.get(key);
                old != Some(entry) && entry.version < was.next_version
            };
            if let Some((key, _)) = now.keys.iter().find(|pair| rewritten(*pair)) {
                return Err(format!(
                    "rendezvous run {run:?}: key {key:?} changed to an old version"
                ));
            }
        }
        Ok(())
    }
}

/// What `ListRendezvous` shows of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RendezvousRunView {
    pub run: String,
    pub key_count: u64,
    pub bytes: u64,
    pub touched_ms: u64,
    /// The value of `client::RENDEZVOUS_SUMMARY_KEY` if it is text of at most
    /// `client::RENDEZVOUS_SUMMARY_BYTES_MAX` bytes, else empty.
    pub summary: String,
}

/// The run's summary key as text, if it is short text.
fn summary_of(state: &RendezvousRun) -> String {
    let entry = state.keys.get(client::RENDEZVOUS_SUMMARY_KEY);
    let short = entry.filter(|entry| entry.value.len() <= client::RENDEZVOUS_SUMMARY_BYTES_MAX);
    short.and_then(|entry| std::str::from_utf8(&entry.value).ok()).unwrap_or_default().to_string()
}

/// A stamped operation: a retry gets the first answer (its value read again), a new sequence
/// number is applied and its answer kept.
fn stamped(
    state: &mut RendezvousRun,
    run: &str,
    op: &RendezvousOp,
    (stamp, command): (ClientStamp, &Command),
    now_ms: u64,
) -> Response {
    let digest = request_digest(command);
    match state.sessions.lookup(stamp, digest, false, now_ms) {
        Lookup::Replay(Response::Rendezvous(kept)) => Response::Rendezvous(state.refill(op, kept)),
        Lookup::Replay(other) => other,
        Lookup::Stale { last_seq } => Response::StaleRequest { last_seq },
        Lookup::StampReused => Response::StampReused { seq: stamp.seq },
        Lookup::Full { retry_after_ms } => Response::TryAgainLater { retry_after_ms },
        Lookup::Apply => {
            let response = answer(state.apply(run, op, now_ms));
            state.sessions.record(stamp, digest, &response, None, now_ms);
            response
        }
    }
}

fn answer(result: Result<RendezvousReply, RendezvousRefusal>) -> Response {
    match result {
        Ok(reply) => Response::Rendezvous(reply),
        Err(
            refusal @ (RendezvousRefusal::NotAnInteger { .. } | RendezvousRefusal::Overflow { .. }),
        ) => Response::Rejected { reason: refusal.to_string() },
        Err(refusal) => full(refusal),
    }
}

fn full(refusal: RendezvousRefusal) -> Response {
    Response::RendezvousFull { reason: refusal.to_string() }
}
