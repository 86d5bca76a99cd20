//! The clients' history: every write as invoke, then ok, fail (it certainly did not happen) or
//! info (outcome unknown, never assumed to have failed), and the acknowledged writes the
//! client-visible checker holds the cluster to.

use std::sync::{Arc, Mutex, MutexGuard};

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

/// What a client was told happened, which the applied log must show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fact {
    /// `task_id` was handed out with `epoch`.
    Dispatched { task_id: u64, epoch: u64 },
    /// A report on `task_id` at `epoch` was answered accepted (or stale).
    Reported { task_id: u64, epoch: u64, accepted: bool },
    /// `trainer` was registered.
    Registered { trainer: u64 },
    /// Slot `slot` was granted with `generation`.
    SlotGranted { slot: u32, generation: u64 },
    /// A checkpoint of slot `slot` at `step` was recorded under `generation`.
    CheckpointRecorded { slot: u32, generation: u64, step: u64 },
}

/// What a client of job `job` was told about its job's dataset (the dataset-answers checker
/// judges it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatasetEvent {
    pub job: String,
    pub client: u64,
    pub told: DatasetTold,
}

/// What a `DatasetEvent` is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatasetTold {
    /// A report of the job's dataset was answered: its task count, or a refusal (an answer
    /// from a master, not a failure to reach one).
    Reported { answer: Result<u64, String> },
    /// Task `task_id` was handed out covering `data`.
    Handed { task_id: u64, data: client::TaskData },
    /// An answer the client could not read.
    Malformed { reason: String },
}

/// A pserver was told it holds a slot of its job (granted by a claim, or confirmed by a
/// heartbeat), or found on its own clock that it may serve it.
#[derive(Clone, Debug)]
pub struct SlotEvent {
    /// The pserver's job: slot indices and generations are a job's own.
    pub job: String,
    pub slot: u32,
    pub generation: u64,
    /// Which simulated pserver.
    pub pserver: u64,
    /// When the claim or heartbeat was sent, and when its answer came (for `Serving`, both
    /// are when the pserver looked).
    pub invoked_ms: u64,
    pub answered_ms: u64,
    pub kind: SlotEventKind,
}

/// What a `SlotEvent` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotEventKind {
    /// A claim's grant.
    Granted,
    /// A heartbeat answered "held".
    Confirmed,
    /// The pserver's lease (production `HeldSlot`) held: it would have served requests.
    Serving,
}

/// A trainer pushed a gradient to a slot's holder (`data_plane.rs`).
#[derive(Clone, Debug)]
pub struct PushEvent {
    /// The trainer's job: slots are a job's own.
    pub job: String,
    pub trainer: u64,
    pub slot: u32,
    /// The generation the push was fenced with.
    pub generation: u64,
    /// The model restore the values it was computed on came from (the oldest its pull met).
    pub computed_on: u64,
    /// Applied: the model restore of the shard it changed. `None`: refused.
    pub landed_on: Option<u64>,
}

/// A rendezvous agent's write (`rendezvous_agents.rs`): asked, then answered (`Some`) or of
/// unknown outcome (`None`); the rendezvous-keys checker judges the answers.
#[derive(Clone, Debug)]
pub struct RendezvousEvent {
    pub agent: u64,
    pub run: String,
    pub key: String,
    pub write: client::RendezvousWrite,
    /// `None` when the write is asked; then `Some` of the answer, or of `None` when the
    /// outcome stays unknown.
    pub answer: Option<Option<client::RendezvousWritten>>,
}

/// A write the cluster acknowledged, and when.
#[derive(Clone, Debug)]
pub struct AckedWrite {
    pub client: u64,
    /// The client's job: task ids, trainer ids and slot generations are a job's own.
    pub job: String,
    pub time_ms: u64,
    pub fact: Fact,
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
    /// Calls invoked and not yet answered, with their invoke time.
    open: std::collections::BTreeMap<(u64, u64), u64>,
    /// Calls whose outcome stayed unknown (info), with their invoke time.
    unknown: Vec<(u64, u64, u64)>,
    slot_events: Vec<SlotEvent>,
    push_events: Vec<PushEvent>,
    dataset_events: Vec<DatasetEvent>,
    rendezvous_events: Vec<RendezvousEvent>,
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
        let mut state = self.state();
        match kind {
            OperationType::Invoke => {
                state.open.insert((client, seq), time_ms);
            }
            OperationType::Info => {
                let invoked = state.open.remove(&(client, seq)).unwrap_or(time_ms);
                state.unknown.push((client, seq, invoked));
            }
            OperationType::Ok | OperationType::Fail => {
                state.open.remove(&(client, seq));
            }
        }
        state.operations.push(Operation { time_ms, client, seq, kind, summary });
    }

    /// Call `seq` of `client` stopped waiting for its answer (the client crashed, or gave up
    /// at a bound of its own): its outcome stays unknown (info), but it is not one of the calls
    /// the masters must complete in time after the heal. Nothing if it was never invoked.
    pub fn abandon(&self, client: u64, seq: u64) {
        let time_ms = self.trace.now_ms();
        let mut state = self.state();
        if state.open.remove(&(client, seq)).is_none() {
            return;
        }
        let (kind, summary) = (OperationType::Info, "abandoned".to_string());
        self.trace.record(format!("client {client} seq {seq} {kind:?} {summary}"));
        state.operations.push(Operation { time_ms, client, seq, kind, summary });
    }

    /// Remembers an acknowledged write for the checker.
    pub fn acked(&self, write: AckedWrite) {
        self.state().unchecked_acks.push(write);
    }

    /// Remembers what a pserver was told of its slot.
    pub fn slot_event(&self, event: SlotEvent) {
        self.state().slot_events.push(event);
    }

    /// Remembers a push and what became of it.
    pub fn push_event(&self, event: PushEvent) {
        self.state().push_events.push(event);
    }

    /// Push events not yet handed to the checker.
    pub fn take_push_events(&self) -> Vec<PushEvent> {
        std::mem::take(&mut self.state().push_events)
    }

    /// Remembers what a client was told about its job's dataset.
    pub fn dataset_event(&self, event: DatasetEvent) {
        self.state().dataset_events.push(event);
    }

    /// Dataset events not yet handed to the checker.
    pub fn take_dataset_events(&self) -> Vec<DatasetEvent> {
        std::mem::take(&mut self.state().dataset_events)
    }

    /// Remembers a rendezvous agent's write, or its answer.
    pub fn rendezvous_event(&self, event: RendezvousEvent) {
        self.state().rendezvous_events.push(event);
    }

    /// Rendezvous events not yet handed to the checker.
    pub fn take_rendezvous_events(&self) -> Vec<RendezvousEvent> {
        std::mem::take(&mut self.state().rendezvous_events)
    }

    /// Slot events not yet handed to the checker.
    pub fn take_slot_events(&self) -> Vec<SlotEvent> {
        std::mem::take(&mut self.state().slot_events)
    }

    /// Acknowledged writes not yet handed to the checker.
    pub fn take_acked(&self) -> Vec<AckedWrite> {
        std::mem::take(&mut self.state().unchecked_acks)
    }

    /// A call invoked at or after `since_ms` that has not completed: still open after
    /// `bound_ms`, or ended with an unknown outcome. As (client, seq, invoke time).
    pub fn stuck_since(
        &self,
        since_ms: u64,
        now_ms: u64,
        bound_ms: u64,
    ) -> Option<(u64, u64, u64)> {
        let state = self.state();
        let open = state.open.iter().map(|((client, seq), invoked)| (*client, *seq, *invoked));
        let late = open.filter(|(_, _, invoked)| now_ms.saturating_sub(*invoked) > bound_ms);
        let unknown = state.unknown.iter().copied();
        late.chain(unknown).find(|(_, _, invoked)| *invoked >= since_ms)
    }

    /// Every operation so far.
    pub fn operations(&self) -> Vec<Operation> {
        self.state().operations.clone()
    }
}
