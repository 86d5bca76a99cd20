//! `ReplicatedState`: the master's task-queue state plugged into the replicated log. Decodes
//! each committed command, applies it, encodes the answer; snapshots are the state's encoding.
//! It also offers the read-only queries the service and the leader's duties ask.

use crate::state::{MasterState, SlotHolder, SlotSecret, StatusView};
use consensus::{RestoreError, StateMachine};

#[derive(Default)]
pub struct ReplicatedState {
    state: MasterState,
}

impl StateMachine for ReplicatedState {
    fn apply(&mut self, command: &[u8], entry_term: u64) -> Vec<u8> {
        self.state.apply_encoded(command, entry_term)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.state.encode()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError> {
        self.state =
            MasterState::decode(snapshot).map_err(|error| RestoreError::new(error.to_string()))?;
        Ok(())
    }
}

impl ReplicatedState {
    pub fn state(&self) -> &MasterState {
        &self.state
    }

    pub(crate) fn status(&self) -> StatusView {
        self.state.status()
    }

    pub(crate) fn knows_trainer(&self, trainer: u64) -> bool {
        self.state.is_trainer_registered(trainer)
    }

    pub(crate) fn trainer_ids(&self) -> Vec<u64> {
        self.state.trainer_ids()
    }

    /// The desired slot count and the held slots with their holders, by index.
    pub(crate) fn pserver_slots(&self) -> (u32, Vec<(u32, SlotHolder)>) {
        // `pservers` lists every slot below `desired`, held or free.
        let slots = self.state.pservers();
        let desired = slots.len() as u32;
        let held = slots.into_iter().filter_map(|slot| Some((slot.index, slot.holder?))).collect();
        (desired, held)
    }

    /// A number that changes whenever a slot's holder does, so watchers rebuild the pserver
    /// table only then.
    pub(crate) fn pserver_table_version(&self) -> u64 {
        self.state.pserver_table_version()
    }

    pub(crate) fn slot_held(&self, index: u32, generation: u64, secret: SlotSecret) -> bool {
        self.state.slot_held(index, generation, secret)
    }

    /// The step of slot `index`'s recorded checkpoint (0 when none).
    pub(crate) fn recorded_step(&self, index: u32) -> u64 {
        let slots = self.state.pservers();
        let slot = slots.get(index as usize);
        slot.and_then(|slot| slot.checkpoint.as_ref()).map_or(0, |meta| meta.step)
    }

    pub(crate) fn has_expired(&self, now_ms: u64) -> bool {
        self.state.has_expired(now_ms)
    }
}
