//! `InvariantViolation`: each broken safety rule, named with the task, trainer, slot or job
//! involved (the rules themselves are in `invariant.rs` and `group_invariant.rs`).

/// A broken safety rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvariantViolation {
    #[error("a restore waits for slot {slot} to reload, but nobody holds it")]
    ReloadWaitsForUnheldSlot { slot: u32 },
    #[error("task {task_id}: in {queue}, but the job has only {task_count} tasks")]
    TaskIdOutOfRange { task_id: u64, queue: &'static str, task_count: u64 },
    #[error("task {task_id}: in both {first} and {second}; a task is in exactly one queue")]
    TaskQueuedTwice { task_id: u64, first: &'static str, second: &'static str },
    #[error(
        "task {task_id}: in no queue; a task is in exactly one of todo, pending, done, failed"
    )]
    TaskLost { task_id: u64 },
    #[error("queues hold {queued} tasks but the dataset makes {task_count}")]
    TaskCountMismatch { queued: u64, task_count: u64 },
    #[error("task {task_id}: pending with epoch {pending_epoch} but its epoch is {task_epoch}")]
    PendingEpochMismatch { task_id: u64, pending_epoch: u64, task_epoch: u64 },
    #[error("task {task_id}: pending on trainer {trainer}, which is not registered")]
    PendingTrainerUnknown { task_id: u64, trainer: u64 },
    #[error("task {task_id}: deadline {deadline_ms} before its dispatch at {dispatched_at_ms}")]
    DeadlineBeforeDispatch { task_id: u64, dispatched_at_ms: u64, deadline_ms: u64 },
    #[error("pass {pass} is not below the {passes} passes of an unfinished job")]
    PassOutOfRange { pass: u32, passes: u32 },
    #[error("pass {pass}: todo and pending are empty but the job is not finished (it would hang)")]
    JobStalled { pass: u32 },
    #[error("the job is finished but {todo} tasks are in todo and {pending} pending")]
    FinishedWithWork { todo: u64, pending: u64 },
    #[error("trainer {trainer}: registered but ids below {next_trainer_id} only were issued")]
    TrainerIdNotIssued { trainer: u64, next_trainer_id: u64 },
    #[error("{count} trainers registered, more than {count_max}")]
    TooManyTrainers { count: u64, count_max: u64 },
    #[error("pserver slot {slot}: held or checkpointed but the job has {desired:?} slots")]
    SlotOutOfRange { slot: u32, desired: Option<u32> },
    #[error("pserver {addr}: holds slots {first} and {second}; an address holds at most one")]
    AddressHoldsTwoSlots { addr: String, first: u32, second: u32 },
    #[error("slot {slot} keeps a claim secret but nobody holds it")]
    SecretWithoutHolder { slot: u32 },
    #[error("{count} strangers' client sessions kept, more than {count_max}")]
    TooManySessions { count: u64, count_max: u64 },
    #[error("task {task_id}: epoch went from {before} to {after}; epochs only grow")]
    EpochDecreased { task_id: u64, before: u64, after: u64 },
    #[error("pass went from {before} to {after}; the pass only grows")]
    PassDecreased { before: u32, after: u32 },
    #[error("the job was finished and is not any more")]
    JobUnfinished,
    #[error("the job ended (cancelled: {cancelled}, at {at_ms} ms) and runs again")]
    EndedJobRevived { cancelled: bool, at_ms: u64 },
    #[error("the job ended but a restore of progress checkpoint {checkpoint} still waits")]
    EndedJobRestoring { checkpoint: u64 },
    #[error(
        "the dataset or its shuffle seed changed after it was accepted; the first report wins"
    )]
    DatasetChanged,
    #[error("the next trainer id went from {before} to {after}; ids are never reused")]
    TrainerIdReused { before: u64, after: u64 },
    #[error("the pserver slot count changed from {before:?} to {after:?}")]
    DesiredPServersChanged { before: Option<u32>, after: Option<u32> },
    #[error("the state clock went from {before} to {after}; it never goes back")]
    ClockWentBack { before: u64, after: u64 },
    #[error("the group's feature level went down from {before} to {after}")]
    FeatureLevelLowered { before: u32, after: u32 },
    #[error("a dataset report is loading ({received} of {total} chunks) while {state}")]
    LoadingInconsistent { received: u64, total: u64, state: &'static str },
    #[error("pserver slot {slot}: generation {generation} was never issued (next is {next})")]
    GenerationNotIssued { slot: u32, generation: u64, next: u64 },
    #[error(
        "the next slot generation went from {before} to {after}; generations are never reused"
    )]
    GenerationReused { before: u64, after: u64 },
    #[error("the client sessions' indices (strangers by age, members) do not match the sessions")]
    SessionIndexMismatch,
    #[error("{bound} client sessions bound to members, but only {alive} members are alive")]
    TooManyMemberSessions { bound: u64, alive: u64 },
    #[error("a client session is bound to {member}, which is no longer part of the job")]
    SessionOfGoneMember { member: String },
    #[error("trainer {trainer}: its held task {task_id} is not pending on it")]
    HeldTaskMismatch { trainer: u64, task_id: u64 },
    #[error("{pending} tasks pending but {held} held by trainers; a trainer holds one at a time")]
    HeldCountMismatch { pending: u64, held: u64 },
    #[error("failure reasons take {actual} bytes, the queue counts {counted}")]
    ReasonBytesMismatch { actual: u64, counted: u64 },
    #[error("{actual} (task, trainer) content failers kept, the queue counts {counted} (at most {count_max})")]
    FailersMismatch { actual: u64, counted: u64, count_max: u64 },
    #[error("job {job}: {problem}")]
    Job { job: String, problem: String },
    #[error("{problem}")]
    Rendezvous { problem: String },
    #[error("the group's jobs hold {count} {what}, more than the {count_max} allowed")]
    GroupOverLimit { what: &'static str, count: u64, count_max: u64 },
    #[error("job #{id} was removed while it was still running")]
    RunningJobRemoved { id: u64 },
    #[error("job #{id} appeared below the next job id {next_job_id} of the state before")]
    JobIdReused { id: u64, next_job_id: u64 },
}
