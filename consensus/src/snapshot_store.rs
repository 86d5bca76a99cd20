//! `SnapshotStore`: where a node keeps its snapshots. `SnapshotDir` (files in the data
//! directory) in production; the simulation keeps them on its in-memory disk, where a crash
//! mid-write loses the snapshot being written. `StateMachineStore` sees only this trait.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;

use openraft::{BasicNode, SnapshotMeta};

use crate::error::StartError;
use crate::snapshot_file::{SnapshotContents, SnapshotDir};

/// The newest stored snapshot: where it is (for error messages), its contents and its bytes.
pub type StoredSnapshotFile = (PathBuf, SnapshotContents, Vec<u8>);

/// A future that resolves once a snapshot write is durable (or failed).
pub type WriteFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

/// Durable snapshot storage.
pub trait SnapshotStore: Send + Sync + 'static {
    /// The newest snapshot, if any; one that does not check or decode is an error, never a
    /// reason to fall back to an older one.
    fn load_newest(&self) -> Result<Option<StoredSnapshotFile>, StartError>;

    /// Stores `bytes` (an encoded [`SnapshotContents`]) durably; resolves once a crash would
    /// keep it.
    fn write(&self, meta: SnapshotMeta<u64, BasicNode>, bytes: Vec<u8>) -> WriteFuture;
}

impl SnapshotStore for SnapshotDir {
    fn load_newest(&self) -> Result<Option<StoredSnapshotFile>, StartError> {
        SnapshotDir::load_newest(self)
    }

    /// Off the async threads: a large snapshot takes a while to fsync.
    fn write(&self, meta: SnapshotMeta<u64, BasicNode>, bytes: Vec<u8>) -> WriteFuture {
        let snapshots = self.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || snapshots.write(&meta, &bytes).map(drop))
                .await
                .map_err(io::Error::other)?
        })
    }
}
