//! The largest state the admission limits allow, built field by field and measured: every
//! limit must agree with the snapshot limit, or the group would accept a job and then fail to
//! snapshot it (which stopped every replica for good before the limits were derived). Both
//! kinds of job are measured: a RecordIO job stores its chunks besides its queue, an index
//! job only its queue, with the same task limit.

#![cfg(test)]

use super::chunk_list::ChunkList;
use super::codec::SNAPSHOT_BYTES_MAX;
use super::dataset::{
    ChunkRef, Dataset, QueuePolicy, CHUNK_COUNT_MAX, DATASET_PATH_BYTES_MAX, TASK_COUNT_MAX,
};
use super::failers::FAILERS_COUNT_MAX;
use super::job::Job;
use super::master_state::MasterState;
use super::pserver_slots::{
    CheckpointMeta, PServerSlots, SlotHolder, CHECKPOINT_PATH_BYTES_MAX, PSERVER_ADDR_BYTES_MAX,
    PSERVER_COUNT_MAX,
};
use super::request::ClientStamp;
use super::response::{Response, TaskAssignment};
use super::sessions::{Member, Sessions, SESSION_COUNT_MAX, STRANGER_SESSION_COUNT_MAX};
use super::task::PendingTask;
use super::task_queue::{TaskQueue, FAILURE_REASONS_BYTES_MAX, FAILURE_REASON_BYTES_MAX};
use super::trainer_registry::{TRAINER_COUNT_MAX, TRAINER_NAME_BYTES_MAX};
use client::SlotSecret;

/// One file per chunk (so file indices take their widest varints), with paths that use the
/// whole path budget, and offsets, sizes and counts at their widest.
fn largest_chunks() -> ChunkList {
    let chunk_count = CHUNK_COUNT_MAX as u64;
    let path_bytes = usize::try_from(DATASET_PATH_BYTES_MAX / chunk_count).expect("small");
    let mut list = ChunkList::default();
    for index in 0..chunk_count {
        let mut path = format!("{index:0width$}", width = path_bytes);
        path.truncate(path_bytes);
        list.push(&ChunkRef {
            path,
            offset: u64::MAX - index,
            compressed_size: u32::MAX,
            record_count: u32::MAX,
        });
    }
    list
}

fn policy() -> QueuePolicy {
    QueuePolicy {
        chunks_per_task: 1,
        task_timeout_min_ms: u64::MAX / 4,
        timeout_factor: u32::MAX,
        max_task_failures: u32::MAX,
        retry_failed_next_pass: true,
    }
}

/// Every task with the widest counters, the reason budget spent, and one pending task per
/// trainer.
fn largest_queue(task_count: u64) -> TaskQueue {
    let mut queue = TaskQueue::new(task_count);
    let reason = "r".repeat(FAILURE_REASON_BYTES_MAX);
    let reasons = FAILURE_REASONS_BYTES_MAX / FAILURE_REASON_BYTES_MAX as u64;
    for (index, task) in queue.tasks.iter_mut().enumerate() {
        task.epoch = u64::MAX / 2;
        task.failures = u32::MAX;
        task.timeouts = u32::MAX;
        if (index as u64) < reasons {
            task.last_failure = Some(reason.clone());
        }
    }
    queue.reason_bytes = reasons * FAILURE_REASON_BYTES_MAX as u64;
    for trainer in 1..=TRAINER_COUNT_MAX as u64 {
        let task = queue.todo.pop_front().expect("more tasks than trainers");
        let pending = PendingTask {
            epoch: u64::MAX / 2,
            trainer,
            dispatched_at_ms: u64::MAX / 4,
            deadline_ms: u64::MAX / 2,
        };
        queue.pending.insert(task, pending);
        queue.held.insert(trainer, task);
    }
    // One pair per task spends the most bytes: a key and a set length for every pair.
    for pair in 0..FAILERS_COUNT_MAX {
        let trainer = u64::MAX - pair;
        queue.failers.by_task.entry(pair).or_default().insert(trainer);
    }
    queue.failers.count = FAILERS_COUNT_MAX;
    queue.completion_ms_average = Some(u64::MAX);
    queue.pass = u32::MAX - 1;
    queue
}

fn largest_slots() -> PServerSlots {
    let mut slots = PServerSlots { desired: Some(PSERVER_COUNT_MAX), ..PServerSlots::default() };
    for index in 0..PSERVER_COUNT_MAX {
        let addr = format!("{index:0width$}:1", width = PSERVER_ADDR_BYTES_MAX - 2);
        let generation = u64::MAX / 2 + u64::from(index);
        slots.holders.insert(index, SlotHolder { addr, generation });
        slots.secrets.insert(index, SlotSecret::from_bits(u128::MAX));
        let path = "c".repeat(CHECKPOINT_PATH_BYTES_MAX);
        let meta = CheckpointMeta { path, step: u64::MAX, crc32: u32::MAX, created_ms: u64::MAX };
        slots.checkpoints.insert(index, meta);
    }
    slots.next_generation = u64::MAX;
    slots
}

/// Both pools full: a member session per trainer and per slot, and every stranger's, each
/// keeping the largest answer a session keeps (a task assignment).
fn largest_sessions() -> Sessions {
    let mut sessions = Sessions::default();
    let response = Response::Task(TaskAssignment {
        task: u64::MAX,
        epoch: u64::MAX,
        pass: u32::MAX,
        deadline_ms: u64::MAX,
    });
    let trainers = (1..=TRAINER_COUNT_MAX as u64).map(Member::Trainer);
    let slots = (0..PSERVER_COUNT_MAX)
        .map(|index| Member::Slot { index, generation: u64::MAX / 2 + u64::from(index) });
    let members = trainers.chain(slots).map(Some);
    let strangers = std::iter::repeat_n(None, STRANGER_SESSION_COUNT_MAX);
    for (count, member) in members.chain(strangers).enumerate() {
        let client_id = u64::MAX - count as u64;
        let stamp = ClientStamp { client_id, seq: u64::MAX };
        sessions.record(stamp, u64::MAX, &response, member, u64::MAX / 2 + count as u64);
    }
    assert_eq!(sessions.sessions.len(), SESSION_COUNT_MAX, "both pools are full");
    sessions
}

/// The largest RecordIO dataset: every chunk its own task.
fn largest_recordio_dataset() -> Dataset {
    Dataset::recordio(&"j".repeat(256), largest_chunks(), u32::MAX, policy())
        .expect("the largest admitted dataset is valid")
}

/// The largest index dataset: the task limit reached with the widest size.
fn largest_index_dataset() -> Dataset {
    let shard_size = u64::MAX.div_ceil(TASK_COUNT_MAX);
    let dataset = Dataset::index_range(&"j".repeat(256), u64::MAX, shard_size, u32::MAX, policy())
        .expect("the largest admitted index dataset is valid");
    assert_eq!(dataset.task_count(), TASK_COUNT_MAX, "the index dataset reaches the task limit");
    dataset
}

fn largest_state(dataset: Dataset) -> MasterState {
    let queue = largest_queue(dataset.task_count());
    let mut state = MasterState::new();
    state.clock_ms = u64::MAX / 2;
    state.job = Some(Job { dataset, queue });
    let name = "n".repeat(TRAINER_NAME_BYTES_MAX);
    state.trainers.trainers = (1..=TRAINER_COUNT_MAX as u64).map(|id| (id, name.clone())).collect();
    state.trainers.next_trainer_id = u64::MAX;
    state.pservers = largest_slots();
    state.sessions = largest_sessions();
    state
}

/// Checks that `state` is valid, encodes below the snapshot limit and decodes back whole;
/// its size in bytes.
fn check_fits(kind: &str, state: &MasterState) -> u64 {
    state.check_invariants().expect("the largest state is a valid one");
    let bytes = state.encode();
    let size = bytes.len() as u64;
    assert!(
        size <= SNAPSHOT_BYTES_MAX,
        "{kind}: {size} bytes > SNAPSHOT_BYTES_MAX {SNAPSHOT_BYTES_MAX}"
    );
    eprintln!("the largest admitted state of {kind} encodes to {size} bytes");
    let decoded = MasterState::decode(&bytes).expect("the largest state decodes");
    assert_eq!(&decoded, state);
    size
}

/// The largest admitted state of either kind of job encodes below the snapshot limit, and
/// decodes back whole; an index job's is the smaller (the same queue, no chunks).
#[test]
fn the_largest_admitted_state_fits_a_snapshot() {
    let recordio = check_fits("a RecordIO job", &largest_state(largest_recordio_dataset()));
    let index = check_fits("an index job", &largest_state(largest_index_dataset()));
    assert!(index < recordio, "an index job ({index} bytes) outgrew a RecordIO one ({recordio})");
}
