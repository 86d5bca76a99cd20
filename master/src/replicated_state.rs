//! `ReplicatedState`: the master's task-queue state plugged into the replicated log. Decodes
//! each committed command, applies it, encodes the answer; snapshots are the state's encoding.
//! It also offers the read-only queries the service and the leader's duties ask.

use crate::state::{MasterState, StatusView};
use consensus::{RestoreError, StateMachine};

#[derive(Default)]
pub struct ReplicatedState {
    state: MasterState,
}

impl StateMachine for ReplicatedState {
    fn apply(&mut self, command: &[u8], _entry_term: u64) -> Vec<u8> {
        self.state.apply_encoded(command)
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
        self.state.trainers().iter().any(|known| known.trainer == trainer)
    }

    pub(crate) fn trainer_ids(&self) -> Vec<u64> {
        self.state.trainers().iter().map(|known| known.trainer).collect()
    }

    /// The desired slot count and the held slots with their addresses, by index.
    pub(crate) fn pserver_slots(&self) -> (u32, Vec<(u32, String)>) {
        // `pservers` lists every slot below `desired`, held or free.
        let slots = self.state.pservers();
        let desired = slots.len() as u32;
        let held = slots.into_iter().filter_map(|slot| Some((slot.index, slot.addr?))).collect();
        (desired, held)
    }

    pub(crate) fn slot_holder(&self, index: u32) -> Option<String> {
        self.pserver_slots().1.into_iter().find(|(held, _)| *held == index).map(|(_, addr)| addr)
    }

    pub(crate) fn has_expired(&self, now_ms: u64) -> bool {
        self.state.has_expired(now_ms)
    }
}
