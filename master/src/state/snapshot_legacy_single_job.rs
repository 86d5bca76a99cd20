//! The state as layout 4 wrote it, field for field: the group's single job, before jobs had
//! names. It opens as a group of that one job, named by its dataset report (unnamed if none
//! was accepted yet; the first report then names it), ended when it had finished. Layouts 1 to
//! 3 convert to it first.

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

/// Layout 4's whole state (`JobState` before it had a name, an end and progress checkpoints).
#[derive(Serialize, Deserialize)]
pub(super) struct SingleJobState {
    pub(super) clock_ms: u64,
    pub(super) job: Option<UnshuffledJob>,
    pub(super) trainers: TrainerRegistry,
    pub(super) pservers: PServerSlots,
    pub(super) eval: Option<EvalRecord>,
    pub(super) sessions: Sessions,
    pub(super) loading: Option<DatasetLoading>,
}

impl From<SingleJobState> for MasterState {
    fn from(old: SingleJobState) -> Self {
        let SingleJobState { clock_ms, job, trainers, pservers, eval, sessions, loading } = old;
        let finished = job.as_ref().is_some_and(|job| job.queue.job_finished);
        let ended = finished.then_some(JobEnd { at_ms: clock_ms, cancelled: false });
        let mut state = JobState {
            name: String::new(),
            clock_ms,
            job: job.map(Job::from),
            trainers,
            pservers,
            eval,
            sessions,
            loading,
            ended,
            progress: ProgressLog::default(),
            models: Default::default(),
        };
        let empty = state.job.is_none()
            && state.loading.is_none()
            && state.trainers.trainers.is_empty()
            && state.pservers.desired.is_none()
            && state.sessions.sessions.is_empty();
        if empty {
            return MasterState { clock_ms, ..MasterState::default() };
        }
        state.name = state.reported_name().unwrap_or_default();
        MasterState {
            clock_ms,
            jobs: BTreeMap::from([(1, state)]),
            next_job_id: 2,
            ..MasterState::default()
        }
    }
}
