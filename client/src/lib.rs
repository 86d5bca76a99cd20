//! The client of a raftrain master group: `MasterClient`, the typed API pservers, trainers,
//! tools and the Python package use to reach whichever master leads, and the values it hands
//! out. It links neither openraft nor sled: it speaks to the masters only over the wire.
//!
//! Code map: `master_client` is the machinery (leader discovery, redirects, retries with
//! jittered backoff inside a deadline or without one, one stamp per logical write; `retrying`
//! is one call's retry state; `discovery` asks members who leads); `typed_calls` is the API,
//! one method per RPC (`hand_off`: a task's finish and the next ask in one write); `types`, `fault`, `slot_secret` and `status` are the values it answers,
//! and `conversions` the only place that turns protobuf into them; `watch` follows the pserver
//! table across leader changes.

mod ask_gather;
mod ask_stream;
mod chunk_fault;
mod conversions;
mod discovery;
mod discovery_error;
mod error;
mod failure_reason;
mod fault;
mod hand_off;
mod job_calls;
mod job_name;
mod jobs;
mod known_members;
mod master_addr;
mod master_client;
mod members;
mod never_sent;
mod options;
mod pass_walker;
mod policy_bounds;
pub mod pserver;
mod rendezvous;
mod retrying;
mod session;
pub mod shuffle;
mod slot_asks;
mod slot_secret;
mod snapshot_save;
mod status;
mod status_conversions;
mod task_source;
mod typed_calls;
mod types;
mod waiting_log;
mod watch;

pub use ask_gather::{AskGather, Together};
pub use chunk_fault::chunk_fault;
pub use conversions::checkpoint_to_proto;
pub use error::{
    ClientError, REFUSAL_HAND_OFF_UNSUPPORTED, REFUSAL_JOB_CANCELLED, REFUSAL_METADATA_KEY,
    REFUSAL_NOT_HOLDER, REFUSAL_NO_SUCH_JOB, REFUSAL_SAVE_BUSY, REFUSAL_STALE_REQUEST,
    REFUSAL_STAMP_REUSED, REFUSAL_TRY_AGAIN_LATER, RETRY_AFTER_MS_METADATA_KEY,
};
pub use failure_reason::{cut_reason, FAILURE_REASON_BYTES_MAX};
pub use hand_off::{HandOff, ASKS_TOGETHER_MAX, FINISHED_PER_ASK_MAX};
pub use job_name::{check_job_name, require_job_name, SUBMITTED_JOB_NAME_BYTES_MAX};
pub use jobs::{
    JobDataset, JobList, JobPhase, JobSpec, JobSummary, PolicyOverrides, ProgressCheckpoint,
    RestoredProgress,
};
pub use master_addr::check_master_addr;
pub use master_client::{MasterClient, ServiceClient, LEADER_METADATA_KEY};
pub use members::{MemberChange, MemberRow, Membership, MEMBER_CHANGE_RPC_MS};
pub use never_sent::never_sent;
pub use options::{ClientOptions, Dialer, CALL_DEADLINE_MS_DEFAULT};
pub use pass_walker::{PassWalker, Step, Waiting, Walked, WALK_IDLE_DEFAULT};
pub use policy_bounds::{
    check_index_range, check_passes, check_policy, CHUNKS_PER_TASK_MAX, MAX_TASK_FAILURES_MAX,
    PASS_COUNT_MAX, TASK_TIMEOUT_MIN_MS_FLOOR, TASK_TIMEOUT_MIN_MS_MAX, TIMEOUT_FACTOR_MAX,
};
pub use rendezvous::{
    RendezvousEntry, RendezvousRound, RendezvousRun, RendezvousWrite, RendezvousWritten,
    RENDEZVOUS_SUMMARY_BYTES_MAX, RENDEZVOUS_SUMMARY_KEY, RENDEZVOUS_WAIT_MS_ROUND,
};
pub use session::Session;
pub use slot_asks::{SlotAsks, SlotReload};
pub use slot_secret::SLOT_SECRET_BYTES;
pub use snapshot_save::{
    SavedSnapshot, SNAPSHOT_CHUNK_BYTES_MAX, SNAPSHOT_SAVE_RPC_TIMEOUT_MS, SNAPSHOT_STATE_BYTES_MAX,
};
pub use status::{
    answered_feature_level, CheckpointStatus, DatasetKind, EvalStatus, FailedTask, GroupView,
    JobStatus, Member, PServerStatus, TrainerStatus,
};
pub use task_source::{HandOffSource, TaskSource};
pub use typed_calls::REPORT_RPC_TIMEOUT_MS;
pub use types::new_slot_secret;
pub use types::{
    CheckpointMeta, CheckpointRecorded, ChunkRef, DatasetSizes, Fault, PServerEntry, PServerTable,
    SlotHeartbeat, SlotLease, SlotSecret, Task, TaskData, TaskOutcome, TrainerHeartbeat,
    TrainerRegistration,
};
pub use watch::PServerWatch;
