//! The simulator's log store and state machine against openraft's storage contract.

use consensus::TypeConfig;
use master::ReplicatedState;
use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use simulation::disk::SimDisk;
use simulation::log_store::SimLogStore;
use simulation::rng::SimRng;
use simulation::state_machine_store::SimStateMachine;

struct SimBuilder;

impl StoreBuilder<TypeConfig, SimLogStore, SimStateMachine, ()> for SimBuilder {
    async fn build(&self) -> Result<((), SimLogStore, SimStateMachine), StorageError<u64>> {
        // Flushes take real time here (the suite runs its own runtime), so they take none.
        let store = SimLogStore::open(SimDisk::default(), SimRng::new(1), (0, 1), false);
        let state_machine = SimStateMachine::new(Box::new(ReplicatedState::default()));
        Ok(((), store, state_machine))
    }
}

/// The simulated log store (acknowledging appends only once flushed) and the in-memory state
/// machine satisfy every case of openraft's storage suite.
#[test]
fn simulated_store_passes_the_openraft_suite() -> anyhow::Result<()> {
    Suite::test_all(SimBuilder)?;
    Ok(())
}
