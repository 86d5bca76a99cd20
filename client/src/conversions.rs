//! Every conversion between the master's protobuf replies and `MasterClient`'s typed values,
//! in one place. An answer that does not convert is `ClientError::Malformed`, never a panic.

use super::error::ClientError;
use super::slot_asks::{SlotAsks, SlotReload};
use super::types::{
    CheckpointMeta, ChunkRef, DatasetSizes, PServerEntry, PServerTable, SlotLease, SlotSecret,
    Task, TaskData, TaskOutcome,
};
use proto::master as pb;
use proto::master::get_task_reply::Outcome;

fn malformed(call: &'static str, reason: impl Into<String>) -> ClientError {
    ClientError::Malformed { call, reason: reason.into() }
}

pub(crate) fn task_outcome(reply: pb::GetTaskReply) -> Result<TaskOutcome, ClientError> {
    let outcome = Outcome::try_from(reply.outcome)
        .map_err(|_| malformed("GetTask", format!("unknown outcome {}", reply.outcome)))?;
    let current = reply.current_pass;
    Ok(match outcome {
        Outcome::Task => {
            let task = reply.task.ok_or_else(|| malformed("GetTask", "TASK without a task"))?;
            TaskOutcome::Task(task_from_proto(task)?)
        }
        Outcome::PassBefore => TaskOutcome::PassBefore { current },
        Outcome::PassAfter => TaskOutcome::PassAfter { current },
        Outcome::NoMoreAvailable => TaskOutcome::NoMoreAvailable,
        Outcome::JobFinished => TaskOutcome::JobFinished,
        Outcome::NoDataset => TaskOutcome::NoDataset,
        Outcome::UnknownTrainer => TaskOutcome::UnknownTrainer,
        Outcome::JobCancelled => TaskOutcome::JobCancelled,
        Outcome::Unspecified => return Err(malformed("GetTask", "no outcome")),
    })
}

/// A task as the master sent it: a chunk task carries chunks, a range task a non-empty range
/// and no chunks; anything else is malformed.
fn task_from_proto(task: pb::Task) -> Result<Task, ClientError> {
    let kind = pb::task::Kind::try_from(task.kind)
        .map_err(|_| malformed("GetTask", format!("task of unknown kind {}", task.kind)))?;
    let data = match kind {
        pb::task::Kind::Chunks => TaskData::Chunks(task.chunks.into_iter().map(chunk).collect()),
        pb::task::Kind::IndexRange => index_range(&task)?,
    };
    Ok(Task {
        task_id: task.task_id,
        epoch: task.epoch,
        pass: task.pass_index,
        data,
        deadline_ms: task.deadline_ms,
        shuffle_seed: task.shuffle_seed,
    })
}

pub(crate) fn chunk(chunk: pb::Chunk) -> ChunkRef {
    ChunkRef {
        path: chunk.path,
        offset: chunk.offset,
        compressed_size: chunk.compressed_size,
        record_count: chunk.record_count,
    }
}

fn index_range(task: &pb::Task) -> Result<TaskData, ClientError> {
    let (start, end) = (task.range_start, task.range_end);
    if start >= end {
        return Err(malformed(
            "GetTask",
            format!("index range task with empty range {start}..{end}"),
        ));
    }
    if !task.chunks.is_empty() {
        return Err(malformed("GetTask", "index range task with chunks"));
    }
    Ok(TaskData::IndexRange { start, end })
}

/// A claim's answer: `None` when every slot is held.
pub(crate) fn slot_lease(
    reply: pb::ClaimPServerSlotReply,
    secret: SlotSecret,
) -> Result<Option<SlotLease>, ClientError> {
    if !reply.granted {
        return Ok(None);
    }
    if reply.generation == 0 {
        return Err(malformed("ClaimPServerSlot", "a granted slot without a generation"));
    }
    Ok(Some(SlotLease {
        slot: reply.index,
        generation: reply.generation,
        secret,
        lease_ms: reply.lease_ms,
        checkpoint: reply.checkpoint.map(checkpoint_from_proto),
        job_id: reply.job_id,
        model_restore: reply.model_restore,
    }))
}

pub(crate) fn checkpoint_from_proto(meta: pb::CheckpointMeta) -> CheckpointMeta {
    CheckpointMeta {
        path: meta.path,
        step: meta.step,
        crc32: meta.crc32,
        created_ms: meta.created_ms,
    }
}

/// The request form of a checkpoint: the service's conversion, the same in both directions.
/// The wire form of checkpoint metadata (the master's replies and the pserver's records).
pub fn checkpoint_to_proto(meta: &CheckpointMeta) -> pb::CheckpointMeta {
    pb::CheckpointMeta {
        path: meta.path.clone(),
        step: meta.step,
        crc32: meta.crc32,
        created_ms: meta.created_ms,
    }
}

/// What a heartbeat reply of a holder asks of it.
pub(crate) fn slot_asks(reply: pb::PServerHeartbeatReply) -> SlotAsks {
    let reload = match (reply.reload_restore, reply.reload_from) {
        (0, _) | (_, None) => None,
        (restore, Some(from)) => Some(SlotReload { restore, from: checkpoint_from_proto(from) }),
    };
    let tag_for = (reply.checkpoint_for_progress != 0).then_some(reply.checkpoint_for_progress);
    SlotAsks { tag_for, reload, tags_from: reply.tags_from }
}

pub(crate) fn pserver_table(reply: pb::ListPServersReply) -> PServerTable {
    let pservers = reply
        .pservers
        .into_iter()
        .map(|pserver| PServerEntry {
            slot: pserver.index,
            addr: pserver.addr,
            generation: pserver.generation,
        })
        .collect();
    PServerTable { desired: reply.desired, pservers }
}

pub(crate) fn dataset_sizes(reply: pb::ReportDatasetReply) -> DatasetSizes {
    DatasetSizes {
        task_count: reply.task_count,
        chunk_count: reply.chunk_count,
        record_count: reply.record_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Malformed answers are errors naming what is wrong; good ones convert.
    #[test]
    fn malformed_answers_are_errors() {
        let reply = |outcome: i32, task: Option<pb::Task>| pb::GetTaskReply {
            outcome,
            task,
            current_pass: 3,
            finished_accepted: Vec::new(),
        };
        assert!(task_outcome(reply(99, None)).is_err(), "an unknown outcome");
        assert!(task_outcome(reply(0, None)).is_err(), "no outcome");
        assert!(task_outcome(reply(Outcome::Task as i32, None)).is_err(), "TASK without a task");
        let pass_after = task_outcome(reply(Outcome::PassAfter as i32, None)).expect("converts");
        assert_eq!(pass_after, TaskOutcome::PassAfter { current: 3 });
        let task =
            pb::Task { task_id: 4, epoch: 2, pass_index: 3, deadline_ms: 9, ..Default::default() };
        let converted = task_outcome(reply(Outcome::Task as i32, Some(task))).expect("converts");
        let data = TaskData::Chunks(vec![]);
        let expected =
            Task { task_id: 4, epoch: 2, pass: 3, data, deadline_ms: 9, shuffle_seed: None };
        assert_eq!(converted, TaskOutcome::Task(expected));
        let claim = |granted, generation| pb::ClaimPServerSlotReply {
            granted,
            index: 1,
            lease_ms: 5,
            checkpoint: None,
            generation,
            job_id: 3,
            model_restore: 2,
        };
        let secret = SlotSecret::from_bits(9);
        assert!(slot_lease(claim(true, 0), secret).is_err(), "a granted slot without a generation");
        assert_eq!(slot_lease(claim(false, 0), secret).expect("converts"), None);
        let lease = slot_lease(claim(true, 7), secret).expect("converts").expect("granted");
        assert_eq!((lease.slot, lease.generation, lease.lease_ms, lease.job_id), (1, 7, 5, 3));
        assert_eq!(lease.model_restore, 2);
        assert_eq!(lease.secret, secret, "the caller's own secret");
    }

    /// A range task converts to its range; one with an empty or inverted range, with chunks
    /// beside its range, or of a kind this client does not know is malformed. A task from a
    /// master that sends no kind is a chunk task.
    #[test]
    fn index_range_tasks_convert_and_malformed_ones_are_refused() {
        let range_kind = pb::task::Kind::IndexRange as i32;
        let task = |kind, range_start, range_end, chunks: Vec<pb::Chunk>| pb::Task {
            task_id: 1,
            epoch: 1,
            kind,
            range_start,
            range_end,
            chunks,
            ..Default::default()
        };
        let convert = |task| task_from_proto(task).map(|task| task.data);
        let range = convert(task(range_kind, 10, 20, vec![])).expect("converts");
        assert_eq!(range, TaskData::IndexRange { start: 10, end: 20 });
        let chunk = pb::Chunk { path: "a".into(), offset: 0, compressed_size: 1, record_count: 1 };
        let old_master = convert(task(0, 0, 0, vec![chunk.clone()])).expect("converts");
        assert!(matches!(old_master, TaskData::Chunks(chunks) if chunks.len() == 1));
        assert!(convert(task(range_kind, 5, 5, vec![])).is_err(), "an empty range");
        assert!(convert(task(range_kind, 6, 5, vec![])).is_err(), "an inverted range");
        assert!(convert(task(range_kind, 0, 5, vec![chunk])).is_err(), "a range with chunks");
        assert!(convert(task(7, 0, 5, vec![])).is_err(), "an unknown kind");
    }
}
