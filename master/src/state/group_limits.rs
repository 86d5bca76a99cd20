//! What the whole group may hold, checked before a job applies a command that would add to
//! it: trainers, pserver slots, tasks, chunks and dataset path bytes count over every job
//! against the limits one job had alone, so the largest admitted group still fits a snapshot
//! (`limits.rs` measures it). Each limit is checked where it is first spent (a registration,
//! a job's first claim, a dataset report), with the error a person can act on.

use super::command::Command;
use super::dataset::{CHUNK_COUNT_MAX, DATASET_PATH_BYTES_MAX, TASK_COUNT_MAX};
use super::job_state::JobState;
use super::master_state::MasterState;
use super::pserver_slots::PSERVER_COUNT_MAX;
use super::routing::Target;
use super::trainer_registry::TRAINER_COUNT_MAX;

impl MasterState {
    /// Whether the group can hold what `command` adds to `target`; why not otherwise.
    pub(crate) fn admits(&self, target: &Target, command: &Command) -> Result<(), String> {
        let id = match target {
            Target::Existing(id) => Some(*id),
            Target::New => None,
        };
        let this = id.and_then(|id| self.jobs.get(&id));
        let others = || self.jobs.iter().filter(move |(other, _)| Some(**other) != id);
        // A job alone is held to its own limits, with the errors it always gave.
        if others().next().is_none() {
            return Ok(());
        }
        // Saturating: a hostile report's size must be refused, never overflow (the sums are of
        // admitted, bounded jobs; the report's own figure is anything a client sent).
        let others_sum = |count: fn(&JobState) -> u64| -> u64 {
            others().map(|(_, state)| count(state)).fold(0, u64::saturating_add)
        };
        match command.report_parts().0 {
            Command::RegisterTrainer { .. } => {
                let registered: u64 = self.jobs.values().map(JobState::trainer_count).sum();
                within(
                    registered.saturating_add(1),
                    TRAINER_COUNT_MAX as u64,
                    "trainers registered",
                )
            }
            Command::ClaimPServerSlot { desired, .. }
            | Command::ClaimPServerSlotWithSecret { desired, .. }
                if this.is_none_or(|state| state.pservers_desired().is_none()) =>
            {
                let others = others_sum(|state| u64::from(state.pservers_desired().unwrap_or(0)));
                within(
                    others.saturating_add(u64::from(*desired)),
                    u64::from(PSERVER_COUNT_MAX),
                    "pserver slots",
                )
            }
            Command::ReportIndexDataset { size, shard_size, .. }
                if this.is_none_or(|state| !state.has_report()) && *shard_size > 0 =>
            {
                let tasks = size.div_ceil(*shard_size);
                within(
                    others_sum(JobState::task_units).saturating_add(tasks),
                    TASK_COUNT_MAX,
                    "tasks",
                )
            }
            Command::ReportDataset { chunks, .. }
                if this.is_none_or(|state| state.job.is_none()) =>
            {
                let list = super::chunk_list::ChunkList::from_refs(chunks);
                self.admits_chunks(this, others_sum, (chunks.len() as u64, list.path_bytes()))
            }
            Command::ReportDatasetBatch { total_chunks, chunks, .. }
                if this.is_none_or(|state| state.job.is_none()) =>
            {
                self.admits_chunks(this, others_sum, (*total_chunks, chunks.path_bytes()))
            }
            _ => Ok(()),
        }
    }

    /// A RecordIO report of `total_chunks` whose (next) batch stores `path_bytes`.
    fn admits_chunks(
        &self,
        this: Option<&JobState>,
        others_sum: impl Fn(fn(&JobState) -> u64) -> u64,
        (total_chunks, path_bytes): (u64, u64),
    ) -> Result<(), String> {
        let chunk_limit = CHUNK_COUNT_MAX as u64;
        let units = others_sum(JobState::task_units).saturating_add(total_chunks);
        within(units, chunk_limit, "tasks and chunks")?;
        let loaded = this.map_or(0, JobState::path_bytes);
        let stored =
            others_sum(JobState::path_bytes).saturating_add(loaded).saturating_add(path_bytes);
        within(stored, DATASET_PATH_BYTES_MAX, "bytes of dataset file paths")
    }
}

fn within(count: u64, count_max: u64, what: &str) -> Result<(), String> {
    if count > count_max {
        return Err(format!(
            "the group's jobs together would hold {count} {what}, more than the {count_max} \
             allowed: cancel a job, or wait until an ended one is removed"
        ));
    }
    Ok(())
}

impl JobState {
    /// Registered trainers.
    pub(crate) fn trainer_count(&self) -> u64 {
        self.trainers.trainers.len() as u64
    }

    /// Whether a dataset report was accepted or is arriving.
    pub(crate) fn has_report(&self) -> bool {
        self.job.is_some() || self.loading.is_some()
    }

    /// What the job's dataset counts against the group's task and chunk limit: its tasks, or
    /// its chunks if more (a RecordIO job stores both), or the chunks a loading report will
    /// bring.
    pub(crate) fn task_units(&self) -> u64 {
        match (&self.job, &self.loading) {
            (Some(job), _) => job.dataset.task_count().max(job.dataset.chunk_count()),
            (None, Some(loading)) => loading.total_chunks,
            (None, None) => 0,
        }
    }

    /// The bytes of file paths its dataset stores (or its loading report stored so far).
    pub(crate) fn path_bytes(&self) -> u64 {
        match (&self.job, &self.loading) {
            (Some(job), _) => job.dataset.path_bytes(),
            (None, Some(loading)) => loading.chunks.path_bytes(),
            (None, None) => 0,
        }
    }

    /// The name its accepted or arriving dataset report gave the job.
    pub(crate) fn reported_name(&self) -> Option<String> {
        match (&self.job, &self.loading) {
            (Some(job), _) => Some(job.dataset.job.clone()),
            (None, Some(loading)) => Some(loading.job.clone()),
            (None, None) => None,
        }
    }
}
