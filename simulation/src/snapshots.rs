//! The simulator's snapshot storage (`consensus::snapshot_store::SnapshotStore`) on a
//! [`SimDisk`]: a write takes a seeded time (longer on a slow disk, held while it is stalled)
//! and lands whole at its end; a crash before then loses it, as a crash before the rename
//! loses a production snapshot file.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use consensus::snapshot_file::SnapshotContents;
use consensus::snapshot_store::{SnapshotStore, StoredSnapshotFile, WriteFuture};
use consensus::StartError;
use openraft::{BasicNode, SnapshotMeta};

use crate::disk::{SimDisk, SnapshotFile};
use crate::rng::SimRng;

/// How long writing one snapshot takes on a healthy disk (a range, drawn per write).
const WRITE_MS: (u64, u64) = (5, 60);

/// One process's snapshot storage.
pub struct SimSnapshots {
    disk: SimDisk,
    generation: u64,
    node: u64,
    rng: Arc<Mutex<SimRng>>,
}

impl SimSnapshots {
    /// The snapshots of node `node`'s process starting now on `disk`.
    pub fn open(disk: SimDisk, node: u64, rng: SimRng) -> Self {
        let generation = disk.generation();
        Self { disk, generation, node, rng: Arc::new(Mutex::new(rng)) }
    }

    fn write_ms(&self) -> u64 {
        self.rng
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .range(WRITE_MS.0, WRITE_MS.1)
    }
}

impl SnapshotStore for SimSnapshots {
    fn load_newest(&self) -> Result<Option<StoredSnapshotFile>, StartError> {
        let Some(file) = self.disk.newest_snapshot() else { return Ok(None) };
        let path =
            PathBuf::from(format!("sim://node-{}/snapshot-{:?}", self.node, file.meta.last_log_id));
        let contents = SnapshotContents::decode(&file.bytes)
            .map_err(|reason| StartError::Snapshot { path: path.clone(), reason })?;
        Ok(Some((path, contents, file.bytes)))
    }

    fn write(&self, meta: SnapshotMeta<u64, BasicNode>, bytes: Vec<u8>) -> WriteFuture {
        let (disk, generation, write_ms) = (self.disk.clone(), self.generation, self.write_ms());
        Box::pin(async move {
            let crashed = |_| io::Error::other("the process crashed during the snapshot write");
            disk.begin_snapshot(generation).map_err(crashed)?;
            let slow_factor = disk.usable().await;
            tokio::time::sleep(Duration::from_millis(write_ms * slow_factor)).await;
            disk.usable().await;
            disk.finish_snapshot(generation, SnapshotFile { meta, bytes }).map_err(crashed)
        })
    }
}
