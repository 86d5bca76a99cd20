//! The job as snapshots before dataset kinds wrote it (layouts 1 to 3: RecordIO chunks were
//! the only kind), the state as layout 3 wrote it, and their conversion: the dataset becomes a
//! RecordIO one, unchanged.

use serde::{Deserialize, Serialize};

use super::chunk_list::ChunkList;
use super::dataset::{Dataset, DatasetKind, QueuePolicy};
use super::dataset_loading::DatasetLoading;
use super::eval::EvalRecord;
use super::pserver_slots::PServerSlots;
use super::sessions::Sessions;
use super::snapshot_legacy_single_job::SingleJobState;
use super::snapshot_legacy_unshuffled::UnshuffledJob;
use super::task_queue::TaskQueue;
use super::trainer_registry::TrainerRegistry;

/// A dataset before kinds (field for field): RecordIO chunks and their digest.
#[derive(Serialize, Deserialize)]
pub(super) struct ChunksOnlyDataset {
    pub(super) job: String,
    pub(super) chunks: ChunkList,
    pub(super) passes: u32,
    pub(super) policy: QueuePolicy,
    pub(super) digest: u64,
}

impl From<ChunksOnlyDataset> for Dataset {
    fn from(old: ChunksOnlyDataset) -> Self {
        let ChunksOnlyDataset { job, chunks, passes, policy, digest } = old;
        Dataset { job, passes, policy, kind: DatasetKind::RecordIo { chunks, digest } }
    }
}

/// A job of layouts 2 and 3 (field for field).
#[derive(Serialize, Deserialize)]
pub(super) struct ChunksOnlyJob {
    pub(super) dataset: ChunksOnlyDataset,
    pub(super) queue: TaskQueue,
}

impl From<ChunksOnlyJob> for UnshuffledJob {
    fn from(old: ChunksOnlyJob) -> Self {
        UnshuffledJob { dataset: old.dataset.into(), queue: old.queue }
    }
}

/// The state as layout 3 wrote it (field for field): this build's, with a chunks-only job.
#[derive(Serialize, Deserialize)]
pub(super) struct ChunksOnlyState {
    pub(super) clock_ms: u64,
    pub(super) job: Option<ChunksOnlyJob>,
    pub(super) trainers: TrainerRegistry,
    pub(super) pservers: PServerSlots,
    pub(super) eval: Option<EvalRecord>,
    pub(super) sessions: Sessions,
    pub(super) loading: Option<DatasetLoading>,
}

impl From<ChunksOnlyState> for SingleJobState {
    fn from(old: ChunksOnlyState) -> Self {
        let ChunksOnlyState { clock_ms, job, trainers, pservers, eval, sessions, loading } = old;
        let job = job.map(UnshuffledJob::from);
        SingleJobState { clock_ms, job, trainers, pservers, eval, sessions, loading }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::codec;
    use crate::state::request::{ClientStamp, Request};
    use crate::state::{ChunkRef, Command, MasterState, Response};

    fn policy() -> QueuePolicy {
        QueuePolicy {
            chunks_per_task: 2,
            task_timeout_min_ms: 1000,
            timeout_factor: 3,
            max_task_failures: 2,
            retry_failed_next_pass: false,
        }
    }

    /// A state of this build with a RecordIO job that has moved (a trainer, a task pending,
    /// a session) whose job is then written as layout 3 wrote it.
    fn running_state() -> (MasterState, ChunksOnlyState) {
        let chunk =
            |offset| ChunkRef { path: "a".into(), offset, compressed_size: 8, record_count: 1 };
        let chunks: Vec<ChunkRef> = (0..5).map(|index| chunk(index * 100)).collect();
        let commands = [
            Command::RegisterTrainer { name: "t".into() },
            Command::ReportDataset { job: "job".into(), chunks, passes: 2, policy: policy() },
            Command::GetTask { trainer: 1, pass: 0 },
        ];
        let mut group = MasterState::new();
        for (seq, command) in (1..).zip(commands) {
            let client = Some(ClientStamp { client_id: 7, seq });
            group.apply(&Request { client, now_ms: 10, term: None, command });
        }
        let state = group.sole();
        let job = state.job.clone().expect("the dataset was accepted");
        let DatasetKind::RecordIo { chunks, digest } = job.dataset.kind else {
            panic!("a RecordIO report makes a RecordIO dataset")
        };
        let dataset = ChunksOnlyDataset {
            job: job.dataset.job,
            chunks,
            passes: job.dataset.passes,
            policy: job.dataset.policy,
            digest,
        };
        let old = ChunksOnlyState {
            clock_ms: state.clock_ms,
            job: Some(ChunksOnlyJob { dataset, queue: job.queue }),
            trainers: state.trainers.clone(),
            pservers: state.pservers.clone(),
            eval: state.eval,
            sessions: state.sessions.clone(),
            loading: state.loading.clone(),
        };
        (group.clone(), old)
    }

    /// A snapshot of layout 3 (a job of RecordIO chunks, before dataset kinds) decodes to the
    /// state it was, a RecordIO job with its queue and sessions, which goes on where it stood
    /// (the pending task finishes, a retry is answered from its session) and re-encodes in the
    /// current layout.
    #[test]
    fn a_layout_3_snapshot_decodes_as_a_recordio_job() {
        let (expected, old) = running_state();
        let mut bytes = vec![0xFF, 3];
        bytes.extend_from_slice(&codec::encode(&old));
        let mut state = MasterState::decode(&bytes).expect("layout 3 decodes");
        assert_eq!(state, expected);
        let retry = Request {
            client: Some(ClientStamp { client_id: 7, seq: 3 }),
            now_ms: 11,
            term: None,
            command: Command::GetTask { trainer: 1, pass: 0 },
        };
        let Response::Task(assignment) = state.apply(&retry) else {
            panic!("the retry is answered from its session with the task")
        };
        let finished =
            Command::TaskFinished { task_id: assignment.task_id, epoch: assignment.epoch };
        let request = Request { client: None, now_ms: 12, term: None, command: finished };
        assert_eq!(state.apply(&request), Response::Accepted);
        let current = state.encode();
        assert_ne!(&current[..2], &[0xFF, 3], "written in the current layout");
        assert_eq!(MasterState::decode(&current).expect("the current layout decodes"), state);
    }
}
