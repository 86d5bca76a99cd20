//! The largest state the admission limits allow, built field by field and measured: every
//! limit must agree with the snapshot limit, or the group would accept a job and then fail to
//! snapshot it (which stopped every replica for good before the limits were derived). Both
//! kinds of job are measured: a RecordIO job stores its chunks besides its queue, an index
//! job only its queue, with the same task limit. The group holds [`JOB_COUNT_MAX`] jobs: one
//! takes what the group's limits leave after the others, each of which holds what any job
//! holds however small (its stranger sessions, its floors of failure reasons and failers,
//! its progress checkpoints). The largest job also keeps every slot's checkpoint for each
//! progress checkpoint that keeps them, with a restore waiting for every slot.

#![cfg(test)]

use super::chunk_list::ChunkList;
use super::codec::SNAPSHOT_BYTES_MAX;
use super::dataset::{
    ChunkRef, Dataset, QueuePolicy, DATASET_PATH_BYTES_MAX, JOB_NAME_BYTES_MAX, TASK_COUNT_MAX,
};
use super::job::Job;
use super::job_state::JobState;
use super::master_state::{MasterState, JOB_COUNT_MAX};
use super::model_checkpoints::{ModelCheckpoints, PendingRestore, ProgressTags, MODEL_TAGS_KEPT};
use super::progress::{DoneSet, PROGRESS_CHECKPOINTS_KEPT};
use super::pserver_slots::{
    CheckpointMeta, PServerSlots, SlotHolder, CHECKPOINT_PATH_BYTES_MAX, PSERVER_ADDR_BYTES_MAX,
    PSERVER_COUNT_MAX,
};
use super::rendezvous_op::{
    RendezvousEntry, RendezvousReply, KEYS_PER_RUN_MAX, RUN_BYTES_MAX, RUN_COUNT_MAX,
    RUN_ID_BYTES_MAX, RUN_SESSION_COUNT_MAX,
};
use super::rendezvous_run::RendezvousRun;
use super::rendezvous_space::RendezvousSpace;
use super::request::ClientStamp;
use super::response::{Response, TaskAssignment};
use super::sessions::{Member, Sessions, STRANGER_SESSION_COUNT_MAX};
use super::task::PendingTask;
use super::task_queue::{TaskQueue, FAILURE_REASONS_BYTES_FLOOR, FAILURE_REASON_BYTES_MAX};
use super::trainer_registry::{TRAINER_COUNT_MAX, TRAINER_NAME_BYTES_MAX};
use client::SlotSecret;
use std::collections::BTreeMap;

/// One file per chunk (so file indices take their widest varints), with paths that use the
/// whole path budget, and offsets, sizes and counts at their widest.
fn largest_chunks(chunk_count: u64) -> ChunkList {
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
fn largest_queue(task_count: u64, trainers: u64) -> TaskQueue {
    let mut queue = TaskQueue::new(task_count, Some(u64::MAX));
    let reason = "r".repeat(FAILURE_REASON_BYTES_MAX);
    let reasons = queue.reasons_bytes_max() / FAILURE_REASON_BYTES_MAX as u64;
    for (index, task) in queue.tasks.iter_mut().enumerate() {
        task.epoch = u64::MAX / 2;
        task.failures = u32::MAX;
        task.timeouts = u32::MAX;
        if (index as u64) < reasons {
            task.last_failure = Some(reason.clone());
        }
    }
    queue.reason_bytes = reasons * FAILURE_REASON_BYTES_MAX as u64;
    for trainer in 1..=trainers {
        let task_id = queue.todo.pop_front().expect("more tasks than trainers");
        let pending = PendingTask {
            epoch: u64::MAX / 2,
            trainer,
            dispatched_at_ms: u64::MAX / 4,
            deadline_ms: u64::MAX / 2,
        };
        queue.pending.insert(task_id, pending);
        queue.held.insert(trainer, task_id);
    }
    // One pair per task spends the most bytes: a key and a set length for every pair.
    let failers = queue.failers_count_max();
    for pair in 0..failers {
        let trainer = u64::MAX - pair;
        queue.failers.by_task.entry(pair % task_count).or_default().insert(trainer);
    }
    queue.failers.count = failers;
    queue.completion_ms_average = Some(u64::MAX);
    queue.pass = u32::MAX - 1;
    queue
}

fn largest_slots() -> PServerSlots {
    let mut slots = PServerSlots { desired: Some(PSERVER_COUNT_MAX), ..PServerSlots::default() };
    for slot in 0..PSERVER_COUNT_MAX {
        let addr = format!("{slot:0width$}:1", width = PSERVER_ADDR_BYTES_MAX - 2);
        let generation = u64::MAX / 2 + u64::from(slot);
        slots.holders.insert(slot, SlotHolder { addr, generation });
        slots.secrets.insert(slot, SlotSecret::from_bits(u128::MAX));
        let path = "c".repeat(CHECKPOINT_PATH_BYTES_MAX);
        let meta = CheckpointMeta { path, step: u64::MAX, crc32: u32::MAX, created_ms: u64::MAX };
        slots.checkpoints.insert(slot, meta);
    }
    slots.next_generation = u64::MAX;
    slots
}

/// Both pools full: a member session per trainer and per slot, and every stranger's, each
/// keeping the largest answer a session keeps (a task assignment).
fn largest_sessions(members: bool) -> Sessions {
    let mut sessions = Sessions::default();
    let response = Response::Task(TaskAssignment {
        task_id: u64::MAX,
        epoch: u64::MAX,
        pass: u32::MAX,
        deadline_ms: u64::MAX,
    });
    let trainers = (1..=TRAINER_COUNT_MAX as u64).map(Member::Trainer);
    let slots = (0..PSERVER_COUNT_MAX)
        .map(|slot| Member::Slot { slot, generation: u64::MAX / 2 + u64::from(slot) });
    let members = trainers.chain(slots).map(Some).filter(|_| members);
    let strangers = std::iter::repeat_n(None, STRANGER_SESSION_COUNT_MAX);
    for (count, member) in members.chain(strangers).enumerate() {
        let client_id = u64::MAX - count as u64;
        let stamp = ClientStamp { client_id, seq: u64::MAX };
        sessions.record(stamp, u64::MAX, &response, member, u64::MAX / 2 + count as u64);
    }
    sessions
}

/// The largest rendezvous key space: every run with the most keys, filling its bytes, the
/// widest versions, and every session kept.
fn largest_rendezvous() -> RendezvousSpace {
    let pair_bytes = (RUN_BYTES_MAX / KEYS_PER_RUN_MAX as u64) as usize;
    let mut space = RendezvousSpace::default();
    for index in 0..RUN_COUNT_MAX {
        let mut run = RendezvousRun::new(u64::MAX / 2);
        for key in 0..KEYS_PER_RUN_MAX {
            let key = format!("{key:0width$}", width = pair_bytes / 2);
            let value = vec![0xAB; pair_bytes - key.len()];
            let version = u64::MAX / 2 + run.keys.len() as u64;
            run.bytes += (key.len() + value.len()) as u64;
            run.keys.insert(key, RendezvousEntry { value, version });
        }
        run.next_version = u64::MAX / 2 + KEYS_PER_RUN_MAX as u64;
        let entry = Some(RendezvousEntry { value: Vec::new(), version: u64::MAX });
        let response = Response::Rendezvous(RendezvousReply::Written { entry, set: true });
        for count in 0..RUN_SESSION_COUNT_MAX {
            let stamp = ClientStamp { client_id: u64::MAX - count as u64, seq: u64::MAX };
            run.sessions.record(stamp, u64::MAX, &response, None, u64::MAX / 2 + count as u64);
        }
        space.runs.insert(format!("{index:0width$}", width = RUN_ID_BYTES_MAX), run);
    }
    space.check().expect("the largest key space is within its bounds");
    space
}

/// The tasks each of the group's other jobs has: enough to hold the floor of failure reasons.
const SMALL_JOB_TASKS: u64 = FAILURE_REASONS_BYTES_FLOOR / FAILURE_REASON_BYTES_MAX as u64;
/// What the group's task limit leaves the largest job.
const LARGEST_JOB_TASKS: u64 = TASK_COUNT_MAX - SMALL_JOB_TASKS * (JOB_COUNT_MAX as u64 - 1);

/// A job name of the widest length, distinct per `index`.
fn job_name(index: usize) -> String {
    format!("{index:0width$}", width = JOB_NAME_BYTES_MAX)
}

/// The largest RecordIO dataset: every chunk its own task.
fn largest_recordio_dataset() -> Dataset {
    Dataset::recordio(&job_name(0), largest_chunks(LARGEST_JOB_TASKS), u32::MAX, policy())
        .expect("the largest admitted dataset is valid")
}

/// The largest index dataset of `task_count` tasks, with the widest size.
fn index_dataset(index: usize, task_count: u64) -> Dataset {
    let shard_size = u64::MAX.div_ceil(task_count);
    let dataset = Dataset::index_range(&job_name(index), u64::MAX, shard_size, u32::MAX, policy())
        .expect("the largest admitted index dataset is valid");
    assert_eq!(dataset.task_count(), task_count, "the index dataset has its tasks");
    dataset
}

/// A job with `dataset`; with `members`, every trainer and slot the group admits.
fn largest_job(dataset: Dataset, members: bool) -> JobState {
    let trainers = if members { TRAINER_COUNT_MAX as u64 } else { 0 };
    let queue = largest_queue(dataset.task_count(), trainers);
    let task_count = dataset.task_count();
    let mut state = JobState::new();
    state.name = dataset.job.clone();
    state.clock_ms = u64::MAX / 2;
    state.job = Some(Job { dataset, queue, shuffle: Some(u64::MAX) });
    let name = "n".repeat(TRAINER_NAME_BYTES_MAX);
    state.trainers.trainers = (1..=trainers).map(|id| (id, name.clone())).collect();
    state.trainers.next_trainer_id = u64::MAX;
    if members {
        state.pservers = largest_slots();
        state.models = largest_models(&state.pservers);
    }
    state.sessions = largest_sessions(members);
    let done = DoneSet::new(task_count, 0..task_count);
    for _ in 0..PROGRESS_CHECKPOINTS_KEPT {
        state.progress.record(u32::MAX - 1, done.clone(), u64::MAX / 2);
    }
    state
}

/// Every slot's widest checkpoint tagged for each progress checkpoint that keeps them, and a
/// restore waiting for every slot.
fn largest_models(slots: &PServerSlots) -> ModelCheckpoints {
    let mut models = ModelCheckpoints::default();
    for id in 0..MODEL_TAGS_KEPT as u64 {
        let holders = slots.holders.keys().map(|slot| (*slot, u64::MAX)).collect();
        let files = slots.checkpoints.clone();
        models.tagged.insert(u64::MAX - id, ProgressTags { holders, files });
    }
    let waiting = slots.checkpoints.clone();
    models.restoring = Some(PendingRestore { checkpoint: u64::MAX, number: u64::MAX, waiting });
    models.restores_asked = u64::MAX;
    models
}

/// The largest group: the largest job of `first`'s kind, and every other job.
fn largest_state(first: Dataset) -> MasterState {
    let mut jobs = BTreeMap::from([(1, largest_job(first, true))]);
    for index in 1..JOB_COUNT_MAX {
        let job = largest_job(index_dataset(index, SMALL_JOB_TASKS), false);
        jobs.insert(index as u64 + 1, job);
    }
    MasterState {
        clock_ms: u64::MAX / 2,
        jobs,
        next_job_id: u64::MAX,
        rendezvous: largest_rendezvous(),
        feature_level: u32::MAX,
    }
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
    let index = check_fits("an index job", &largest_state(index_dataset(0, LARGEST_JOB_TASKS)));
    assert!(index < recordio, "an index job ({index} bytes) outgrew a RecordIO one ({recordio})");
}
