//! The safety rules of the state, checked by tests, the simulator and snapshot restore.
//!
//! `check_invariants` judges one state; `check_transition` judges a step between two states.
//! Each violation names the rule it breaks and the task, trainer or slot involved.

use std::collections::BTreeMap;

use super::job::Job;
use super::master_state::MasterState;
use super::pserver_slots::PServerSlots;
use super::sessions::SESSION_COUNT_MAX;
use super::trainer_registry::TRAINER_COUNT_MAX;

/// A broken safety rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvariantViolation {
    #[error("task {task}: in {queue}, but the job has only {task_count} tasks")]
    TaskIdOutOfRange { task: u64, queue: &'static str, task_count: u64 },
    #[error("task {task}: in both {first} and {second}; a task is in exactly one queue")]
    TaskQueuedTwice { task: u64, first: &'static str, second: &'static str },
    #[error("task {task}: in no queue; a task is in exactly one of todo, pending, done, failed")]
    TaskLost { task: u64 },
    #[error("queues hold {queued} tasks but the dataset makes {task_count}")]
    TaskCountMismatch { queued: u64, task_count: u64 },
    #[error("task {task}: pending with epoch {pending_epoch} but its epoch is {task_epoch}")]
    PendingEpochMismatch { task: u64, pending_epoch: u64, task_epoch: u64 },
    #[error("task {task}: pending on trainer {trainer}, which is not registered")]
    PendingTrainerUnknown { task: u64, trainer: u64 },
    #[error("task {task}: deadline {deadline_ms} before its dispatch at {dispatched_at_ms}")]
    DeadlineBeforeDispatch { task: u64, dispatched_at_ms: u64, deadline_ms: u64 },
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
    #[error("pserver slot {index}: held or checkpointed but the job has {desired:?} slots")]
    SlotOutOfRange { index: u32, desired: Option<u32> },
    #[error("pserver {addr}: holds slots {first} and {second}; an address holds at most one")]
    AddressHoldsTwoSlots { addr: String, first: u32, second: u32 },
    #[error("{count} client sessions kept, more than {count_max}")]
    TooManySessions { count: u64, count_max: u64 },
    #[error("task {task}: epoch went from {before} to {after}; epochs only grow")]
    EpochDecreased { task: u64, before: u64, after: u64 },
    #[error("pass went from {before} to {after}; the pass only grows")]
    PassDecreased { before: u32, after: u32 },
    #[error("the job was finished and is not any more")]
    JobUnfinished,
    #[error("the dataset changed after it was accepted; the first report wins")]
    DatasetChanged,
    #[error("the next trainer id went from {before} to {after}; ids are never reused")]
    TrainerIdReused { before: u64, after: u64 },
    #[error("the pserver slot count changed from {before:?} to {after:?}")]
    DesiredPServersChanged { before: Option<u32>, after: Option<u32> },
    #[error("the state clock went from {before} to {after}; it never goes back")]
    ClockWentBack { before: u64, after: u64 },
}

use InvariantViolation as Violation;

impl MasterState {
    /// Checks every rule a single state must satisfy.
    pub fn check_invariants(&self) -> Result<(), InvariantViolation> {
        if let Some(job) = &self.job {
            check_queues(job)?;
            check_pass(job)?;
            for (task, pending) in &job.queue.pending {
                let trainer = pending.trainer;
                if !self.trainers.contains(trainer) {
                    return Err(Violation::PendingTrainerUnknown { task: *task, trainer });
                }
            }
        }
        let next_trainer_id = self.trainers.next_trainer_id;
        if let Some(trainer) = self.trainers.trainers.keys().find(|id| **id >= next_trainer_id) {
            return Err(Violation::TrainerIdNotIssued { trainer: *trainer, next_trainer_id });
        }
        let trainer_count = self.trainers.trainers.len();
        if trainer_count > TRAINER_COUNT_MAX {
            return Err(Violation::TooManyTrainers {
                count: to_u64(trainer_count),
                count_max: to_u64(TRAINER_COUNT_MAX),
            });
        }
        check_slots(&self.pservers)?;
        let session_count = self.sessions.sessions.len();
        if session_count > SESSION_COUNT_MAX {
            return Err(Violation::TooManySessions {
                count: to_u64(session_count),
                count_max: to_u64(SESSION_COUNT_MAX),
            });
        }
        Ok(())
    }

    /// Checks the rules about one step: what may only grow, and what is fixed once set.
    pub fn check_transition(before: &Self, after: &Self) -> Result<(), InvariantViolation> {
        if after.clock_ms < before.clock_ms {
            return Err(Violation::ClockWentBack {
                before: before.clock_ms,
                after: after.clock_ms,
            });
        }
        let (next_before, next_after) =
            (before.trainers.next_trainer_id, after.trainers.next_trainer_id);
        if next_after < next_before {
            return Err(Violation::TrainerIdReused { before: next_before, after: next_after });
        }
        let (desired_before, desired_after) = (before.pservers.desired, after.pservers.desired);
        if desired_before.is_some() && desired_before != desired_after {
            return Err(Violation::DesiredPServersChanged {
                before: desired_before,
                after: desired_after,
            });
        }
        match (&before.job, &after.job) {
            (None, _) => Ok(()),
            (Some(_), None) => Err(Violation::DatasetChanged),
            (Some(job_before), Some(job_after)) => check_job_transition(job_before, job_after),
        }
    }
}

fn check_job_transition(before: &Job, after: &Job) -> Result<(), InvariantViolation> {
    if before.dataset != after.dataset {
        return Err(Violation::DatasetChanged);
    }
    let (pass_before, pass_after) = (before.queue.pass, after.queue.pass);
    if pass_after < pass_before {
        return Err(Violation::PassDecreased { before: pass_before, after: pass_after });
    }
    if before.queue.job_finished && !after.queue.job_finished {
        return Err(Violation::JobUnfinished);
    }
    let epochs = before.queue.tasks.iter().zip(&after.queue.tasks);
    for (task, (task_before, task_after)) in (0u64..).zip(epochs) {
        if task_after.epoch < task_before.epoch {
            let (before, after) = (task_before.epoch, task_after.epoch);
            return Err(Violation::EpochDecreased { task, before, after });
        }
    }
    Ok(())
}

/// Every task id `0..task_count` is in exactly one queue, and pending entries match the tasks.
fn check_queues(job: &Job) -> Result<(), InvariantViolation> {
    let queue = &job.queue;
    let task_count = job.dataset.task_count();
    let queues: [(&'static str, Vec<u64>); 4] = [
        ("todo", queue.todo.iter().copied().collect()),
        ("pending", queue.pending.keys().copied().collect()),
        ("done", queue.done.iter().copied().collect()),
        ("failed", queue.failed.iter().copied().collect()),
    ];
    let mut seen: BTreeMap<u64, &'static str> = BTreeMap::new();
    for (name, tasks) in &queues {
        for task in tasks {
            if *task >= task_count {
                return Err(Violation::TaskIdOutOfRange { task: *task, queue: name, task_count });
            }
            if let Some(first) = seen.insert(*task, name) {
                return Err(Violation::TaskQueuedTwice { task: *task, first, second: name });
            }
        }
    }
    if let Some(task) = (0..task_count).find(|task| !seen.contains_key(task)) {
        return Err(Violation::TaskLost { task });
    }
    let queued: usize = queues.iter().map(|(_, tasks)| tasks.len()).sum();
    if to_u64(queued) != task_count || to_u64(queue.tasks.len()) != task_count {
        return Err(Violation::TaskCountMismatch { queued: to_u64(queued), task_count });
    }
    for (task, pending) in &queue.pending {
        let task_epoch =
            queue.tasks[usize::try_from(*task).expect("checked below task_count")].epoch;
        if pending.epoch != task_epoch {
            let pending_epoch = pending.epoch;
            return Err(Violation::PendingEpochMismatch { task: *task, pending_epoch, task_epoch });
        }
        if pending.deadline_ms < pending.dispatched_at_ms {
            return Err(Violation::DeadlineBeforeDispatch {
                task: *task,
                dispatched_at_ms: pending.dispatched_at_ms,
                deadline_ms: pending.deadline_ms,
            });
        }
    }
    Ok(())
}

/// The pass is in range while the job runs, and the job runs exactly while work is left.
fn check_pass(job: &Job) -> Result<(), InvariantViolation> {
    let queue = &job.queue;
    let (pass, passes) = (queue.pass, job.dataset.passes);
    let has_work = !queue.todo.is_empty() || !queue.pending.is_empty();
    if queue.job_finished {
        if has_work {
            let (todo, pending) = (to_u64(queue.todo.len()), to_u64(queue.pending.len()));
            return Err(Violation::FinishedWithWork { todo, pending });
        }
        return Ok(());
    }
    if pass >= passes {
        return Err(Violation::PassOutOfRange { pass, passes });
    }
    if !has_work {
        return Err(Violation::JobStalled { pass });
    }
    Ok(())
}

/// Slots exist only below `desired`, and no address holds two.
fn check_slots(slots: &PServerSlots) -> Result<(), InvariantViolation> {
    let desired = slots.desired;
    let limit = desired.unwrap_or(0);
    let indices = slots.holders.keys().chain(slots.checkpoints.keys());
    if let Some(index) = indices.copied().find(|index| *index >= limit) {
        return Err(Violation::SlotOutOfRange { index, desired });
    }
    let mut by_addr: BTreeMap<&str, u32> = BTreeMap::new();
    for (index, addr) in &slots.holders {
        if let Some(first) = by_addr.insert(addr.as_str(), *index) {
            return Err(Violation::AddressHoldsTwoSlots {
                addr: addr.clone(),
                first,
                second: *index,
            });
        }
    }
    Ok(())
}

fn to_u64(length: usize) -> u64 {
    u64::try_from(length).expect("lengths fit in u64")
}
