//! The state as layout 5 wrote it, field for field: named jobs whose progress checkpoints had
//! no pserver checkpoints. It opens with none tagged and no restore under way.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::dataset_loading::DatasetLoading;
use super::eval::EvalRecord;
use super::job::Job;
use super::job_lifecycle::JobEnd;
use super::job_state::JobState;
use super::master_state::MasterState;
use super::progress::ProgressLog;
use super::pserver_slots::PServerSlots;
use super::sessions::Sessions;
use super::snapshot_legacy_unshuffled::UnshuffledJob;
use super::trainer_registry::TrainerRegistry;

/// Layout 5's whole state.
#[derive(Serialize, Deserialize)]
pub(super) struct DataProgressState {
    clock_ms: u64,
    jobs: BTreeMap<u64, DataProgressJob>,
    next_job_id: u64,
}

/// Layout 5's job: `JobState` before `models`.
#[derive(Serialize, Deserialize)]
struct DataProgressJob {
    name: String,
    clock_ms: u64,
    job: Option<UnshuffledJob>,
    trainers: TrainerRegistry,
    pservers: PServerSlots,
    eval: Option<EvalRecord>,
    sessions: Sessions,
    loading: Option<DatasetLoading>,
    ended: Option<JobEnd>,
    progress: ProgressLog,
}

impl From<DataProgressState> for MasterState {
    fn from(old: DataProgressState) -> Self {
        let jobs = old.jobs.into_iter().map(|(id, job)| (id, job.into())).collect();
        MasterState {
            clock_ms: old.clock_ms,
            jobs,
            next_job_id: old.next_job_id,
            ..MasterState::default()
        }
    }
}

impl From<DataProgressJob> for JobState {
    fn from(old: DataProgressJob) -> Self {
        let DataProgressJob {
            name,
            clock_ms,
            job,
            trainers,
            pservers,
            eval,
            sessions,
            loading,
            ended,
            progress,
        } = old;
        JobState {
            name,
            clock_ms,
            job: job.map(Job::from),
            trainers,
            pservers,
            eval,
            sessions,
            loading,
            ended,
            progress,
            models: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::codec;

    /// A layout-5 snapshot of two jobs opens as the same jobs with nothing tagged.
    #[test]
    fn layout_5_opens_with_nothing_tagged() {
        let job = |name: &str| DataProgressJob {
            name: name.to_string(),
            clock_ms: 7,
            job: None,
            trainers: TrainerRegistry::default(),
            pservers: PServerSlots::default(),
            eval: None,
            sessions: Sessions::default(),
            loading: None,
            ended: None,
            progress: ProgressLog::default(),
        };
        let old = DataProgressState {
            clock_ms: 9,
            jobs: BTreeMap::from([(1, job("a")), (3, job("b"))]),
            next_job_id: 4,
        };
        let mut bytes = vec![0xFF, 5];
        bytes.extend_from_slice(&codec::encode(&old));
        let state = super::super::snapshot_layout::decode(&bytes).expect("layout 5 decodes");
        let names: Vec<&str> = state.jobs.values().map(|job| job.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!((state.clock_ms, state.next_job_id), (9, 4));
        assert!(state.jobs.values().all(|job| job.models == Default::default()));
    }
}
