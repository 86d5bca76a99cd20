//! The safety rules of the group as a whole, on top of each job's own (`invariant.rs`): only
//! the newest incarnation of a job name may run (earlier ones ended), ids are never reused, only ended jobs are removed, a job ends exactly
//! when it finished or was cancelled, progress checkpoints fit their job, and the jobs
//! together stay within the group's limits.

use super::dataset::TASK_COUNT_MAX;
use super::job_state::JobState;
use super::master_state::{MasterState, JOB_COUNT_MAX};
use super::progress::PROGRESS_CHECKPOINTS_KEPT;
use super::pserver_slots::PSERVER_COUNT_MAX;
use super::trainer_registry::TRAINER_COUNT_MAX;
use super::violation::InvariantViolation as Violation;

use super::rendezvous_space::RendezvousSpace;

impl MasterState {
    /// Checks every rule a single state must satisfy, the group's and each job's.
    pub fn check_invariants(&self) -> Result<(), Violation> {
        self.check_group_counts()?;
        self.rendezvous.check().map_err(|problem| Violation::Rendezvous { problem })?;
        // The names of running jobs seen so far, in id order (incarnations of a name by age).
        let mut names = std::collections::BTreeSet::new();
        let mut unnamed = 0;
        for (id, state) in &self.jobs {
            state.check_invariants()?;
            let problem = |problem: &str| Violation::Job {
                job: format!("#{id} {:?}", state.name),
                problem: problem.to_string(),
            };
            if *id >= self.next_job_id {
                return Err(problem("its id was never issued"));
            }
            if state.name.is_empty() {
                unnamed += 1;
                if state.has_report() || unnamed > 1 {
                    return Err(problem("unnamed, yet it has a dataset or another is unnamed"));
                }
            } else if names.contains(state.name.as_str()) {
                return Err(problem("an older incarnation of its name still runs"));
            }
            if !state.name.is_empty() && state.ended().is_none() {
                names.insert(state.name.as_str());
            }
            if state.clock_ms > self.clock_ms {
                return Err(problem("its clock is ahead of the group's"));
            }
            check_end_and_progress(state).map_err(|text| problem(&text))?;
        }
        Ok(())
    }

    /// How many jobs, trainers, slots and tasks the jobs hold together.
    fn check_group_counts(&self) -> Result<(), Violation> {
        let sum = |count: fn(&JobState) -> u64| self.jobs.values().map(count).sum::<u64>();
        let desired = |state: &JobState| u64::from(state.pservers_desired().unwrap_or(0));
        let counts = [
            ("jobs", self.jobs.len() as u64, JOB_COUNT_MAX as u64),
            ("trainers", sum(JobState::trainer_count), TRAINER_COUNT_MAX as u64),
            ("pserver slots", sum(desired), u64::from(PSERVER_COUNT_MAX)),
            ("tasks and chunks", sum(JobState::task_units), TASK_COUNT_MAX),
        ];
        match counts.into_iter().find(|(_, count, count_max)| count > count_max) {
            Some((what, count, count_max)) => {
                Err(Violation::GroupOverLimit { what, count, count_max })
            }
            None => Ok(()),
        }
    }

    /// Checks every job's sessions (see [`JobState::check_session_index`]).
    pub fn check_session_index(&self) -> Result<(), Violation> {
        self.jobs.values().try_for_each(JobState::check_session_index)
    }

    /// Checks the rules about one step: the clock, the feature level and the job ids only
    /// grow, a job is removed only once it ended, and each job that stayed keeps its own rules.
    pub fn check_transition(before: &Self, after: &Self) -> Result<(), Violation> {
        if after.clock_ms < before.clock_ms {
            let (before, after) = (before.clock_ms, after.clock_ms);
            return Err(Violation::ClockWentBack { before, after });
        }
        if after.feature_level < before.feature_level {
            let (before, after) = (before.feature_level, after.feature_level);
            return Err(Violation::FeatureLevelLowered { before, after });
        }
        for (id, job_before) in &before.jobs {
            match after.jobs.get(id) {
                Some(job_after) => JobState::check_transition(job_before, job_after)?,
                None if job_before.ended().is_some() => {}
                None => return Err(Violation::RunningJobRemoved { id: *id }),
            }
        }
        RendezvousSpace::check_transition(&before.rendezvous, &after.rendezvous)
            .map_err(|problem| Violation::Rendezvous { problem })?;
        let new_ids = after.jobs.keys().filter(|id| !before.jobs.contains_key(id));
        match new_ids.copied().find(|id| *id < before.next_job_id) {
            Some(id) => Err(Violation::JobIdReused { id, next_job_id: before.next_job_id }),
            None => Ok(()),
        }
    }
}

/// A job ended exactly when it finished or was cancelled (a queue finished while a restore
/// with the model waits is put back, not ended); its progress checkpoints fit it.
fn check_end_and_progress(state: &JobState) -> Result<(), String> {
    let finished = state.job_finished();
    match state.ended() {
        None if finished && !state.is_restoring() => {
            return Err("finished, yet not ended".to_string())
        }
        Some(end) if !end.cancelled && !finished => {
            return Err("ended as finished, yet it is not".to_string())
        }
        _ => {}
    }
    let progress = &state.progress;
    if progress.kept.len() > PROGRESS_CHECKPOINTS_KEPT {
        return Err(format!("{} progress checkpoints kept", progress.kept.len()));
    }
    let task_count = state.task_count();
    for checkpoint in &progress.kept {
        let fits = checkpoint.id < progress.next_id
            && checkpoint.done.is_well_formed()
            && checkpoint.done.task_count() == task_count;
        if !fits {
            return Err(format!("progress checkpoint {} does not fit the job", checkpoint.id));
        }
    }
    Ok(())
}
