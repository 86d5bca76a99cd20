//! The safety rules of the state, checked by tests, the simulator and snapshot restore.
//!
//! `check_invariants` judges one state; `check_transition` judges a step between two states.
//! Each violation names the rule it breaks and the task, trainer or slot involved.

use std::collections::BTreeMap;

use super::job::Job;
use super::job_state::JobState;
use super::members;
use super::pserver_slots::PServerSlots;
use super::trainer_registry::TRAINER_COUNT_MAX;

use super::violation::InvariantViolation;

use InvariantViolation as Violation;

impl JobState {
    /// Checks every rule a single state must satisfy.
    pub fn check_invariants(&self) -> Result<(), InvariantViolation> {
        if let Some(loading) = &self.loading {
            let (received, total) = (loading.chunks.len() as u64, loading.total_chunks);
            if self.job.is_some() {
                return Err(Violation::LoadingInconsistent {
                    received,
                    total,
                    state: "a job is defined",
                });
            }
            if received >= total {
                return Err(Violation::LoadingInconsistent {
                    received,
                    total,
                    state: "every chunk has arrived",
                });
            }
        }
        if let Some(job) = &self.job {
            check_queues(job)?;
            check_pass(job)?;
            check_held_and_reasons(job)?;
            for (task_id, pending) in &job.queue.pending {
                let trainer = pending.trainer;
                if !self.trainers.contains(trainer) {
                    return Err(Violation::PendingTrainerUnknown { task_id: *task_id, trainer });
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
        if let (Some(_), Some(pending)) = (self.ended, &self.models.restoring) {
            return Err(Violation::EndedJobRestoring { checkpoint: pending.checkpoint });
        }
        if let Some(pending) = &self.models.restoring {
            let unheld =
                pending.waiting.keys().find(|slot| !self.pservers.holders.contains_key(slot));
            if let Some(slot) = unheld {
                return Err(Violation::ReloadWaitsForUnheldSlot { slot: *slot });
            }
        }
        // Counts only (checked after every apply); `check_session_index` checks entry by entry.
        members::check_pool_counts(&self.sessions, &self.trainers, &self.pservers)
    }

    /// Checks that the sessions' indices list exactly the sessions, and that every bound member
    /// is alive: O(n log n), so not run after every apply (snapshot restore and the tests run
    /// it).
    pub fn check_session_index(&self) -> Result<(), InvariantViolation> {
        if !self.sessions.index_matches() {
            return Err(Violation::SessionIndexMismatch);
        }
        members::check_bindings(&self.sessions, &self.trainers, &self.pservers)
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
        let (generation_before, generation_after) =
            (before.pservers.next_generation, after.pservers.next_generation);
        if generation_after < generation_before {
            return Err(Violation::GenerationReused {
                before: generation_before,
                after: generation_after,
            });
        }
        let (desired_before, desired_after) = (before.pservers.desired, after.pservers.desired);
        if desired_before.is_some() && desired_before != desired_after {
            return Err(Violation::DesiredPServersChanged {
                before: desired_before,
                after: desired_after,
            });
        }
        // A job that ended (finished or cancelled) never runs again, by any path: a restore,
        // a slot release that completes one, a late report.
        if let Some(end) = before.ended.filter(|end| after.ended != Some(*end)) {
            return Err(Violation::EndedJobRevived { cancelled: end.cancelled, at_ms: end.at_ms });
        }
        let restored = before.progress.restores != after.progress.restores;
        match (&before.job, &after.job) {
            (None, _) => Ok(()),
            (Some(_), None) => Err(Violation::DatasetChanged),
            (Some(job_before), Some(job_after)) => {
                check_job_transition(job_before, job_after, restored)
            }
        }
    }
}

/// `restored`: a restore happened in between, which may move the pass back and run a
/// finished job again (never the epochs).
fn check_job_transition(
    before: &Job,
    after: &Job,
    restored: bool,
) -> Result<(), InvariantViolation> {
    // The shuffle seed is part of the job's definition, as fixed as its dataset.
    if before.dataset != after.dataset || before.shuffle != after.shuffle {
        return Err(Violation::DatasetChanged);
    }
    let (pass_before, pass_after) = (before.queue.pass, after.queue.pass);
    if pass_after < pass_before && !restored {
        return Err(Violation::PassDecreased { before: pass_before, after: pass_after });
    }
    if before.queue.job_finished && !after.queue.job_finished && !restored {
        return Err(Violation::JobUnfinished);
    }
    let epochs = before.queue.tasks.iter().zip(&after.queue.tasks);
    for (task_id, (task_before, task_after)) in (0u64..).zip(epochs) {
        if task_after.epoch < task_before.epoch {
            let (before, after) = (task_before.epoch, task_after.epoch);
            return Err(Violation::EpochDecreased { task_id, before, after });
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
        for task_id in tasks {
            if *task_id >= task_count {
                return Err(Violation::TaskIdOutOfRange {
                    task_id: *task_id,
                    queue: name,
                    task_count,
                });
            }
            if let Some(first) = seen.insert(*task_id, name) {
                return Err(Violation::TaskQueuedTwice { task_id: *task_id, first, second: name });
            }
        }
    }
    if let Some(task_id) = (0..task_count).find(|task_id| !seen.contains_key(task_id)) {
        return Err(Violation::TaskLost { task_id });
    }
    let queued: usize = queues.iter().map(|(_, tasks)| tasks.len()).sum();
    if to_u64(queued) != task_count || to_u64(queue.tasks.len()) != task_count {
        return Err(Violation::TaskCountMismatch { queued: to_u64(queued), task_count });
    }
    for (task_id, pending) in &queue.pending {
        let task_epoch =
            queue.tasks[usize::try_from(*task_id).expect("checked below task_count")].epoch;
        if pending.epoch != task_epoch {
            let pending_epoch = pending.epoch;
            return Err(Violation::PendingEpochMismatch {
                task_id: *task_id,
                pending_epoch,
                task_epoch,
            });
        }
        if pending.deadline_ms < pending.dispatched_at_ms {
            return Err(Violation::DeadlineBeforeDispatch {
                task_id: *task_id,
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

/// Slots exist only below `desired`, no address holds two, and a secret belongs to a holder.
fn check_slots(slots: &PServerSlots) -> Result<(), InvariantViolation> {
    if let Some(slot) = slots.secrets.keys().find(|slot| !slots.holders.contains_key(slot)) {
        return Err(Violation::SecretWithoutHolder { slot: *slot });
    }
    let desired = slots.desired;
    let limit = desired.unwrap_or(0);
    let indices = slots.holders.keys().chain(slots.checkpoints.keys());
    if let Some(slot) = indices.copied().find(|slot| *slot >= limit) {
        return Err(Violation::SlotOutOfRange { slot, desired });
    }
    let mut by_addr: BTreeMap<&str, u32> = BTreeMap::new();
    for (slot, holder) in &slots.holders {
        if holder.generation == 0 || holder.generation >= slots.next_generation {
            return Err(Violation::GenerationNotIssued {
                slot: *slot,
                generation: holder.generation,
                next: slots.next_generation,
            });
        }
        if let Some(first) = by_addr.insert(holder.addr.as_str(), *slot) {
            return Err(Violation::AddressHoldsTwoSlots {
                addr: holder.addr.clone(),
                first,
                second: *slot,
            });
        }
    }
    Ok(())
}

/// The trainer-to-task index matches pending, and the reason budget counts every reason.
fn check_held_and_reasons(job: &Job) -> Result<(), InvariantViolation> {
    let queue = &job.queue;
    for (trainer, task_id) in &queue.held {
        if queue.pending.get(task_id).is_none_or(|pending| pending.trainer != *trainer) {
            return Err(Violation::HeldTaskMismatch { trainer: *trainer, task_id: *task_id });
        }
    }
    if queue.held.len() != queue.pending.len() {
        let (pending, held) = (to_u64(queue.pending.len()), to_u64(queue.held.len()));
        return Err(Violation::HeldCountMismatch { pending, held });
    }
    let actual: u64 = queue
        .tasks
        .iter()
        .filter_map(|task| task.last_failure.as_ref())
        .map(|r| r.len() as u64)
        .sum();
    if actual != queue.reason_bytes {
        return Err(Violation::ReasonBytesMismatch { actual, counted: queue.reason_bytes });
    }
    queue.failers.check(job.dataset.task_count(), queue.failers_count_max())
}

fn to_u64(length: usize) -> u64 {
    u64::try_from(length).expect("lengths fit in u64")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ChunkRef, DecodeError};
    use crate::state::{Command, QueuePolicy, Request};

    fn holder(addr: &str, generation: u64) -> crate::state::SlotHolder {
        crate::state::SlotHolder { addr: addr.to_string(), generation }
    }

    /// Trainer 1 registered, three one-chunk tasks over two passes, task 0 pending on trainer 1,
    /// and two pserver slots with slot 0 held.
    fn base() -> JobState {
        let policy = QueuePolicy {
            chunks_per_task: 1,
            task_timeout_min_ms: 1000,
            timeout_factor: 2,
            max_task_failures: 1,
            retry_failed_next_pass: false,
        };
        let chunk =
            |offset| ChunkRef { path: "f".into(), offset, compressed_size: 1, record_count: 1 };
        let commands = [
            Command::RegisterTrainer { name: "t".into() },
            Command::ReportDataset {
                job: "j".into(),
                chunks: (0..3).map(chunk).collect(),
                passes: 2,
                policy,
            },
            Command::GetTask { trainer: 1, pass: 0 },
            Command::ClaimPServerSlot { addr: "a:1".into(), desired: 2 },
        ];
        let mut state = JobState::new();
        for command in commands {
            state.apply(&Request { client: None, now_ms: 10, term: None, command });
        }
        state.check_invariants().expect("the base state is valid");
        state
    }

    fn job(state: &mut JobState) -> &mut Job {
        state.job.as_mut().expect("the base state has a job")
    }

    /// Corrupts the base state and compares the violation found, and that a snapshot of the
    /// corrupted state is refused.
    fn check(corrupt: fn(&mut JobState), expected: InvariantViolation) {
        let mut state = base();
        corrupt(&mut state);
        assert_eq!(state.check_invariants(), Err(expected.clone()));
        let named = JobState { name: "j".to_string(), ..state.clone() };
        let group = crate::state::MasterState {
            clock_ms: state.clock_ms,
            jobs: std::collections::BTreeMap::from([(1, named)]),
            next_job_id: 2,
            ..crate::state::MasterState::default()
        };
        match crate::state::MasterState::decode(&group.encode()) {
            Err(DecodeError::Inconsistent(violation)) => assert_eq!(violation, expected),
            other => panic!("a corrupted snapshot decoded as {other:?}"),
        }
    }

    /// Each corruption of a single state is caught and named.
    #[test]
    fn single_state_rules() {
        check(
            |s| job(s).queue.todo.push_back(1),
            Violation::TaskQueuedTwice { task_id: 1, first: "todo", second: "todo" },
        );
        check(
            |s| job(s).queue.done.extend([1]),
            Violation::TaskQueuedTwice { task_id: 1, first: "todo", second: "done" },
        );
        check(
            |s| {
                job(s).queue.todo.pop_back();
            },
            Violation::TaskLost { task_id: 2 },
        );
        check(
            |s| {
                job(s).queue.failed.insert(7);
            },
            Violation::TaskIdOutOfRange { task_id: 7, queue: "failed", task_count: 3 },
        );
        check(
            |s| job(s).queue.tasks[0].epoch = 5,
            Violation::PendingEpochMismatch { task_id: 0, pending_epoch: 1, task_epoch: 5 },
        );
        check(
            |s| {
                s.trainers.trainers.clear();
            },
            Violation::PendingTrainerUnknown { task_id: 0, trainer: 1 },
        );
        check(|s| job(s).queue.pass = 2, Violation::PassOutOfRange { pass: 2, passes: 2 });
        check(
            |s| job(s).queue.job_finished = true,
            Violation::FinishedWithWork { todo: 2, pending: 1 },
        );
        check(
            |s| {
                let queue = &mut job(s).queue;
                queue.todo.clear();
                queue.pending.clear();
                queue.done.extend([0, 1, 2]);
            },
            Violation::JobStalled { pass: 0 },
        );
        check(
            |s| s.trainers.next_trainer_id = 1,
            Violation::TrainerIdNotIssued { trainer: 1, next_trainer_id: 1 },
        );
        check(
            |s| {
                s.pservers.holders.insert(2, holder("b:1", 1));
            },
            Violation::SlotOutOfRange { slot: 2, desired: Some(2) },
        );
        check(
            |s| {
                s.pservers.holders.insert(1, holder("a:1", 1));
            },
            Violation::AddressHoldsTwoSlots { addr: "a:1".into(), first: 0, second: 1 },
        );
    }

    /// Changes the base state and compares the transition violation found.
    fn check_step(change: fn(&mut JobState), expected: InvariantViolation) {
        let before = base();
        let mut after = before.clone();
        change(&mut after);
        assert_eq!(JobState::check_transition(&before, &after), Err(expected));
    }

    /// Each step that moves something backwards, or changes what is fixed, is caught.
    #[test]
    fn transition_rules() {
        check_step(|s| s.clock_ms = 0, Violation::ClockWentBack { before: 10, after: 0 });
        check_step(
            |s| s.trainers.next_trainer_id = 1,
            Violation::TrainerIdReused { before: 2, after: 1 },
        );
        check_step(
            |s| s.pservers.desired = Some(3),
            Violation::DesiredPServersChanged { before: Some(2), after: Some(3) },
        );
        check_step(|s| s.job = None, Violation::DatasetChanged);
        check_step(|s| job(s).dataset.passes = 3, Violation::DatasetChanged);
        check_step(|s| job(s).shuffle = Some(1), Violation::DatasetChanged);
        check_step(
            |s| job(s).queue.tasks[0].epoch = 0,
            Violation::EpochDecreased { task_id: 0, before: 1, after: 0 },
        );
        let mut finished = base();
        job(&mut finished).queue.job_finished = true;
        assert_eq!(JobState::check_transition(&finished, &base()), Err(Violation::JobUnfinished));
        let mut later = base();
        job(&mut later).queue.pass = 1;
        assert_eq!(
            JobState::check_transition(&later, &base()),
            Err(Violation::PassDecreased { before: 1, after: 0 })
        );
    }
}
