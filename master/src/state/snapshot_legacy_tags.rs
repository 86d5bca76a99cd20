//! The state as layout 6 wrote it, field for field: progress checkpoints whose pserver tags
//! did not record which holder each slot had when the checkpoint was taken. Each tag's holder
//! is read back from its file's name (the generation it was written under, which the tag was
//! checked against); a slot without a tag then had no known holder, so such a checkpoint
//! restores the data only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::dataset_loading::DatasetLoading;
use super::eval::EvalRecord;
use super::job::Job;
use super::job_lifecycle::JobEnd;
use super::job_state::JobState;
use super::master_state::MasterState;
use super::model_checkpoints::{ModelCheckpoints, PendingRestore, ProgressTags};
use super::progress::ProgressLog;
use super::pserver_slots::{CheckpointMeta, PServerSlots};
use super::sessions::Sessions;
use super::snapshot_legacy_unshuffled::UnshuffledJob;
use super::trainer_registry::TrainerRegistry;

/// Layout 6's whole state.
#[derive(Serialize, Deserialize)]
pub(super) struct UnheldTagsState {
    clock_ms: u64,
    jobs: BTreeMap<u64, UnheldTagsJob>,
    next_job_id: u64,
}

/// Layout 6's job: `JobState` with tags that name no holder.
#[derive(Serialize, Deserialize)]
struct UnheldTagsJob {
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
    models: UnheldTags,
}

/// Layout 6's `ModelCheckpoints`.
#[derive(Serialize, Deserialize)]
struct UnheldTags {
    tagged: BTreeMap<u64, BTreeMap<u32, CheckpointMeta>>,
    restoring: Option<PendingRestore>,
    restores_asked: u64,
}

impl From<UnheldTagsState> for MasterState {
    fn from(old: UnheldTagsState) -> Self {
        let jobs = old.jobs.into_iter().map(|(id, job)| (id, job.into())).collect();
        MasterState {
            clock_ms: old.clock_ms,
            jobs,
            next_job_id: old.next_job_id,
            ..MasterState::default()
        }
    }
}

impl From<UnheldTagsJob> for JobState {
    fn from(old: UnheldTagsJob) -> Self {
        let UnheldTagsJob {
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
        let tagged = models.tagged.into_iter().map(|(id, files)| (id, with_holders(files)));
        let models = ModelCheckpoints {
            tagged: tagged.collect(),
            restoring: models.restoring,
            restores_asked: models.restores_asked,
        };
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

/// The tags of one progress checkpoint, each slot's holder the generation its file was
/// written under.
fn with_holders(files: BTreeMap<u32, CheckpointMeta>) -> ProgressTags {
    let generation = |meta: &CheckpointMeta| {
        let name = meta.path.rsplit('/').next().unwrap_or_default();
        storage::checkpoint::parse_file_name(name).map(|(_, _, generation)| generation)
    };
    let holders =
        files.iter().filter_map(|(slot, meta)| Some((*slot, generation(meta)?))).collect();
    ProgressTags { holders, files }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::codec;

    /// A layout-6 snapshot opens with each tag's holder read from its file name, so its
    /// complete checkpoints still restore the model.
    #[test]
    fn layout_6_opens_with_the_holders_its_files_name() {
        let meta = |slot, generation| CheckpointMeta {
            path: format!(
                "/ckpt/progress-1/{}",
                storage::checkpoint::file_name(slot, 4, generation)
            ),
            step: 4,
            crc32: 1,
            created_ms: 1,
        };
        let files = BTreeMap::from([(0, meta(0, 3)), (1, meta(1, 5))]);
        let job = UnheldTagsJob {
            name: "a".to_string(),
            clock_ms: 7,
            job: None,
            trainers: TrainerRegistry::default(),
            pservers: PServerSlots::default(),
            eval: None,
            sessions: Sessions::default(),
            loading: None,
            ended: None,
            progress: ProgressLog::default(),
            models: UnheldTags {
                tagged: BTreeMap::from([(1, files)]),
                restoring: None,
                restores_asked: 2,
            },
        };
        let old = UnheldTagsState { clock_ms: 9, jobs: BTreeMap::from([(1, job)]), next_job_id: 2 };
        let mut bytes = vec![0xFF, 6];
        bytes.extend_from_slice(&codec::encode(&old));
        let state = super::super::snapshot_layout::decode(&bytes).expect("layout 6 decodes");
        let models = &state.jobs[&1].models;
        assert_eq!(models.tagged[&1].holders, BTreeMap::from([(0, 3), (1, 5)]));
        assert_eq!(models.tagged[&1].files.len(), 2);
        assert_eq!(models.restores_asked, 2);
    }
}
