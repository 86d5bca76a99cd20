//! The state as layout 7 wrote it, field for field: jobs without a shuffle seed (they open
//! unshuffled, as they ran) and no rendezvous key space (it opens empty). [`UnshuffledJob`] is
//! the job of layouts 4 to 7, which the readers of those layouts share (layouts 1 to 3 convert
//! their jobs to it). A group at the base feature level still writes layout 7
//! ([`UnshuffledStateRef`], borrowing the state) whenever it holds the whole state, so the
//! builds before levels among its members can install its snapshots.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::dataset::Dataset;
use super::dataset_loading::DatasetLoading;
use super::eval::EvalRecord;
use super::feature_level::BASE_FEATURE_LEVEL;
use super::job::Job;
use super::job_lifecycle::JobEnd;
use super::job_state::JobState;
use super::master_state::MasterState;
use super::model_checkpoints::ModelCheckpoints;
use super::progress::ProgressLog;
use super::pserver_slots::PServerSlots;
use super::sessions::Sessions;
use super::task_queue::TaskQueue;
use super::trainer_registry::TrainerRegistry;

/// Layout 7's whole state.
#[derive(Serialize, Deserialize)]
pub(super) struct UnshuffledState {
    pub(super) clock_ms: u64,
    pub(super) jobs: BTreeMap<u64, UnshuffledJobState>,
    pub(super) next_job_id: u64,
}

/// Layout 7's `JobState`: this build's, with a job that has no shuffle seed.
#[derive(Serialize, Deserialize)]
pub(super) struct UnshuffledJobState {
    pub(super) name: String,
    pub(super) clock_ms: u64,
    pub(super) job: Option<UnshuffledJob>,
    pub(super) trainers: TrainerRegistry,
    pub(super) pservers: PServerSlots,
    pub(super) eval: Option<EvalRecord>,
    pub(super) sessions: Sessions,
    pub(super) loading: Option<DatasetLoading>,
    pub(super) ended: Option<JobEnd>,
    pub(super) progress: ProgressLog,
    pub(super) models: ModelCheckpoints,
}

/// The job of layouts 4 to 7 (field for field): a dataset and its queue, handed out by id.
#[derive(Serialize, Deserialize)]
pub(super) struct UnshuffledJob {
    pub(super) dataset: Dataset,
    pub(super) queue: TaskQueue,
}

/// Layout 7 written from a borrowed state: the same bytes as [`UnshuffledState`] (bincode
/// encodes a reference as its value).
#[derive(Serialize)]
pub(super) struct UnshuffledStateRef<'a> {
    clock_ms: u64,
    jobs: BTreeMap<u64, UnshuffledJobStateRef<'a>>,
    next_job_id: u64,
}

/// [`UnshuffledJobState`], borrowed.
#[derive(Serialize)]
struct UnshuffledJobStateRef<'a> {
    name: &'a String,
    clock_ms: u64,
    job: Option<UnshuffledJobRef<'a>>,
    trainers: &'a TrainerRegistry,
    pservers: &'a PServerSlots,
    eval: &'a Option<EvalRecord>,
    sessions: &'a Sessions,
    loading: &'a Option<DatasetLoading>,
    ended: &'a Option<JobEnd>,
    progress: &'a ProgressLog,
    models: &'a ModelCheckpoints,
}

/// [`UnshuffledJob`], borrowed.
#[derive(Serialize)]
struct UnshuffledJobRef<'a> {
    dataset: &'a Dataset,
    queue: &'a TaskQueue,
}

impl<'a> UnshuffledStateRef<'a> {
    /// Layout 7 of `state`, if the group is at the base feature level and layout 7 holds all of
    /// it: no job shuffled and no rendezvous run (none can exist there unless a build that
    /// wrote layout 8 made them).
    pub(super) fn of(state: &'a MasterState) -> Option<Self> {
        if state.feature_level > BASE_FEATURE_LEVEL || !state.rendezvous.runs.is_empty() {
            return None;
        }
        let jobs = state.jobs.iter().map(|(id, job)| Some((*id, UnshuffledJobStateRef::of(job)?)));
        let jobs = jobs.collect::<Option<_>>()?;
        Some(Self { clock_ms: state.clock_ms, jobs, next_job_id: state.next_job_id })
    }
}

impl<'a> UnshuffledJobStateRef<'a> {
    fn of(state: &'a JobState) -> Option<Self> {
        let job = match &state.job {
            Some(job) if job.shuffle.is_some() => return None,
            Some(job) => Some(UnshuffledJobRef { dataset: &job.dataset, queue: &job.queue }),
            None => None,
        };
        Some(Self {
            name: &state.name,
            clock_ms: state.clock_ms,
            job,
            trainers: &state.trainers,
            pservers: &state.pservers,
            eval: &state.eval,
            sessions: &state.sessions,
            loading: &state.loading,
            ended: &state.ended,
            progress: &state.progress,
            models: &state.models,
        })
    }
}

impl From<UnshuffledJob> for Job {
    fn from(old: UnshuffledJob) -> Self {
        Job { dataset: old.dataset, queue: old.queue, shuffle: None }
    }
}

impl From<UnshuffledState> for MasterState {
    fn from(old: UnshuffledState) -> Self {
        let jobs = old.jobs.into_iter().map(|(id, job)| (id, job.into())).collect();
        MasterState {
            clock_ms: old.clock_ms,
            jobs,
            next_job_id: old.next_job_id,
            ..MasterState::default()
        }
    }
}

impl From<UnshuffledJobState> for JobState {
    fn from(old: UnshuffledJobState) -> Self {
        let UnshuffledJobState {
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
            models,
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
            models,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::codec;
    use crate::state::dataset::QueuePolicy;

    /// A layout-7 snapshot opens with its jobs as they were, unshuffled, and re-encodes in the
    /// current layout.
    #[test]
    fn layout_7_opens_unshuffled() {
        let policy = QueuePolicy {
            chunks_per_task: 1,
            task_timeout_min_ms: 1000,
            timeout_factor: 3,
            max_task_failures: 2,
            retry_failed_next_pass: false,
        };
        let dataset = Dataset::index_range("a", 10, 3, 2, policy).expect("a valid dataset");
        let queue = TaskQueue::new(dataset.task_count(), None);
        let job = UnshuffledJobState {
            name: "a".to_string(),
            clock_ms: 7,
            job: Some(UnshuffledJob { dataset: dataset.clone(), queue: queue.clone() }),
            trainers: TrainerRegistry::default(),
            pservers: PServerSlots::default(),
            eval: None,
            sessions: Sessions::default(),
            loading: None,
            ended: None,
            progress: ProgressLog::default(),
            models: ModelCheckpoints::default(),
        };
        let old = UnshuffledState { clock_ms: 9, jobs: BTreeMap::from([(1, job)]), next_job_id: 2 };
        let mut bytes = vec![0xFF, 7];
        bytes.extend_from_slice(&codec::encode(&old));
        let state = MasterState::decode(&bytes).expect("layout 7 decodes");
        let opened = state.jobs[&1].job.as_ref().expect("the job");
        assert_eq!(*opened, Job { dataset, queue, shuffle: None });
        assert_eq!(state.next_job_id, 2);
        assert_eq!(state.encode(), bytes, "a base-level group writes layout 7 back, byte for byte");
        let mut raised = state.clone();
        raised.feature_level = 2;
        let current = raised.encode();
        assert_eq!(&current[..2], &[0xFF, 9], "a raised group writes the current layout");
        assert_eq!(MasterState::decode(&current).expect("layout 9 decodes"), raised);
    }
}
