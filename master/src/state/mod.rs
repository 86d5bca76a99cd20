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
//!
//! Code map:
//! - `request`, `command`, `response`: the envelope, the commands and the answers, with their
//!   versioned wire forms (`encode_request`/`decode_request`, `encode_response`/...).
//! - `master_state`: [`MasterState`], `apply`, snapshots and the leader's read-only queries.
//! - `job` (dataset + queue, the task commands), `dataset`, `task_queue`, `task`: the queues.
//! - `trainer_registry`, `pserver_slots`, `eval`, `sessions`: the other replicated registries.
//! - `status`: the views `status()` returns. `invariant`: the safety rules the tests, the
//!   simulator and snapshot restore check.
//!
//! Choices worth knowing:
//! - A lost trainer's pending tasks go back to todo without counting a failure: the trainer
//!   died, the task did nothing wrong. Only failures and timeouts count against
//!   `max_task_failures`, and the count restarts with each pass.
//! - The pass advances whenever todo and pending drain, including when the last task moves to
//!   `failed` (PaddlePaddle's Go master hung there). If nothing would run in the next pass
//!   (every task failed and the policy keeps failed tasks out) the job finishes instead.
//! - The state's clock is the largest `now_ms` applied, so a new leader with a slower clock
//!   cannot move deadlines or session ages backwards.
//! - Exactly-once replies last as long as the client's session: idle sessions (by the state's
//!   clock) and the longest-idle ones beyond a count are forgotten when another reply is stored.

mod codec;
mod command;
mod dataset;
mod dataset_loading;
mod eval;
mod invariant;
mod job;
mod master_state;
mod pserver_slots;
mod repeated_report;
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
    chunks_digest, ChunkRef, QueuePolicy, CHUNKS_PER_TASK_MAX, CHUNK_COUNT_MAX,
    CHUNK_PATH_BYTES_MAX, JOB_NAME_BYTES_MAX,
};
pub use eval::EvalRecord;
pub use invariant::InvariantViolation;
pub use master_state::{MasterState, FAILURE_REASON_BYTES_MAX, TIMED_OUT_REASON};
pub use pserver_slots::{CheckpointMeta, PSERVER_ADDR_BYTES_MAX, PSERVER_COUNT_MAX};
pub use repeated_report::{AcceptedReport, ReportedFile};
pub use request::{decode_request, encode_request, ClientStamp, Request};
pub use response::{decode_response, encode_response, Response, TaskAssignment};
pub use sessions::{SESSION_COUNT_MAX, SESSION_IDLE_MS_MAX};
pub use status::{FailedTaskView, PServerSlotView, StatusView, TrainerView};
pub use trainer_registry::{TRAINER_COUNT_MAX, TRAINER_NAME_BYTES_MAX};
