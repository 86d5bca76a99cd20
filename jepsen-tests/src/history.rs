//! The history of a run, Jepsen style: every client operation as an `Invoke` and its
//! completion (`Ok`, `Fail`, or `Info` when the outcome is unknown: it may still have taken
//! effect and is never assumed not to have), plus the nemesis's faults and the pservers'
//! observed slots, in one ordered list. Serialised as JSON for the report.

use std::sync::Mutex;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// How an operation event ended (or that it began).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    Invoke,
    Ok,
    Fail,
    Info,
}

/// Whether a nemesis event starts or heals a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Start,
    Stop,
}

/// What an operation asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "kebab-case")]
pub enum Operation {
    Register,
    GetTask {
        trainer: u64,
        pass: u32,
    },
    TaskFinished {
        trainer: u64,
        #[serde(rename = "id")]
        task_id: u64,
        epoch: u64,
    },
    TaskFailed {
        trainer: u64,
        #[serde(rename = "id")]
        task_id: u64,
        epoch: u64,
    },
    /// A linearizable status read (through the leader).
    Status,
    /// One master's own applied state: (index, digest).
    Digest {
        master: u64,
    },
    /// A pserver's own status: which slot and generation it serves.
    PserverStatus {
        pserver: u64,
    },
    Nemesis {
        fault: String,
        targets: Vec<u64>,
        phase: Phase,
    },
    /// A supervised process (`master-1`, `pserver-0`, `trainer-2`) exited; the value says how
    /// and whether the harness caused it. Recorded under [`SUPERVISOR_PROCESS`], never invoked.
    ProcessExit {
        name: String,
    },
    /// A restarted master caught up with the group (`Ok`) or did not within the bound
    /// (`Info`); the value holds how long it took.
    Rejoin {
        master: u64,
    },
    /// Adds 1 to the rendezvous run's shared counter key (stamped: exactly once).
    RendezvousAdd,
    /// Writes `write` (naming the client and its sequence) to the shared state key if the
    /// key's version is `base` (0: absent); `stale` when `base` is older than the version the
    /// client last read, on purpose.
    RendezvousCompareVersion {
        base: u64,
        write: String,
        stale: bool,
    },
    /// A linearizable read of the counter and state keys.
    RendezvousRead,
    /// One step of the membership nemesis on `master` (id): `remove` it, `rejoin` it with an
    /// empty data directory until it is a voter again, `stop` (it exits once removed),
    /// `kill-leader` in the middle of a change, `kill-learner` during its catch-up. Recorded
    /// under [`MEMBERSHIP_PROCESS`]: `Ok`, `Info` (an answer lost to a fault: the change may
    /// or may not have happened), or `Fail` (the group broke a promise: the checker's finding).
    MemberChange {
        step: String,
        master: u64,
    },
    /// The members as the leader lists them (`raftrain member list`), read once after the run.
    Members,
}

/// What an operation returned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Value {
    #[default]
    None,
    Trainer {
        id: u64,
    },
    Task {
        #[serde(rename = "id")]
        task_id: u64,
        epoch: u64,
        pass: u32,
    },
    /// `get_task` had nothing: the pass to ask next and why.
    NoTask {
        reason: String,
        current_pass: u32,
    },
    /// A report's verdict: `false` when fenced off (a stale epoch).
    Accepted {
        accepted: bool,
    },
    Status(StatusSnapshot),
    Digest {
        applied_index: u64,
        digest: u64,
    },
    /// A pserver of `job` (empty: the only job) serving `slot` under `generation` (or not
    /// serving: `serving: false`). Slots and generations are a job's own.
    Slot {
        #[serde(default)]
        job: String,
        slot: u32,
        generation: u64,
        serving: bool,
    },
    Error {
        message: String,
    },
    /// How a process exited.
    Exit(crate::supervisor::ProcessExit),
    /// How a fault was injected, where there is more than one way.
    Note {
        note: String,
    },
    /// How long something took.
    Elapsed {
        elapsed_ms: u64,
    },
    /// A rendezvous add's sum and the version it wrote.
    RdzvAdded {
        count: i64,
        version: u64,
    },
    /// A compare-by-version's verdict and the state key after it.
    RdzvWritten {
        set: bool,
        state: KeyEntry,
    },
    /// The counter and state keys as one read found them.
    RdzvKeys {
        counter: KeyEntry,
        state: KeyEntry,
    },
    /// How a membership step ended and how long it took.
    Changed {
        elapsed_ms: u64,
        outcome: String,
    },
    /// The voters and learners (ids) a member list showed, and whether a change was half
    /// done (a joint configuration).
    Members {
        leader: u64,
        voters: Vec<u64>,
        learners: Vec<u64>,
        joint: bool,
    },
}

/// A rendezvous key's value (lossy UTF-8) and version; version 0: the key is absent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyEntry {
    pub value: String,
    pub version: u64,
}

/// The queue counts a status read returned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusSnapshot {
    pub term: u64,
    pub applied_index: u64,
    pub pass: u32,
    pub todo: u64,
    pub pending: u64,
    pub done: u64,
    pub failed: u64,
    pub task_count: u64,
    pub dispatched: u64,
}

/// One event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    pub index: usize,
    /// The logical client (a retired one's id is never reused); nemesis events use
    /// [`NEMESIS_PROCESS`].
    pub process: u64,
    pub kind: OpKind,
    #[serde(flatten)]
    pub f: Operation,
    #[serde(default)]
    pub value: Value,
    /// Milliseconds since the run began.
    pub time_ms: u64,
}

/// The process id of nemesis events.
pub const NEMESIS_PROCESS: u64 = u64::MAX;
/// The process id of process exits and rejoins, as the supervisor saw them.
pub const SUPERVISOR_PROCESS: u64 = u64::MAX - 4;
/// The process id of the rendezvous keys' final read, after the clients stopped.
pub const RENDEZVOUS_FINAL_PROCESS: u64 = u64::MAX - 5;
/// The process id of the membership nemesis's steps and of the final member list read.
pub const MEMBERSHIP_PROCESS: u64 = u64::MAX - 6;

/// The recorder the workload and nemesis write to, shared by every task of a run.
pub struct History {
    started: Instant,
    ops: Mutex<Vec<Op>>,
}

impl History {
    pub fn new() -> Self {
        Self { started: Instant::now(), ops: Mutex::new(Vec::new()) }
    }

    /// Milliseconds since the run began.
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Records an event; returns its index.
    pub fn record(&self, process: u64, kind: OpKind, f: Operation, value: Value) -> usize {
        let mut ops = self.ops.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let index = ops.len();
        ops.push(Op { index, process, kind, f, value, time_ms: self.now_ms() });
        index
    }

    /// Records `f`'s invocation, runs it, records its completion.
    pub async fn call<T>(
        &self,
        process: u64,
        f: Operation,
        run: impl std::future::Future<Output = (OpKind, Value, T)>,
    ) -> (OpKind, T) {
        self.record(process, OpKind::Invoke, f.clone(), Value::None);
        let (kind, value, result) = run.await;
        self.record(process, kind, f, value);
        (kind, result)
    }

    /// Every event so far.
    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

impl Default for History {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events round-trip through JSON in a flat, readable shape.
    #[test]
    fn ops_round_trip_through_json() {
        let history = History::new();
        let get = Operation::GetTask { trainer: 4, pass: 1 };
        history.record(1, OpKind::Invoke, get.clone(), Value::None);
        history.record(1, OpKind::Ok, get, Value::Task { task_id: 9, epoch: 2, pass: 1 });
        let nemesis = Operation::Nemesis {
            fault: "kill-leader".into(),
            targets: vec![2],
            phase: Phase::Start,
        };
        history.record(NEMESIS_PROCESS, OpKind::Info, nemesis, Value::None);
        let ops = history.ops();
        let json = serde_json::to_string(&ops).expect("serialise");
        assert!(json.contains(r#""f":"get-task","trainer":4"#), "{json}");
        let back: Vec<Op> = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, ops);
    }
}
