//! Read-only views of the state for the leader's `Status` and `ListPServers` answers.

use serde::{Deserialize, Serialize};

use super::eval::EvalRecord;
use super::pserver_slots::{CheckpointMeta, SlotHolder};

/// What `raftrain status` shows about the replicated state.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StatusView {
    /// The job name, `None` before a dataset was reported.
    pub job: Option<String>,
    /// What the job's dataset is, `None` before a dataset was reported.
    pub dataset: Option<DatasetKindView>,
    /// The running pass (the last one once the job finished).
    pub pass: u32,
    pub passes: u32,
    pub task_count: u64,
    pub todo_count: u64,
    pub pending_count: u64,
    pub done_count: u64,
    pub failed_count: u64,
    /// Tasks handed out over the whole job, retries included (the sum of every task's epoch):
    /// beyond one per task per pass, each is a retry (a timeout, a failure, a lost trainer).
    pub dispatched_count: u64,
    /// Failed tasks with why they failed, in id order: at most `FAILED_TASKS_SHOWN_MAX`.
    pub failed_tasks: Vec<FailedTaskView>,
    pub trainers: Vec<TrainerView>,
    /// How many pserver slots the job has, `None` before the first claim.
    pub pservers_desired: Option<u32>,
    pub pservers: Vec<PServerSlotView>,
    /// The latest evaluation reported.
    pub eval: Option<EvalRecord>,
    pub job_finished: bool,
    /// The job was cancelled.
    pub job_cancelled: bool,
}

/// What the job's dataset is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatasetKindView {
    /// RecordIO files the leader scanned.
    RecordIo,
    /// The indices `[0, size)` in tasks of `shard_size`.
    IndexRange { size: u64, shard_size: u64 },
}

/// A task in `failed`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct FailedTaskView {
    pub task_id: u64,
    /// The last failure reason a trainer reported, or that the task timed out.
    pub reason: String,
}

/// A registered trainer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TrainerView {
    pub trainer: u64,
    pub name: String,
}

/// One pserver slot below `desired`, held or not.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PServerSlotView {
    pub slot: u32,
    /// The holder's address and generation, `None` while the slot is free.
    pub holder: Option<SlotHolder>,
    /// The slot's latest checkpoint, which a replacement restores.
    pub checkpoint: Option<CheckpointMeta>,
}
