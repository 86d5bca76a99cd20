//! The simulator's Raft log store: openraft's storage-v2 `RaftLogStorage` over a [`SimDisk`].
//! An append is acknowledged only after the flusher made it durable, unless the planted
//! early-ack bug is switched on.

use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;

use consensus::log_store::BootstrapRecord;
use consensus::{
    acknowledge_early, DurableLog, DurableWatch, Entry, LogStoreClosed, OpenHandle, PurgeGuard,
    RaftLog, StartError, TypeConfig,
};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, LogId, RaftLogReader, StorageError, StorageIOError, Vote};
use tokio::sync::watch;

use crate::disk::{ProcessCrashed, SimDisk};
use crate::flusher::{FlushWaiter, Flusher};
use crate::rng::SimRng;

type StoreResult<T> = Result<T, StorageError<u64>>;

/// One process's log store. A crash of the disk makes every later call fail.
pub struct SimLogStore {
    disk: SimDisk,
    generation: u64,
    flusher: Flusher,
    /// The planted bug: acknowledge appends before they are durable.
    ack_before_durable: bool,
    /// The node the disk belongs to, for the restart vote rule; `None` in the storage suite
    /// (as the production store before its bootstrap record is written).
    node_id: Option<u64>,
    purge_guard: PurgeGuard,
    open: OpenHandle,
    /// How far the log is durable, raised by the flusher.
    durable: DurableLog,
    /// The last vote saved or read: with `node_id`, says which appends are the leader's own.
    vote: Option<Vote<u64>>,
}

/// Reads entries for replication while the store appends.
#[derive(Clone)]
pub struct SimLogReader {
    disk: SimDisk,
    generation: u64,
    _open: OpenHandle,
}

impl SimLogStore {
    /// A store for a process starting now on `disk`; flushes take `flush_delay_ms`.
    pub fn open(
        disk: SimDisk,
        rng: SimRng,
        flush_delay_ms: (u64, u64),
        ack_before_durable: bool,
    ) -> (Self, LogStoreClosed) {
        let generation = disk.generation();
        // What survived the last crash is on disk: durable.
        let last = disk
            .read(generation, |image| {
                image.entries.values().next_back().map(|entry| entry.log_id).or(image.purged)
            })
            .unwrap_or(None);
        let durable = DurableLog::new(last);
        let flusher =
            Flusher::start(disk.clone(), generation, rng, flush_delay_ms, durable.clone());
        let (open, closed) = LogStoreClosed::in_memory();
        let purge_guard = PurgeGuard::default();
        let store = Self {
            disk,
            generation,
            flusher,
            ack_before_durable,
            node_id: None,
            purge_guard,
            open,
            durable,
            vote: None,
        };
        (store, closed)
    }

    /// Names the node whose disk this is, so a restart follows the production store's vote rule.
    pub fn with_node_id(mut self, node_id: u64) -> Self {
        self.node_id = Some(node_id);
        self
    }
}

fn crashed(_: ProcessCrashed) -> AnyError {
    AnyError::error("the process crashed")
}

// openraft's trait methods return its (large) `StorageError`; boxing it here would only move
// the allocation.
#[allow(clippy::result_large_err)]
fn read_entries(
    disk: &SimDisk,
    generation: u64,
    range: impl RangeBounds<u64>,
) -> StoreResult<Vec<Entry>> {
    disk.read(generation, |image| {
        image.entries.range(range).map(|(_, entry)| entry.clone()).collect()
    })
    .map_err(|error| StorageIOError::read_logs(crashed(error)).into())
}

impl RaftLogReader<TypeConfig> for SimLogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> StoreResult<Vec<Entry>> {
        read_entries(&self.disk, self.generation, range)
    }
}

impl RaftLogReader<TypeConfig> for SimLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> StoreResult<Vec<Entry>> {
        read_entries(&self.disk, self.generation, range)
    }
}

impl RaftLogStorage<TypeConfig> for SimLogStore {
    type LogReader = SimLogReader;

    async fn get_log_state(&mut self) -> StoreResult<LogState<TypeConfig>> {
        let (last_purged_log_id, last) = self
            .disk
            .read(self.generation, |image| {
                (image.purged, image.entries.values().next_back().map(|entry| entry.log_id))
            })
            .map_err(|error| StorageIOError::read_logs(crashed(error)))?;
        Ok(LogState { last_purged_log_id, last_log_id: last.or(last_purged_log_id) })
    }

    async fn get_log_reader(&mut self) -> SimLogReader {
        SimLogReader {
            disk: self.disk.clone(),
            generation: self.generation,
            _open: self.open.clone(),
        }
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> StoreResult<()> {
        let sequence = self
            .disk
            .save_vote(self.generation, *vote)
            .map_err(|error| StorageIOError::write_vote(crashed(error)))?;
        self.flusher.sync(sequence).await.map_err(|error| StorageIOError::write_vote(&error))?;
        self.vote = Some(*vote);
        Ok(())
    }

    /// Called by openraft once, at start-up: the production store's restart rule applies (a
    /// committed vote for itself comes back uncommitted; see `vote_after_restart`).
    async fn read_vote(&mut self) -> StoreResult<Option<Vote<u64>>> {
        let vote = self
            .disk
            .read(self.generation, |image| image.vote)
            .map_err(|error| StorageIOError::read_vote(crashed(error)))?;
        self.vote = vote.map(|vote| consensus::log_store::vote_after_restart(vote, self.node_id));
        Ok(self.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> StoreResult<()> {
        // Not waited for: a lost committed id only means re-applying less after a restart.
        self.disk
            .save_committed(self.generation, committed)
            .map_err(|error| StorageIOError::write(crashed(error)))?;
        Ok(())
    }

    async fn read_committed(&mut self) -> StoreResult<Option<LogId<u64>>> {
        self.disk
            .read(self.generation, |image| image.committed)
            .map_err(|error| StorageIOError::read(crashed(error)).into())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StoreResult<()>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let Some(last) = entries.last().map(|entry| entry.log_id) else {
            callback.log_io_completed(Ok(()));
            return Ok(());
        };
        let early = acknowledge_early(&entries, self.node_id, self.vote.as_ref());
        let sequence = self
            .disk
            .append(self.generation, entries)
            .map_err(|error| StorageIOError::write_logs(crashed(error)))?;
        let waiter = if self.ack_before_durable {
            // The planted bug: every append is acknowledged, and said to be durable, at once.
            callback.log_io_completed(Ok(()));
            self.durable.flushed(last);
            FlushWaiter::Nobody
        } else if early {
            callback.log_io_completed(Ok(()));
            FlushWaiter::Written(last)
        } else {
            FlushWaiter::Append(callback, last)
        };
        self.flusher.flush(sequence, waiter).map_err(|error| write_logs(&error))?;
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> StoreResult<()> {
        // Not waited for: flushes are in order, so the next append's flush makes it durable
        // before the entries that replace the removed ones.
        self.disk
            .truncate(self.generation, log_id.index)
            .map_err(|error| StorageIOError::write_logs(crashed(error)))?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> StoreResult<()> {
        self.purge_guard
            .wait_for_covering_snapshot(log_id)
            .await
            .map_err(|reason| StorageIOError::write_logs(AnyError::error(reason)))?;
        self.disk
            .purge(self.generation, log_id)
            .map_err(|error| StorageIOError::write_logs(crashed(error)))?;
        Ok(())
    }
}

fn write_logs(error: &io::Error) -> StorageError<u64> {
    StorageIOError::write_logs(error).into()
}

impl RaftLog for SimLogStore {
    /// As the production store: the first start records who bootstrapped the log (durably),
    /// every later one must match it.
    async fn check_bootstrap(&mut self, record: &BootstrapRecord) -> Result<(), StartError> {
        let failed = |reason: String| StartError::Storage { dir: "sim".into(), reason };
        let recorded = self
            .disk
            .read(self.generation, |image| image.bootstrap.clone())
            .map_err(|_| failed("the process crashed".to_string()))?;
        match recorded {
            Some(recorded) if recorded == *record => Ok(()),
            Some(recorded) => Err(failed(format!("bootstrapped as {recorded:?}, not {record:?}"))),
            None => {
                let sequence = self
                    .disk
                    .save_bootstrap(self.generation, record.clone())
                    .map_err(|_| failed("the process crashed".to_string()))?;
                self.flusher.sync(sequence).await.map_err(|error| failed(error.to_string()))
            }
        }
    }

    fn purge_behind(&mut self, durable_snapshots: watch::Receiver<Option<LogId<u64>>>) {
        self.purge_guard.attach(durable_snapshots);
    }

    fn durable(&self) -> DurableWatch {
        self.durable.watch()
    }
}
