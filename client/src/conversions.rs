//! Every conversion between the master's protobuf replies and `MasterClient`'s typed values,
//! in one place. An answer that does not convert is `ClientError::Malformed`, never a panic.

use super::error::ClientError;
use super::types::{
    CheckpointMeta, ChunkRef, DatasetSizes, PServerEntry, PServerTable, SlotLease, SlotSecret,
    Task, TaskOutcome,
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
            TaskOutcome::Task(task_from_proto(task))
        }
        Outcome::PassBefore => TaskOutcome::PassBefore { current },
        Outcome::PassAfter => TaskOutcome::PassAfter { current },
        Outcome::NoMoreAvailable => TaskOutcome::NoMoreAvailable,
        Outcome::JobFinished => TaskOutcome::JobFinished,
        Outcome::NoDataset => TaskOutcome::NoDataset,
        Outcome::UnknownTrainer => TaskOutcome::UnknownTrainer,
        Outcome::Unspecified => return Err(malformed("GetTask", "no outcome")),
    })
}

fn task_from_proto(task: pb::Task) -> Task {
    let chunks = task
        .chunks
        .into_iter()
        .map(|chunk| ChunkRef {
            path: chunk.path,
            offset: chunk.offset,
            compressed_size: chunk.compressed_size,
            record_count: chunk.record_count,
        })
        .collect();
    Task {
        id: task.task_id,
        epoch: task.epoch,
        pass: task.pass,
        chunks,
        deadline_ms: task.deadline_ms,
    }
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
        index: reply.index,
        generation: reply.generation,
        secret,
        lease_ms: reply.lease_ms,
        checkpoint: reply.checkpoint.map(checkpoint_from_proto),
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

pub(crate) fn pserver_table(reply: pb::ListPServersReply) -> PServerTable {
    let pservers = reply
        .pservers
        .into_iter()
        .map(|pserver| PServerEntry {
            index: pserver.index,
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
        };
        assert!(task_outcome(reply(99, None)).is_err(), "an unknown outcome");
        assert!(task_outcome(reply(0, None)).is_err(), "no outcome");
        assert!(task_outcome(reply(Outcome::Task as i32, None)).is_err(), "TASK without a task");
        let pass_after = task_outcome(reply(Outcome::PassAfter as i32, None)).expect("converts");
        assert_eq!(pass_after, TaskOutcome::PassAfter { current: 3 });
        let task = pb::Task { task_id: 4, epoch: 2, pass: 3, chunks: vec![], deadline_ms: 9 };
        let converted = task_outcome(reply(Outcome::Task as i32, Some(task))).expect("converts");
        let expected = Task { id: 4, epoch: 2, pass: 3, chunks: vec![], deadline_ms: 9 };
        assert_eq!(converted, TaskOutcome::Task(expected));
        let claim = |granted, generation| pb::ClaimPServerSlotReply {
            granted,
            index: 1,
            lease_ms: 5,
            checkpoint: None,
            generation,
        };
        let secret = SlotSecret::from_bits(9);
        assert!(slot_lease(claim(true, 0), secret).is_err(), "a granted slot without a generation");
        assert_eq!(slot_lease(claim(false, 0), secret).expect("converts"), None);
        let lease = slot_lease(claim(true, 7), secret).expect("converts").expect("granted");
        assert_eq!((lease.index, lease.generation, lease.lease_ms), (1, 7, 5));
        assert_eq!(lease.secret, secret, "the caller's own secret");
    }
}
