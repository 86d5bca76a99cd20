//! The protobuf status and cluster-info replies as `status`'s typed values. Every field has a
//! typed form, so nothing here can fail: an empty string or a 0 id is "none".

use proto::master as pb;
use proto::raft::ClusterInfoReply;

use crate::status::{
    CheckpointStatus, DatasetKind, EvalStatus, FailedTask, GroupView, JobStatus, Member,
    PServerStatus, TrainerStatus,
};

/// A master's `ClusterInfo` answer.
pub(crate) fn group_view(reply: ClusterInfoReply) -> GroupView {
    GroupView {
        node_id: reply.node_id,
        leader_id: (reply.leader_id != 0).then_some(reply.leader_id),
        leader_addr: (!reply.leader_addr.is_empty()).then_some(reply.leader_addr),
        term: reply.term,
        members: reply
            .members
            .into_iter()
            .map(|member| Member { id: member.id, addr: member.addr, role: member.role })
            .collect(),
        last_log_index: reply.last_log_index,
        last_applied_index: reply.last_applied_index,
        feature_level: reply.feature_level,
        group_feature_level: reply.group_feature_level,
    }
}

/// The leader's `Status` answer.
pub(crate) fn job_status(reply: pb::StatusReply) -> JobStatus {
    let dataset = dataset_kind(&reply);
    JobStatus {
        group: reply.cluster.map(group_view).unwrap_or_default(),
        dataset,
        job: (!reply.job.is_empty()).then_some(reply.job),
        pass: reply.pass_index,
        passes: reply.passes,
        todo: reply.todo,
        pending: reply.pending,
        done: reply.done,
        failed: reply.failed,
        failed_tasks: reply
            .failed_tasks
            .into_iter()
            .map(|task| FailedTask { task_id: task.task_id, reason: task.reason })
            .collect(),
        trainers: reply.trainers.into_iter().map(trainer).collect(),
        pservers_desired: reply.pservers_desired,
        pservers: reply.pservers.into_iter().map(pserver).collect(),
        eval: reply.eval.map(|eval| EvalStatus {
            pass: eval.pass_index,
            loss: eval.loss,
            accuracy: eval.accuracy,
        }),
        job_finished: reply.job_finished,
        job_cancelled: reply.job_cancelled,
        dispatched: reply.dispatched,
        first_chunk: reply.first_chunk.map(crate::conversions::chunk),
    }
}

/// The dataset's kind: none before a report; a master from before kinds (it sends none with
/// a job) knew RecordIO only; a kind this client does not know is shown as none.
fn dataset_kind(reply: &pb::StatusReply) -> Option<DatasetKind> {
    use pb::status_reply::DatasetKind as Kind;
    match Kind::try_from(reply.dataset_kind).ok()? {
        Kind::Unspecified => (!reply.job.is_empty()).then_some(DatasetKind::RecordIo),
        Kind::Recordio => Some(DatasetKind::RecordIo),
        Kind::IndexRange => {
            Some(DatasetKind::IndexRange { size: reply.dataset_size, shard_size: reply.shard_size })
        }
    }
}

fn trainer(trainer: pb::Trainer) -> TrainerStatus {
    TrainerStatus {
        id: trainer.id,
        name: trainer.name,
        last_heartbeat_ms_ago: trainer.last_heartbeat_ms_ago,
        tasks_done: trainer.tasks_done,
    }
}

fn pserver(pserver: pb::PServer) -> PServerStatus {
    let created_ms = pserver.checkpoint_created_ms;
    PServerStatus {
        slot: pserver.index,
        addr: pserver.addr,
        generation: pserver.generation,
        checkpoint: pserver.checkpoint_step.map(|step| CheckpointStatus { step, created_ms }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ChunkRef;

    /// The dataset's kind as status shows it: none before a report, RecordIO from a master
    /// that sends no kind with its job, an index range with its size and shard size.
    #[test]
    fn dataset_kinds_convert() {
        use pb::status_reply::DatasetKind as Kind;
        let reply = |job: &str, kind: Kind| pb::StatusReply {
            job: job.to_string(),
            dataset_kind: kind as i32,
            dataset_size: 1001,
            shard_size: 100,
            ..Default::default()
        };
        let index = DatasetKind::IndexRange { size: 1001, shard_size: 100 };
        let cases = [
            (reply("", Kind::Unspecified), None),
            (reply("job", Kind::Unspecified), Some(DatasetKind::RecordIo)),
            (reply("job", Kind::Recordio), Some(DatasetKind::RecordIo)),
            (reply("job", Kind::IndexRange), Some(index)),
            (pb::StatusReply { dataset_kind: 9, ..reply("job", Kind::Recordio) }, None),
        ];
        for (reply, expected) in cases {
            assert_eq!(job_status(reply.clone()).dataset, expected, "{reply:?}");
        }
    }

    /// The job's first chunk reaches the trainer whole; a master that sends none (an older
    /// one, or an index job) gives none.
    #[test]
    fn the_first_chunk_converts() {
        let chunk =
            pb::Chunk { path: "a.rio".into(), offset: 40, compressed_size: 7, record_count: 3 };
        let reply = pb::StatusReply { first_chunk: Some(chunk), ..Default::default() };
        let expected =
            ChunkRef { path: "a.rio".into(), offset: 40, compressed_size: 7, record_count: 3 };
        assert_eq!(job_status(reply).first_chunk, Some(expected));
        assert_eq!(job_status(pb::StatusReply::default()).first_chunk, None);
    }
}
