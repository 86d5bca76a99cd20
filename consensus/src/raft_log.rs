//! What a node needs from its Raft log beyond openraft's `RaftLogStorage`, and the storage a
//! node opens with. The sled `LogStore` is the production log; the simulation brings its own
//! (an in-memory disk that loses unflushed writes in a crash) and runs everything else as is.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openraft::storage::RaftLogStorage;
use openraft::LogId;
use tokio::sync::watch;

use crate::apply_observer::ApplyObserver;
use crate::durable_log::DurableWatch;
use crate::error::StartError;
use crate::log_store::{BootstrapRecord, LogStore};
use crate::log_store_closed::LogStoreClosed;
use crate::snapshot_file::SnapshotDir;
use crate::snapshot_store::SnapshotStore;
use crate::type_config::TypeConfig;

/// A durable Raft log a [`crate::ConsensusNode`] can run on.
pub trait RaftLog: RaftLogStorage<TypeConfig> {
    /// Records who bootstrapped this log, or checks that it is the same node and peers.
    fn check_bootstrap(
        &mut self,
        record: &BootstrapRecord,
    ) -> impl Future<Output = Result<(), StartError>> + Send;

    /// How far the log is durable. A store may acknowledge the leader's own new entries before
    /// they are durable (see `durable_log`), and must then raise this once they are; the node
    /// holds back applying and announcing commits until it covers them.
    fn durable(&self) -> DurableWatch;

    /// Makes every purge wait until a durable snapshot covers the purged entries (see
    /// [`PurgeGuard`]).
    fn purge_behind(&mut self, durable_snapshots: watch::Receiver<Option<LogId<u64>>>);
}

/// Everything a node keeps on its disk.
pub struct NodeStorage<L> {
    pub log: L,
    /// Resolves once the log has let go of its files.
    pub log_closed: LogStoreClosed,
    pub snapshots: Arc<dyn SnapshotStore>,
    /// Told of every applied entry (the simulation's checkers); `None` in production.
    pub observer: Option<Arc<dyn ApplyObserver>>,
}

impl NodeStorage<LogStore> {
    /// The production storage in `data_dir`: the sled log in `sled/`, snapshot files in
    /// `snapshots/`.
    pub fn open_dir(data_dir: &Path) -> Result<Self, StartError> {
        // The snapshot directory first: it holds nothing open, so a failure leaves nothing to
        // close.
        let snapshots = Arc::new(SnapshotDir::open(&data_dir.join("snapshots"))?);
        let (log, log_closed) = LogStore::open(&data_dir.join("sled"))?;
        Ok(Self { log, log_closed, snapshots, observer: None })
    }
}

/// How long a purge waits for the snapshot that covers it to be durable. The snapshot is being
/// written by the state machine worker at that moment; a write this slow is a failed disk.
const PURGE_WAIT_MS_MAX: u64 = 120_000;

/// Holds a purge back until a durable snapshot covers it. openraft 0.9.25 builds a snapshot
/// before it purges (`finish_building_snapshot` runs after `build_snapshot` returned, and ours
/// returns after the snapshot is durable), but after *receiving* a snapshot it queues the
/// install on the state machine worker and the purge (`Command::PurgeLog`, which has no
/// condition) on the core, which runs it at once: the purge could reach the disk before the
/// snapshot, and a crash between them would leave a log with a hole no snapshot fills.
#[derive(Default)]
pub struct PurgeGuard {
    durable_snapshots: Option<watch::Receiver<Option<LogId<u64>>>>,
}

impl PurgeGuard {
    /// Purges wait for the snapshots `durable_snapshots` reports from now on.
    pub fn attach(&mut self, durable_snapshots: watch::Receiver<Option<LogId<u64>>>) {
        self.durable_snapshots = Some(durable_snapshots);
    }

    /// Waits until a durable snapshot covers `log_id`, if a state machine store is attached.
    pub async fn wait_for_covering_snapshot(&mut self, log_id: LogId<u64>) -> Result<(), String> {
        let Some(durable) = &mut self.durable_snapshots else {
            return Ok(());
        };
        let covered = durable.wait_for(|durable| durable.is_some_and(|d| d.index >= log_id.index));
        let timeout = Duration::from_millis(PURGE_WAIT_MS_MAX);
        match tokio::time::timeout(timeout, covered).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_closed)) => {
                Err(format!("the state machine closed before a snapshot covered {log_id}"))
            }
            Err(_elapsed) => {
                Err(format!("no durable snapshot covered {log_id} within {PURGE_WAIT_MS_MAX} ms"))
            }
        }
    }
}
