//! The sled log store and the state machine adapter against openraft's storage contract.

use consensus::kv::KvStore;
use consensus::log_store::LogStore;
use consensus::state_machine_store::StateMachineStore;
use consensus::TypeConfig;
use openraft::testing::{StoreBuilder, Suite};
use openraft::{AnyError, StorageError, StorageIOError};
use tempfile::TempDir;

struct SledBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore<KvStore>, TempDir> for SledBuilder {
    async fn build(
        &self,
    ) -> Result<(TempDir, LogStore, StateMachineStore<KvStore>), StorageError<u64>> {
        let failed = |error: String| StorageIOError::write(AnyError::error(error));
        let dir = tempfile::tempdir().map_err(|error| failed(error.to_string()))?;
        let (log_store, _closed) =
            LogStore::open(&dir.path().join("sled")).map_err(|error| failed(error.to_string()))?;
        let state_machine =
            StateMachineStore::open(&dir.path().join("snapshots"), KvStore::default())
                .map_err(|error| failed(error.to_string()))?;
        Ok((dir, log_store, state_machine))
    }
}

/// The sled log store and snapshot-file state machine satisfy every case of openraft's suite.
#[test]
fn sled_store_passes_the_openraft_suite() -> anyhow::Result<()> {
    crate::init_tracing();
    Suite::test_all(SledBuilder)?;
    Ok(())
}
