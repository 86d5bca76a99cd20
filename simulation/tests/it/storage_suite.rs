//! The simulator's log store, with the production state machine store over the simulated
//! snapshot storage, against openraft's storage contract.

use std::sync::Arc;

use consensus::state_machine_store::StateMachineStore;
use consensus::TypeConfig;
use master::ReplicatedState;
use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use simulation::disk::SimDisk;
use simulation::log_store::SimLogStore;
use simulation::rng::SimRng;
use simulation::snapshots::SimSnapshots;

struct SimBuilder;

type StateMachine = StateMachineStore<ReplicatedState>;

impl StoreBuilder<TypeConfig, SimLogStore, StateMachine, ()> for SimBuilder {
    async fn build(&self) -> Result<((), SimLogStore, StateMachine), StorageError<u64>> {
        // Flushes take real time here (the suite runs its own runtime), so they take none.
        let disk = SimDisk::default();
        let (store, _closed) = SimLogStore::open(disk.clone(), SimRng::new(1), (0, 1), false);
        let snapshots = Arc::new(SimSnapshots::open(disk, 1, SimRng::new(2)));
        let state_machine = StateMachineStore::open_in(snapshots, None, ReplicatedState::default())
            .map_err(|error| StorageError::from(openraft::StorageIOError::read(&error)))?;
        Ok(((), store, state_machine))
    }
}

/// The simulated log store (acknowledging appends only once flushed) and the state machine
/// store over simulated snapshots satisfy every case of openraft's storage suite.
#[test]
fn simulated_store_passes_the_openraft_suite() -> anyhow::Result<()> {
    Suite::test_all(SimBuilder)?;
    Ok(())
}
