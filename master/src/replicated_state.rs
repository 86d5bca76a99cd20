//! `ReplicatedState`: the master's task-queue state plugged into the replicated log. Decodes
//! each committed command, applies it, encodes the answer; snapshots are the state's encoding.
//! It also offers the read-only queries the service and the leader's duties ask, each about
//! one job (by the id the group gave it) or about every job.

use crate::state::{JobState, MasterState, SlotHolder, SlotSecret, StatusView, FEATURE_LEVEL};
use consensus::{ApplyError, RestoreError, StateMachine};

pub struct ReplicatedState {
    state: MasterState,
    /// The newest feature level this replica admits (`--feature-level`): a raise beyond it, in
    /// the log or in a snapshot, stops the replica instead of being applied.
    admitted: u32,
}

impl Default for ReplicatedState {
    fn default() -> Self {
        Self::admitting(FEATURE_LEVEL)
    }
}

impl StateMachine for ReplicatedState {
    fn apply(&mut self, command: &[u8], entry_term: u64) -> Result<Vec<u8>, ApplyError> {
        let answer = self.state.apply_encoded(command, entry_term, self.admitted);
        answer.map_err(|error| ApplyError::new(error.to_string()))
    }

    fn snapshot(&self) -> Vec<u8> {
        self.state.encode()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError> {
        let state =
            MasterState::decode(snapshot).map_err(|error| RestoreError::new(error.to_string()))?;
        let level = state.feature_level();
        if level > self.admitted {
            let admitted = self.admitted;
            return Err(RestoreError::new(format!(
                "the snapshot's group runs feature level {level}; this master admits up to \
                 {admitted} (its build decodes {FEATURE_LEVEL}; --feature-level may hold it \
                 lower): upgrade this master, or lift its hold (a group's level never goes \
                 down)"
            )));
        }
        self.state = state;
        Ok(())
    }
}

/// A held slot of some job: (job id, slot index, holder).
pub(crate) type HeldSlot = (u64, u32, SlotHolder);

impl ReplicatedState {
    /// An empty state whose replica admits feature levels up to `admitted`.
    pub fn admitting(admitted: u32) -> Self {
        Self { state: MasterState::default(), admitted }
    }

    pub fn state(&self) -> &MasterState {
        &self.state
    }

    /// The job with this id, if it (still) exists.
    pub(crate) fn job(&self, job: u64) -> Option<&JobState> {
        self.state.job(job)
    }

    pub(crate) fn status(&self, job: u64) -> Option<StatusView> {
        self.job(job).map(JobState::status)
    }

    pub(crate) fn knows_trainer(&self, job: u64, trainer: u64) -> bool {
        self.job(job).is_some_and(|state| state.is_trainer_registered(trainer))
    }

    /// Every registered trainer of every job, as (job, trainer).
    pub(crate) fn trainer_ids(&self) -> Vec<(u64, u64)> {
        let jobs = self.state.jobs();
        jobs.flat_map(|(job, state)| state.trainer_ids().into_iter().map(move |id| (job, id)))
            .collect()
    }

    /// A job's desired slot count and its held slots with their holders, by index.
    pub(crate) fn pserver_slots(&self, job: u64) -> (u32, Vec<(u32, SlotHolder)>) {
        let Some(state) = self.job(job) else { return (0, Vec::new()) };
        // `pservers` lists every slot below `desired`, held or free.
        let slots = state.pservers();
        let desired = slots.len() as u32;
        let held = slots.into_iter().filter_map(|slot| Some((slot.slot, slot.holder?))).collect();
        (desired, held)
    }

    /// Every held slot of every job.
    pub(crate) fn held_slots(&self) -> Vec<HeldSlot> {
        let jobs = self.state.jobs().map(|(job, _)| job).collect::<Vec<_>>();
        let held = jobs.into_iter().flat_map(|job| {
            self.pserver_slots(job).1.into_iter().map(move |(slot, holder)| (job, slot, holder))
        });
        held.collect()
    }

    /// A number that changes whenever a slot's holder in `job` does (or the job goes), so
    /// watchers rebuild the pserver table only then.
    pub(crate) fn pserver_table_version(&self, job: u64) -> Option<u64> {
        self.job(job).map(JobState::pserver_table_version)
    }

    pub(crate) fn slot_held(
        &self,
        job: u64,
        slot: u32,
        generation: u64,
        secret: SlotSecret,
    ) -> bool {
        self.job(job).is_some_and(|state| state.slot_held(slot, generation, secret))
    }

    /// Whether job `job`'s progress checkpoint `id` asked its pservers for their checkpoints.
    pub(crate) fn pservers_asked(&self, job: &str, id: u64) -> bool {
        let job = self.state.job_id(job).ok().and_then(|job| self.job(job));
        job.is_some_and(|job| job.asks_pservers(id))
    }

    /// The step of `slot`'s recorded checkpoint in `job` (0 when none).
    pub(crate) fn recorded_step(&self, job: u64, slot: u32) -> u64 {
        let slots = self.job(job).map(JobState::pservers).unwrap_or_default();
        let view = slots.get(slot as usize);
        view.and_then(|view| view.checkpoint.as_ref()).map_or(0, |meta| meta.step)
    }

    /// Jobs with a pending deadline at or before `now_ms`.
    pub(crate) fn jobs_expired(&self, now_ms: u64) -> Vec<u64> {
        let jobs = self.state.jobs();
        jobs.filter(|(_, state)| state.has_expired(now_ms)).map(|(job, _)| job).collect()
    }
}
