//! The clients' history: every write as invoke, then ok, fail (it certainly did not happen) or
//! info (outcome unknown, never assumed to have failed), and the acknowledged writes the
//! client-visible checker holds the cluster to.

use std::sync::{Arc, Mutex, MutexGuard};

use openraft::LogId;

use crate::trace::Trace;

/// How a write ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationType {
    Invoke,
    Ok,
    Fail,
    Info,
}

/// One line of the history.
#[derive(Clone, Debug)]
pub struct Operation {
    pub time_ms: u64,
    pub client: u64,
    pub seq: u64,
    pub kind: OperationType,
    /// The command, or the answer, for a person.
    pub summary: String,
}

/// A write the cluster acknowledged: the entry it is at, what was written and what was
/// answered.
#[derive(Clone, Debug)]
pub struct AckedWrite {
    pub client: u64,
    pub log_id: LogId<u64>,
    pub request: Vec<u8>,
    pub response: Vec<u8>,
}

/// The shared history. Cheap to clone.
#[derive(Clone)]
pub struct History {
    inner: Arc<Mutex<HistoryState>>,
    trace: Trace,
}

#[derive(Default)]
struct HistoryState {
    operations: Vec<Operation>,
    unchecked_acks: Vec<AckedWrite>,
}

impl History {
    /// An empty history writing its lines into `trace` as well.
    pub fn new(trace: Trace) -> Self {
        Self { inner: Arc::default(), trace }
    }

    fn state(&self) -> MutexGuard<'_, HistoryState> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends one operation.
    pub fn record(&self, client: u64, seq: u64, kind: OperationType, summary: String) {
        let time_ms = self.trace.now_ms();
        self.trace.record(format!("client {client} seq {seq} {kind:?} {summary}"));
        self.state().operations.push(Operation { time_ms, client, seq, kind, summary });
    }

    /// Remembers an acknowledged write for the checker.
    pub fn acked(&self, write: AckedWrite) {
        self.state().unchecked_acks.push(write);
    }

    /// Acknowledged writes not yet handed to the checker.
    pub fn take_acked(&self) -> Vec<AckedWrite> {
        std::mem::take(&mut self.state().unchecked_acks)
    }

    /// Every operation so far.
    pub fn operations(&self) -> Vec<Operation> {
        self.state().operations.clone()
    }
}
