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
//!   A dataset is of one of two kinds: RecordIO chunks (`chunk_list`, reported in batches by
//!   `dataset_loading`) or an index range (`index_range`, reported whole by `index_report`).
//! - `trainer_registry`, `pserver_slots`, `eval`, `sessions`: the other replicated registries;
//!   `members`: which trainer or slot a stamped request's client is bound to.
//! - `snapshot_layout`: the snapshot's layouts (the current one is marked and versioned;
//!   older ones are still read and converted, `snapshot_legacy_*`).
//! - `status`: the views `status()` returns. `invariant`: the safety rules the tests, the
//!   simulator and snapshot restore check.
//!
//! Choices worth knowing:
//! - A lost trainer's pending tasks go back to todo without counting a failure: the trainer
//!   died, the task did nothing wrong. Only failures and timeouts count against
//!   `max_task_failures`, and the count restarts with each pass.
//! - A trainer's own fault is not the data's: a `Local` failure (the trainer could not read
//!   the data) returns the task to todo without counting while another registered trainer has
//!   not failed it; a `Content` failure counts once per distinct trainer, and every time once
//!   no other registered trainer is left to try (`failers`).
//! - The pass advances whenever todo and pending drain, including when the last task moves to
//!   `failed` (PaddlePaddle's Go master hung there). If nothing would run in the next pass
//!   (every task failed and the policy keeps failed tasks out) the job finishes instead.
//! - The state's clock is the largest `now_ms` applied, so a new leader with a slower clock
//!   cannot move deadlines or session ages backwards. Leaders stamp the state's clock plus
//!   their own monotonic time since they took over (`master/src/leader_clock.rs`), not their
//!   wall clock, so a leader whose clock is hours off cannot move it.
//! - Exactly-once replies last as long as the client's session. Sessions come in two pools
//!   (`sessions.rs`, `members.rs`): the client that registered a trainer or claimed a slot is
//!   bound to it and always has a session while the member lives; every other client is a
//!   stranger, in a pool of its own: a stranger idle for an hour (state clock) is forgotten,
//!   one used within the last five minutes (longer than any client retries) is never
//!   evicted, and a new stranger is told to try again later rather than evict it. Only
//!   answers that changed the state take a session. A session keeps a digest of its request,
//!   and a stamp reused with another body is refused (`StampReused`), never answered with the
//!   first request's reply.
//! - Leader decisions carry the term they were computed in and are applied only if committed
//!   in that term (`Response::WrongTerm` otherwise).
//! - Pserver slot ownership is fenced by generations (`pserver_slots.rs`).
//! - Everything is bounded so the largest admitted state fits a snapshot: chunk paths are
//!   stored once per file (`chunk_list.rs`), failure reasons share one budget, sessions keep
//!   answers without task chunks (see `limits` in the tests). Either kind of job has at most
//!   `TASK_COUNT_MAX` tasks; an index job stores two numbers for its data.
//! - What a task covers is derived from its id and the immutable dataset, never stored per
//!   task or per answer: a RecordIO task's chunks, an index task's range
//!   `[id * shard_size, min(size, (id + 1) * shard_size))`.

mod chunk_list;
mod codec;
mod command;
mod dataset;
mod dataset_limits;
mod dataset_loading;
mod eval;
mod failers;
mod feature_level;
mod group_invariant;
mod group_limits;
#[cfg(test)]
mod hand_off_tests;
mod index_range;
mod index_report;
mod invariant;
mod job;
mod job_commands;
mod job_lifecycle;
mod job_restart;
mod job_state;
mod limits;
mod master_state;
mod members;
mod model_checkpoints;
mod model_restore;
mod progress;
mod pserver_slots;
mod queue_restore;
mod release_checks;
mod rendezvous_op;
mod rendezvous_run;
mod rendezvous_space;
#[cfg(test)]
mod rendezvous_tests;
mod repeated_report;
mod request;
mod response;
mod routing;
mod sessions;
#[cfg(test)]
mod shuffled_passes;
mod snapshot_layout;
mod snapshot_legacy_dataset;
mod snapshot_legacy_levelless;
mod snapshot_legacy_progress;
mod snapshot_legacy_single_job;
mod snapshot_legacy_slots;
mod snapshot_legacy_tags;
mod snapshot_legacy_unshuffled;
mod status;
mod task;
mod task_queue;
mod trainer_registry;
mod violation;

pub use chunk_list::{ChunkList, ChunkSpan};
pub use client::Fault;
pub use client::{SlotSecret, SLOT_SECRET_BYTES};
pub use codec::{DecodeError, REQUEST_BYTES_MAX, SNAPSHOT_BYTES_MAX};
pub use command::{Command, JobRef};
pub use dataset::{
    chunks_digest, ChunkRef, QueuePolicy, CHUNKS_PER_TASK_MAX, CHUNK_COUNT_MAX,
    CHUNK_PATH_BYTES_MAX, DATASET_PATH_BYTES_MAX, JOB_NAME_BYTES_MAX, TASK_COUNT_MAX,
};
pub use dataset_loading::LOADING_IDLE_MS_MAX;
pub use eval::EvalRecord;
pub use failers::FAILERS_COUNT_MAX;
pub use feature_level::{Unappliable, BASE_FEATURE_LEVEL, FEATURE_LEVEL};
pub use job_lifecycle::JobEnd;
pub use job_state::JobState;
pub use job_state::{FAILED_TASKS_SHOWN_MAX, TIMED_OUT_REASON};
pub use master_state::{MasterState, JOB_COUNT_MAX};
pub use model_checkpoints::MODEL_TAGS_KEPT;
pub use progress::PROGRESS_CHECKPOINTS_KEPT;
pub use pserver_slots::check_addr as check_pserver_addr;
pub use pserver_slots::{
    check_checkpoint_path, CheckpointMeta, SlotHolder, CHECKPOINT_PATH_BYTES_MAX,
    PSERVER_ADDR_BYTES_MAX, PSERVER_COUNT_MAX,
};
pub use rendezvous_op::{
    check_run_id, RendezvousEntry, RendezvousOp, RendezvousRefusal, RendezvousReply,
    KEYS_PER_RUN_MAX, KEY_BYTES_MAX, RUN_BYTES_MAX, RUN_COUNT_MAX, RUN_ID_BYTES_MAX,
    RUN_SESSION_COUNT_MAX, VALUE_BYTES_MAX,
};
pub use rendezvous_space::{RendezvousRunView, RendezvousSpace};
pub use repeated_report::{AcceptedReport, ReportedFile};
pub use request::{decode_request, encode_request, ClientStamp, Request};
pub use response::{decode_response, encode_response, Response, TaskAssignment};
pub use sessions::{
    MEMBER_SESSION_COUNT_MAX, SESSION_COUNT_MAX, SESSION_IDLE_MS_MAX, SESSION_RETRY_MS_MAX,
    STRANGER_SESSION_COUNT_MAX,
};
pub use status::{DatasetKindView, FailedTaskView, PServerSlotView, StatusView, TrainerView};
pub use task_queue::{
    truncate as truncate_reason, FAILURE_REASONS_BYTES_MAX, FAILURE_REASON_BYTES_MAX,
};
pub use trainer_registry::{TRAINER_COUNT_MAX, TRAINER_NAME_BYTES_MAX};
pub use violation::InvariantViolation;
