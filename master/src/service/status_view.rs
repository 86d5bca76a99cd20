//! The `Status` reply: the applied state's status view plus the cluster as Raft sees it.

use crate::replicated_state::ReplicatedState;
use crate::state::{DatasetKindView, StatusView};
use client::TaskData;
use proto::master as pb;

/// What the leader knows of a trainer beyond the replicated state (its lease table and the
/// progress its heartbeats report).
pub(crate) struct TrainerSoftState {
    pub last_heartbeat_ms_ago: Option<u64>,
    pub tasks_done: Option<u64>,
}

/// The status of `job` (`None`: no job exists yet, an empty one); `soft` gives the leader's
/// soft state of each trainer, by (job, trainer).
pub(crate) fn status_reply(
    state: &ReplicatedState,
    job: Option<u64>,
    cluster: proto::raft::ClusterInfoReply,
    soft: impl Fn((u64, u64)) -> TrainerSoftState,
) -> pb::StatusReply {
    let job_id = job.unwrap_or_default();
    let view = job.and_then(|job| state.status(job)).unwrap_or_else(|| state.state().status());
    let failed_tasks = view
        .failed_tasks
        .iter()
        .map(|task| pb::FailedTask { task_id: task.task_id, reason: task.reason.clone() })
        .collect();
    let trainers = view
        .trainers
        .iter()
        .map(|trainer| {
            let soft = soft((job_id, trainer.trainer));
            pb::Trainer {
                id: trainer.trainer,
                name: trainer.name.clone(),
                last_heartbeat_ms_ago: soft.last_heartbeat_ms_ago,
                tasks_done: soft.tasks_done,
            }
        })
        .collect();
    let pservers = view
        .pservers
        .iter()
        .filter_map(|slot| {
            let holder = slot.holder.clone()?;
            Some(pb::PServer {
                index: slot.slot,
                addr: holder.addr,
                generation: holder.generation,
                checkpoint_step: slot.checkpoint.as_ref().map(|meta| meta.step),
                checkpoint_created_ms: slot.checkpoint.as_ref().map_or(0, |meta| meta.created_ms),
            })
        })
        .collect();
    let eval = view.eval.as_ref().map(|eval| pb::Eval {
        pass_index: eval.pass,
        loss: eval.loss(),
        accuracy: eval.accuracy(),
    });
    let (dataset_kind, dataset_size, shard_size) = dataset_kind(&view);
    let first_chunk = job.and_then(|job| first_chunk(state, job));
    pb::StatusReply {
        cluster: Some(cluster),
        job: view.job.clone().unwrap_or_default(),
        pass_index: view.pass,
        passes: view.passes,
        todo: view.todo_count,
        pending: view.pending_count,
        done: view.done_count,
        failed: view.failed_count,
        failed_tasks,
        trainers,
        pservers_desired: view.pservers_desired.unwrap_or(0),
        pservers,
        eval,
        job_finished: view.job_finished,
        job_cancelled: view.job_cancelled,
        dispatched: view.dispatched_count,
        dataset_kind: dataset_kind as i32,
        dataset_size,
        shard_size,
        first_chunk,
    }
}

/// The first chunk of `job`'s RecordIO dataset, if it has one: what a trainer joining the job
/// without `--dataset` reads its feature count from (the masters keep the files, not the
/// patterns that named them).
fn first_chunk(state: &ReplicatedState, job: u64) -> Option<pb::Chunk> {
    match state.job(job)?.task_data(0)? {
        TaskData::Chunks(chunks) => chunks.first().map(super::conversions::chunk),
        TaskData::IndexRange { .. } => None,
    }
}

/// The dataset's kind, and an index dataset's size and shard size (0 for RecordIO).
fn dataset_kind(view: &StatusView) -> (pb::status_reply::DatasetKind, u64, u64) {
    use pb::status_reply::DatasetKind as Kind;
    match view.dataset {
        None => (Kind::Unspecified, 0, 0),
        Some(DatasetKindView::RecordIo) => (Kind::Recordio, 0, 0),
        Some(DatasetKindView::IndexRange { size, shard_size }) => {
            (Kind::IndexRange, size, shard_size)
        }
    }
}
