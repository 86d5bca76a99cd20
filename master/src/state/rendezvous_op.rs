//! What a client asks of one rendezvous run's keys and what it is answered: the operations of
//! torch's c10d `Store` and `RendezvousBackend` (set, compare-and-set by value as c10d stores
//! do and by version as the backend's tokens do, add, delete), with every bound they meet.

use serde::{Deserialize, Serialize};

/// The longest run id (torchrun's `--rdzv-id`), in bytes.
pub const RUN_ID_BYTES_MAX: usize = 128;
/// The longest key, in bytes.
pub const KEY_BYTES_MAX: usize = 512;
/// The largest value, in bytes: torch's rendezvous state (base64) of about 200 agents. A
/// compare-and-set carries two, and the whole command must fit one request.
pub const VALUE_BYTES_MAX: usize = 30 << 10;
/// What a request adds around an operation's run id, key and values (stamp, clock, term,
/// variant tags, lengths), with room to spare.
const REQUEST_OVERHEAD_BYTES_MAX: usize = 256;
const _: () = assert!(
    RUN_ID_BYTES_MAX + KEY_BYTES_MAX + 2 * VALUE_BYTES_MAX + REQUEST_OVERHEAD_BYTES_MAX
        <= super::codec::REQUEST_BYTES_MAX as usize,
    "the largest rendezvous operation must fit one request"
);
/// The most keys one run holds.
pub const KEYS_PER_RUN_MAX: usize = 2_048;
/// The most key and value bytes one run holds, together.
pub const RUN_BYTES_MAX: u64 = 256 << 10;
/// The most runs the group holds at once.
pub const RUN_COUNT_MAX: usize = 64;
/// The most clients one run remembers answers for (torchrun agents: one client each).
pub const RUN_SESSION_COUNT_MAX: usize = 256;

/// One operation on one run's keys.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum RendezvousOp {
    /// `key = value`.
    Set { key: String, value: Vec<u8> },
    /// c10d's `compare_set`: `value` replaces the key's value if it equals `expected`, or if
    /// the key is absent and `expected` is empty; answered with the value after.
    CompareSet { key: String, expected: Vec<u8>, value: Vec<u8> },
    /// The rendezvous backend's write: `value` replaces the key's value if its version is
    /// `version` (0: only if the key is absent).
    CompareVersion { key: String, version: u64, value: Vec<u8> },
    /// c10d's `add`: the key's value, a decimal integer (0 when absent), plus `delta`.
    Add { key: String, delta: i64 },
    /// Removes the key.
    Delete { key: String },
}

impl RendezvousOp {
    /// The key the operation writes.
    pub fn key(&self) -> &str {
        match self {
            RendezvousOp::Set { key, .. }
            | RendezvousOp::CompareSet { key, .. }
            | RendezvousOp::CompareVersion { key, .. }
            | RendezvousOp::Add { key, .. }
            | RendezvousOp::Delete { key } => key,
        }
    }

    /// The value the operation may store, if it stores one given by the client.
    pub(crate) fn value(&self) -> Option<&[u8]> {
        match self {
            RendezvousOp::Set { value, .. }
            | RendezvousOp::CompareSet { value, .. }
            | RendezvousOp::CompareVersion { value, .. } => Some(value),
            RendezvousOp::Add { .. } | RendezvousOp::Delete { .. } => None,
        }
    }
}

/// A key's value and the version it was written at (versions grow within a run, from 1).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct RendezvousEntry {
    pub value: Vec<u8>,
    pub version: u64,
}

/// The answer to a [`RendezvousOp`]. What a session keeps leaves the value out (a replay reads
/// the key's value now): thousands of kept answers cannot hold megabytes of values.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum RendezvousReply {
    /// The key holds `entry` after the operation (`None`: absent); `set` says whether this
    /// operation wrote it.
    Written { entry: Option<RendezvousEntry>, set: bool },
    /// `add`'s sum.
    Added { value: i64, version: u64 },
    /// Whether the deleted key existed.
    Deleted { existed: bool },
}

impl RendezvousReply {
    /// The answer as a session keeps it: a written entry's version without its value.
    pub(crate) fn without_value(&self) -> Self {
        match self {
            RendezvousReply::Written { entry, set } => RendezvousReply::Written {
                entry: entry
                    .as_ref()
                    .map(|entry| RendezvousEntry { value: Vec::new(), version: entry.version }),
                set: *set,
            },
            other => other.clone(),
        }
    }
}

/// Why a run refused an operation; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RendezvousRefusal {
    #[error("the run id must be 1 to {RUN_ID_BYTES_MAX} bytes without control characters (got {bytes} bytes)")]
    BadRunId { bytes: usize },
    #[error("a key must be 1 to {KEY_BYTES_MAX} bytes (got {bytes} bytes)")]
    BadKey { bytes: usize },
    #[error("a value must be at most {VALUE_BYTES_MAX} bytes (got {bytes} bytes)")]
    ValueTooLarge { bytes: usize },
    #[error("run {run:?} holds {keys} keys, the most a run holds ({KEYS_PER_RUN_MAX})")]
    TooManyKeys { run: String, keys: usize },
    #[error("run {run:?} would hold {bytes} bytes of keys and values, over the most a run holds ({RUN_BYTES_MAX})")]
    RunFull { run: String, bytes: u64 },
    #[error("the group holds {RUN_COUNT_MAX} rendezvous runs, the most it holds; delete one (`raftrain rendezvous delete RUN`) or wait until an idle one expires")]
    TooManyRuns,
    #[error("key {key:?} holds {value:?}, not a decimal integer, so add cannot count on it")]
    NotAnInteger { key: String, value: String },
    #[error("add on key {key:?} overflows a 64-bit integer")]
    Overflow { key: String },
}

/// Checks a run id: what every operation on the run checks first.
pub fn check_run_id(run: &str) -> Result<(), RendezvousRefusal> {
    let bad = run.is_empty() || run.len() > RUN_ID_BYTES_MAX || run.chars().any(char::is_control);
    if bad {
        return Err(RendezvousRefusal::BadRunId { bytes: run.len() });
    }
    Ok(())
}

/// Checks an operation's own sizes, before the run is looked at.
pub(crate) fn check_op(op: &RendezvousOp) -> Result<(), RendezvousRefusal> {
    let key = op.key();
    if key.is_empty() || key.len() > KEY_BYTES_MAX {
        return Err(RendezvousRefusal::BadKey { bytes: key.len() });
    }
    match op.value() {
        Some(value) if value.len() > VALUE_BYTES_MAX => {
            Err(RendezvousRefusal::ValueTooLarge { bytes: value.len() })
        }
        _ => Ok(()),
    }
}
