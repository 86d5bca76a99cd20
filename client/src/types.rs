//! What `MasterClient`'s typed calls answer: plain Rust values, so pservers and trainers never
//! see protobuf. Conversions from the wire live in `conversions.rs`. `ChunkRef`,
//! `CheckpointMeta`, `Fault` and `SlotSecret` are also what the master's replicated state holds:
//! their serde form is inside every snapshot, so their fields never change order or type.

use serde::{Deserialize, Serialize};

pub use crate::fault::Fault;
pub use crate::slot_secret::SlotSecret;

/// One RecordIO chunk, located by the leader's scan of chunk headers.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ChunkRef {
    /// The RecordIO file holding the chunk.
    pub path: String,
    /// Where the chunk header starts in the file.
    pub offset: u64,
    /// The payload size from the header, so a reader can check it before reading.
    pub compressed_size: u32,
    /// The record count from the header, for progress and sanity checks.
    pub record_count: u32,
}

/// Where a slot's latest checkpoint file is and how to check it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CheckpointMeta {
    /// The checkpoint file, as the pserver wrote it.
    pub path: String,
    /// The pserver's update step at the checkpoint; a higher step is newer.
    pub step: u64,
    /// crc32 of the file, checked before restoring.
    pub crc32: u32,
    /// When the pserver wrote it (its clock), for people reading status.
    pub created_ms: u64,
}

/// A fresh claim secret: 128 bits from the OS's random source, told to nobody but the master.
pub fn new_slot_secret() -> SlotSecret {
    use rand::Rng as _;
    SlotSecret::from_bits(rand::rngs::OsRng.gen())
}

/// A trainer's registration: its id, and how often it must heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrainerRegistration {
    pub trainer_id: u64,
    pub lease_ms: u64,
}

/// A task to process; report back with its `task_id` and `epoch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    pub task_id: u64,
    pub epoch: u64,
    pub pass: u32,
    /// What the task covers: the job's dataset kind decides which.
    pub data: TaskData,
    /// When the master takes the task back (the state's clock; for display).
    pub deadline_ms: u64,
    /// The job's shuffle seed if it is shuffled: read the task's samples in the order
    /// [`crate::shuffle::sample_order`] gives for (seed, pass, task).
    pub shuffle_seed: Option<u64>,
}

/// What one task covers. An enum rather than a chunk list beside an optional range: a task
/// is one or the other, and a caller that trains one kind must say what it does with the
/// other (the Rust trainer refuses index ranges; the Python package reads them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskData {
    /// RecordIO chunks, read from the files the masters scanned.
    Chunks(Vec<ChunkRef>),
    /// The indices `start..end` of an index dataset (never empty; the last task of a job may
    /// be shorter than the others).
    IndexRange { start: u64, end: u64 },
}

/// The answer to `get_task`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskOutcome {
    Task(Task),
    /// The asked pass is over; move on to `current`.
    PassBefore {
        current: u32,
    },
    /// The asked pass has not begun; wait for `current` to end.
    PassAfter {
        current: u32,
    },
    /// Nothing to hand out now but tasks are pending elsewhere: ask again later.
    NoMoreAvailable,
    JobFinished,
    NoDataset,
    /// The master no longer knows this trainer: register again.
    UnknownTrainer,
    /// The job was cancelled: stop and exit 0.
    JobCancelled,
}

/// What a trainer's heartbeat learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrainerHeartbeat {
    /// Its lease was renewed.
    Known,
    /// The master no longer knows it: register again.
    Unknown,
    /// Its job was cancelled or removed: stop and exit 0.
    JobEnded,
}

/// What a pserver's heartbeat learned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotHeartbeat {
    /// The slot is still held under the lease's generation: keep serving, and do what the
    /// masters ask.
    Held(crate::SlotAsks),
    /// It is not: stop serving and exit.
    NotHeld,
    /// Its job was cancelled or removed: stop and exit 0.
    JobEnded,
}

/// A granted pserver slot: serve `slot`, and put `generation` and `secret` in every heartbeat
/// and checkpoint record (trainers put `generation`, never the secret, in every request to
/// this pserver).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotLease {
    pub slot: u32,
    pub generation: u64,
    /// The secret the claim carried (the caller's own; `Debug` does not print it).
    pub secret: SlotSecret,
    pub lease_ms: u64,
    /// The slot's latest checkpoint, to restore from.
    pub checkpoint: Option<CheckpointMeta>,
    /// The id of the job incarnation the slot is of (never reused; 0 from older masters).
    pub job_id: u64,
    /// The job's restores with the model asked when the slot was claimed: the shard the
    /// claim restores is of that restore (pushes computed on an earlier one are refused).
    pub model_restore: u64,
}

/// What `record_checkpoint` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointRecorded {
    Recorded,
    /// The slot already has a checkpoint at the same or a higher step; nothing changed, and
    /// the files that one needs must stay. `recorded_step` is that checkpoint's step: the
    /// caller moves its own step past it, so its next file gets a name never used.
    Stale {
        recorded_step: u64,
    },
}

/// One held pserver slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PServerEntry {
    pub slot: u32,
    pub addr: String,
    pub generation: u64,
}

/// The job's pserver slots: how many there are, and the held ones.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PServerTable {
    pub desired: u32,
    pub pservers: Vec<PServerEntry>,
}

/// The job's sizes, as the accepted dataset report gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatasetSizes {
    pub task_count: u64,
    pub chunk_count: u64,
    pub record_count: u64,
}
