//! The replicated task queue as a pure state machine: `MasterState::apply(request) -> response`.
//!
//! Every master replica applies the same committed requests in the same order and must reach
//! byte-identical states, so this module is a closed world.
//!
//! Architecture Invariant: nothing under `state` reads the clock, draws randomness, does I/O,
//! iterates a `HashMap` or depends on tokio, tonic, openraft or sled. Time enters only as the
//! `now_ms` the leader stamps into each [`Request`]; collections are `Vec`, `VecDeque` and
//! `BTreeMap`/`BTreeSet`, whose order is part of the state.
//!
//! Architecture Invariant: the one bincode configuration lives in `codec`; requests, responses
//! and snapshots are all encoded through it.

mod codec;
mod command;
mod dataset;
mod eval;
mod invariant;
mod job;
mod master_state;
mod pserver_slots;
mod request;
mod response;
mod sessions;
mod status;
mod task;
mod task_queue;
mod trainer_registry;

pub use codec::{DecodeError, REQUEST_BYTES_MAX, SNAPSHOT_BYTES_MAX};
pub use command::Command;
pub use dataset::{
    ChunkRef, QueuePolicy, CHUNK_COUNT_MAX, CHUNK_PATH_BYTES_MAX, JOB_NAME_BYTES_MAX,
};
pub use eval::EvalRecord;
pub use invariant::InvariantViolation;
pub use master_state::{MasterState, FAILURE_REASON_BYTES_MAX, TIMED_OUT_REASON};
pub use pserver_slots::{CheckpointMeta, PSERVER_ADDR_BYTES_MAX, PSERVER_COUNT_MAX};
pub use request::{decode_request, encode_request, ClientStamp, Request};
pub use response::{decode_response, encode_response, Response, TaskAssignment};
pub use sessions::{SESSION_COUNT_MAX, SESSION_IDLE_MS_MAX};
pub use status::{FailedTaskView, PServerSlotView, StatusView, TrainerView};
pub use trainer_registry::{TRAINER_COUNT_MAX, TRAINER_NAME_BYTES_MAX};
