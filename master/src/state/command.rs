//! The commands the task-queue state machine applies.
//!
//! bincode encodes a variant by its position: new commands go at the end, never in between,
//! so entries already in a log keep their meaning.

use serde::{Deserialize, Serialize};

use super::chunk_list::ChunkList;
use super::dataset::{ChunkRef, QueuePolicy};
use super::pserver_slots::CheckpointMeta;
use super::rendezvous_op::RendezvousOp;
use client::Fault;
use client::SlotSecret;

/// One transition of the replicated master state.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub enum Command {
    /// Defines the job. The first report wins; the leader built `chunks` by scanning RecordIO
    /// headers and stamped `policy` from its own flags.
    ReportDataset { job: String, chunks: Vec<ChunkRef>, passes: u32, policy: QueuePolicy },
    /// A trainer asks for the next task of `pass`.
    GetTask { trainer: u64, pass: u32 },
    /// A trainer finished the task it got with this epoch.
    TaskFinished { task_id: u64, epoch: u64 },
    /// A trainer could not process the task it got with this epoch because of its content
    /// (what senders meant before faults were told apart: applied as a `Content` fault).
    TaskFailed { task_id: u64, epoch: u64, reason: String },
    /// The leader saw a pending deadline pass: requeue every task whose deadline is at or before
    /// the request's `now_ms`.
    ExpireTasks,
    /// A trainer joins and gets an id.
    RegisterTrainer { name: String },
    /// The leader declared a trainer dead (its lease, leader soft state, ran out).
    TrainerLost { trainer: u64 },
    /// A pserver at `addr` asks for a slot; the first claim fixes how many slots there are.
    /// What older builds proposed: the slot is held without a secret, and a holder without
    /// one is confirmed by nothing (see `ClaimPServerSlotWithSecret`).
    ClaimPServerSlot { addr: String, desired: u32 },
    /// The holder of `generation` gives `slot` back (or the leader took it from it).
    ReleasePServerSlot { slot: u32, generation: u64 },
    /// The holder of `slot` under `generation` wrote a checkpoint file.
    RecordCheckpoint { slot: u32, generation: u64, meta: CheckpointMeta },
    /// A trainer evaluated the model; kept for status.
    RecordEval { pass: u32, loss: f32, accuracy: f32 },
    /// One batch of a dataset too large for one log entry. Batches go in order from chunk 0;
    /// `digest` ([`super::chunks_digest`]) covers the whole list of `total_chunks`. The batch
    /// that completes the list defines the job, as `ReportDataset` does in one entry.
    ReportDatasetBatch {
        job: String,
        passes: u32,
        policy: QueuePolicy,
        total_chunks: u64,
        digest: u64,
        first_chunk: u64,
        chunks: ChunkList,
    },
    /// A trainer could not process the task it got with this epoch, and says whose fault it
    /// was: the data's (`Content`) or its own view's (`Local`).
    TaskFailedWithFault { task_id: u64, epoch: u64, reason: String, fault: Fault },
    /// A pserver at `addr` asks for a slot and sends the secret that its heartbeats and
    /// checkpoint records will carry; the first claim fixes how many slots there are.
    ClaimPServerSlotWithSecret { addr: String, desired: u32, secret: SlotSecret },
    /// Defines the job as the indices `[0, size)` in tasks of `shard_size` (the last one
    /// possibly shorter). The first report of either kind wins; the leader stamped `policy`
    /// from its flags (its `chunks_per_task` means nothing here).
    ReportIndexDataset { job: String, size: u64, shard_size: u64, passes: u32, policy: QueuePolicy },
    /// A command for one job of the group, named or by id: every client command since jobs
    /// have names. A command sent without this envelope (every entry of a log written before
    /// jobs had names) is for the group's only job.
    InJob { job: JobRef, command: Box<Command> },
    /// Cancels the job: its trainers are told so by every later task call and its pservers by
    /// their heartbeats, and the job is removed once its retention has passed.
    CancelJob,
    /// Records the job's progress (pass and done tasks) as a progress checkpoint.
    CheckpointJob,
    /// Puts the job's queue back to the progress of checkpoint `checkpoint`.
    RestoreJob { checkpoint: u64 },
    /// The leader removes a finished or cancelled job whose retention has passed (a leader
    /// decision, by id: a new job of the same name is never removed by it).
    RemoveJob { job: u64 },
    /// Records the job's progress as `CheckpointJob` does, and asks each pserver slot of the
    /// job for a checkpoint of its own under the same id (`TagSlotCheckpoint`).
    CheckpointProgress,
    /// Puts the job back to progress checkpoint `checkpoint`: the data only, or the model too
    /// (every slot's checkpoint taken for it), which holds the queue until each holder has
    /// reloaded (`model_checkpoints.rs`).
    RestoreProgress { checkpoint: u64, data_only: bool },
    /// The holder of `slot` under `generation` wrote `meta` for progress checkpoint
    /// `progress`.
    TagSlotCheckpoint { slot: u32, generation: u64, progress: u64, meta: CheckpointMeta },
    /// The holder of `slot` under `generation` reloaded its shard for restore `restore`.
    SlotReloaded { slot: u32, generation: u64, restore: u64 },
    /// The holder of `task_id` under `epoch` is still at work on it: its deadline moves to a
    /// whole timeout from now (never earlier than it was).
    TaskProgress { task_id: u64, epoch: u64 },
    /// A client's operation on rendezvous run `run`'s keys (made by its first write).
    Rendezvous { run: String, op: RendezvousOp },
    /// Removes rendezvous run `run`: an operator's delete (`touched_ms` `None`), or the
    /// leader's expiry of a run it saw untouched since `touched_ms` (kept if written since).
    RemoveRendezvous { run: String, touched_ms: Option<u64> },
    /// Starts a new incarnation of the job this command names (always by name) if the newest
    /// job of that name ended, finished or cancelled; while it runs, a plain join that changes
    /// nothing. Stamped: a retry is answered from the session of the incarnation it made, so
    /// concurrent and retried restarts make one new incarnation (`job_restart.rs`).
    RestartJob,
    /// The leader cancels job `job`, which no client touched for its idle expiry (leader soft
    /// state), unless a command was applied to it since the leader judged it: its state
    /// clock is no longer `clock_ms`. A leader decision, by id, applied only in its term.
    CancelIdleJob { job: u64, clock_ms: u64 },
    /// A dataset report (`ReportDatasetBatch`, `ReportDataset` or `ReportIndexDataset`) of a
    /// job whose tasks are handed out in a permutation of `seed` and the pass
    /// (`client::shuffle`). The seed is part of the job's definition: the report that defines
    /// the job fixes it, and a later report with another seed, or none, is refused.
    ShuffledReport { seed: u64, report: Box<Command> },
    /// The leader raises the group's feature level to `level` (`feature_level.rs`), having
    /// heard every member say it decodes that level. A leader decision, applied only in its
    /// term; a level at or below the group's changes nothing.
    RaiseFeatureLevel { level: u32 },
    /// A trainer reports the tasks it (or another trainer of its process) finished, each as
    /// `TaskFinished` applies it, and then asks for the next task of `pass` as `GetTask` does:
    /// one entry for a task hand-off instead of two. At most
    /// [`client::FINISHED_PER_ASK_MAX`] receipts `(task_id, epoch)`; the answer is
    /// `Response::FinishedThenTask`.
    FinishedThenGetTask { finished: Vec<(u64, u64)>, trainer: u64, pass: u32 },
}

/// Which job a command is for.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum JobRef {
    /// By name, as clients say it; the empty name means the group's only job.
    Name(String),
    /// By the id the group gave it, as the leader's decisions say it.
    Id(u64),
}

impl Command {
    /// `command` for the job of id `job` (how the leader and holder-checked calls name it).
    pub fn in_job(job: u64, command: Command) -> Command {
        Command::InJob { job: JobRef::Id(job), command: Box::new(command) }
    }

    /// The job a command names (`None`: sent without an envelope, for the only job) and the
    /// command itself, out of its `InJob` envelope: what checkers that read the log look at.
    pub fn scoped(&self) -> (Option<&JobRef>, &Command) {
        match self {
            Command::InJob { job, command } => (Some(job), command),
            command => (None, command),
        }
    }

    /// The job name a dataset report carries (`None` for every other command): a report names
    /// its job itself.
    pub fn reported_job(&self) -> Option<&str> {
        match self {
            Command::ShuffledReport { report, .. } => report.reported_job(),
            Command::ReportDataset { job, .. }
            | Command::ReportDatasetBatch { job, .. }
            | Command::ReportIndexDataset { job, .. } => Some(job),
            _ => None,
        }
    }

    /// A dataset report out of its `ShuffledReport` envelope, with the envelope's seed
    /// (`None` for every command sent without one).
    pub fn report_parts(&self) -> (&Command, Option<u64>) {
        match self {
            Command::ShuffledReport { seed, report } => (report, Some(*seed)),
            command => (command, None),
        }
    }

    /// Whether a cancelled job still applies this command: what the leader does to wind its
    /// members down, and a repeated cancel. Everything else is answered `JobCancelled`.
    pub(crate) fn runs_after_cancel(&self) -> bool {
        matches!(
            self,
            Command::TrainerLost { .. }
                | Command::ReleasePServerSlot { .. }
                | Command::ExpireTasks
                | Command::CancelJob
        )
    }
}
