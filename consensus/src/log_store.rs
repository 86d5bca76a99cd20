//! The durable Raft log in sled: entries, vote, committed and purged log ids, and the record of
//! how this data directory was bootstrapped. Every sled detail of the crate lives here.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::File;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, LogId, RaftLogReader, StorageIOError, Vote};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use tokio::sync::watch;

use crate::raft_log::{PurgeGuard, RaftLog};

use crate::codec;
use crate::durable_log::{acknowledge_early, DurableLog, DurableWatch};
use crate::error::StartError;
use crate::flusher::Flusher;
use crate::log_store_closed::{LogStoreClosed, OpenHandle};
use crate::type_config::{Entry, StorageError, TypeConfig};

mod stored_entries;
use stored_entries::encoded_entries;

/// An encoded entry may not exceed this: sled stores values over ~128 KiB in blob files it
/// never fsyncs, so a bigger entry would not be durable.
pub const ENTRY_BYTES_MAX: usize = 64 * 1024;

/// Log entries are `log/` + the index as big-endian `u64`, so keys sort by index.
const LOG_PREFIX: &[u8] = b"log/";
/// The first key after every log key (`'/' + 1 == '0'`).
const LOG_END: &[u8] = b"log0";
const VOTE_KEY: &[u8] = b"meta/vote";
const COMMITTED_KEY: &[u8] = b"meta/committed";
const PURGED_KEY: &[u8] = b"meta/purged";
const BOOTSTRAP_KEY: &[u8] = b"meta/bootstrap";

/// Who this data directory belongs to: written on first start, checked on every later one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootstrapRecord {
    pub node_id: u64,
    pub peers: BTreeMap<u64, String>,
}

/// The sled log store. openraft owns it; the flusher thread stops when it is dropped.
pub struct LogStore {
    db: sled::Db,
    flusher: Flusher,
    dir: PathBuf,
    open: OpenHandle,
    /// Holds purges back until a durable snapshot covers them.
    purge_guard: PurgeGuard,
    /// How far the log is durable, raised by the flusher (see `durable_log`).
    durable: DurableLog,
    /// This node's id, from the bootstrap record; `None` before it is written.
    own_id: Option<u64>,
    /// The last vote saved or read: with `own_id`, says which appends are the leader's own.
    vote: Option<Vote<u64>>,
}

/// Reads entries for replication while the store keeps appending.
#[derive(Clone)]
pub struct LogReader {
    db: sled::Db,
    _open: OpenHandle,
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, checking that everything in it decodes, and makes
    /// what it holds durable before returning (see `startup_sync`).
    pub fn open(dir: &Path) -> Result<(Self, LogStoreClosed), StartError> {
        Self::open_with(dir, &mut crate::startup_sync::sync_all)
    }

    /// [`LogStore::open`] with the seam that syncs each of the log's files and directories.
    pub(crate) fn open_with(
        dir: &Path,
        sync: crate::startup_sync::SyncPath<'_>,
    ) -> Result<(Self, LogStoreClosed), StartError> {
        let failed = |reason: String| StartError::Storage { dir: dir.to_path_buf(), reason };
        crate::disk_room::check_room(dir, crate::disk_room::LOG_OPEN_FREE_BYTES_MIN)
            .map_err(failed)?;
        // sled's periodic flusher is off: every flush goes through the one flusher thread.
        let db = sled::Config::new()
            .path(dir)
            .flush_every_ms(None)
            .open()
            .map_err(|error| failed(format!("sled cannot open it: {error}")))?;
        // Before anything is read: what a crashed process left in the page cache is not on
        // the disk yet, and would be answered as if it were (see `startup_sync`).
        crate::startup_sync::sync_tree(dir, sync).map_err(failed)?;
        let db_path = dir.join("db");
        let db_file = File::open(&db_path)
            .map_err(|error| failed(format!("cannot open {}: {error}", db_path.display())))?;
        let last_log_id = check_contents(&db).map_err(failed)?;
        let own_id = read_value::<BootstrapRecord>(&db, BOOTSTRAP_KEY)
            .map_err(|error| failed(error.to_string()))?
            .map(|record| record.node_id);
        let left_over = purge_left_over(&db).map_err(failed)?;
        let durable = DurableLog::new(last_log_id);
        let (flusher, thread) = Flusher::start(db.clone(), db_file, durable.clone(), left_over)
            .map_err(|error| failed(format!("cannot start the flusher thread: {error}")))?;
        let (open, closed) = LogStoreClosed::new(thread, db_path);
        let purge_guard = PurgeGuard::default();
        let dir = dir.to_path_buf();
        let store = Self { db, flusher, dir, open, purge_guard, durable, own_id, vote: None };
        Ok((store, closed))
    }

    /// Records who bootstrapped this directory, or checks that it is the same node and peers.
    async fn record_bootstrap(&mut self, record: &BootstrapRecord) -> Result<(), StartError> {
        let failed = |reason: String| StartError::Storage { dir: self.dir.clone(), reason };
        let recorded: Option<BootstrapRecord> =
            read_value(&self.db, BOOTSTRAP_KEY).map_err(|error| failed(error.to_string()))?;
        match recorded {
            Some(recorded) if recorded == *record => Ok(()),
            Some(recorded) => Err(StartError::BootstrapMismatch {
                dir: self.dir.clone(),
                recorded_id: recorded.node_id,
                recorded_peers: recorded.peers,
                configured_id: record.node_id,
                configured_peers: record.peers.clone(),
            }),
            None => {
                write_value(&self.db, BOOTSTRAP_KEY, record)
                    .map_err(|error| failed(error.to_string()))?;
                self.flusher.sync().await.map_err(|error| failed(error.to_string()))?;
                self.own_id = Some(record.node_id);
                Ok(())
            }
        }
    }

    /// Seeds this empty log for a member of a group restored from a saved state (`restore.rs`):
    /// every entry up to `snapshot` purged and committed (the snapshot file holds their
    /// effect), `vote` saved, and the bootstrap record naming the new peers; all synced.
    pub(crate) async fn seed_restored(
        &mut self,
        record: &BootstrapRecord,
        snapshot: LogId<u64>,
        vote: Vote<u64>,
    ) -> Result<(), StartError> {
        let dir = &self.dir;
        let failed = |error: anyhow::Error| StartError::Storage {
            dir: dir.clone(),
            reason: error.to_string(),
        };
        if self.own_id.is_some() || self.db.range(LOG_PREFIX..LOG_END).next().is_some() {
            return Err(failed(anyhow::anyhow!("a restore seeds only an empty log")));
        }
        write_value(&self.db, PURGED_KEY, &snapshot).map_err(&failed)?;
        write_value(&self.db, COMMITTED_KEY, &Some(snapshot)).map_err(&failed)?;
        write_value(&self.db, VOTE_KEY, &vote).map_err(&failed)?;
        self.record_bootstrap(record).await
    }
}

fn log_key(index: u64) -> [u8; 12] {
    let mut key = [0u8; 12];
    key[..4].copy_from_slice(LOG_PREFIX);
    key[4..].copy_from_slice(&index.to_be_bytes());
    key
}

fn read_value<T: DeserializeOwned>(db: &sled::Db, key: &[u8]) -> Result<Option<T>, anyhow::Error> {
    let Some(bytes) = db.get(key)? else {
        return Ok(None);
    };
    let value = codec::decode(&bytes).map_err(|error| {
        anyhow::anyhow!("value of key {} does not decode: {error}", String::from_utf8_lossy(key))
    })?;
    Ok(Some(value))
}

fn write_value<T: Serialize>(db: &sled::Db, key: &[u8], value: &T) -> Result<(), anyhow::Error> {
    db.insert(key, codec::encode(value)?)?;
    Ok(())
}

fn decode_entry(key: &[u8], bytes: &[u8]) -> Result<Entry, anyhow::Error> {
    let entry: Entry = codec::decode(bytes)
        .map_err(|error| anyhow::anyhow!("log entry under key {key:?} does not decode: {error}"))?;
    if key != log_key(entry.log_id.index) {
        anyhow::bail!("log entry {} is stored under key {key:?}", entry.log_id);
    }
    Ok(entry)
}

/// Decodes everything once at start, so a damaged directory refuses to start instead of
/// failing later in the middle of replication. Returns the last log id: what survived on disk.
fn check_contents(db: &sled::Db) -> Result<Option<LogId<u64>>, String> {
    read_value::<Vote<u64>>(db, VOTE_KEY).map_err(|error| error.to_string())?;
    read_value::<Option<LogId<u64>>>(db, COMMITTED_KEY).map_err(|error| error.to_string())?;
    let purged = read_value::<LogId<u64>>(db, PURGED_KEY).map_err(|error| error.to_string())?;
    read_value::<BootstrapRecord>(db, BOOTSTRAP_KEY).map_err(|error| error.to_string())?;
    let mut last = None;
    for item in db.range(LOG_PREFIX..LOG_END) {
        let (key, value) = item.map_err(|error| error.to_string())?;
        last = Some(decode_entry(&key, &value).map_err(|error| error.to_string())?.log_id);
    }
    Ok(later(purged, last))
}

/// The log's last id: its last entry's, unless the purged id is further (a snapshot installed
/// past the log, or entries at or below the purged id not yet removed).
fn later(purged: Option<LogId<u64>>, last_entry: Option<LogId<u64>>) -> Option<LogId<u64>> {
    match (purged, last_entry) {
        (Some(purged), Some(entry)) if entry.index < purged.index => Some(purged),
        (purged, None) => purged,
        (_, entry) => entry,
    }
}

/// The index a stop left purged entries at or below (recorded purged, not all removed yet).
fn purge_left_over(db: &sled::Db) -> Result<Option<u64>, String> {
    let purged = read_value::<LogId<u64>>(db, PURGED_KEY).map_err(|error| error.to_string())?;
    let Some(purged) = purged else { return Ok(None) };
    let first = db.range(purged_keys(purged.index)).keys().next().transpose();
    Ok(first.map_err(|error| error.to_string())?.map(|_| purged.index))
}

/// The keys of every entry at or below `index`: what a purge to `index` removes.
pub(crate) fn purged_keys(index: u64) -> std::ops::RangeInclusive<Vec<u8>> {
    LOG_PREFIX.to_vec()..=log_key(index).to_vec()
}

/// The keys of `range`, or `None` when it is empty.
fn key_range(range: &impl RangeBounds<u64>) -> Option<(Vec<u8>, Vec<u8>)> {
    let start = match range.start_bound() {
        Bound::Included(index) => *index,
        Bound::Excluded(index) => index.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(index) => index.checked_add(1),
        Bound::Excluded(index) => Some(*index),
        Bound::Unbounded => None,
    };
    if end.is_some_and(|end| end <= start) {
        return None;
    }
    let end_key = end.map_or_else(|| LOG_END.to_vec(), |end| log_key(end).to_vec());
    Some((log_key(start).to_vec(), end_key))
}

/// Inserts `entries` one by one, in order: a crash keeps a prefix of them (sled recovers a
/// prefix of its writes), which is a log, and nothing is acknowledged before the flush. One
/// sled batch would cost two extra log buffer writes on sled's IO threads per append (its
/// batches seal the buffer before and after their manifest).
#[allow(clippy::result_large_err)]
fn insert_entries(db: &sled::Db, entries: &[Entry]) -> Result<(), StorageError> {
    for (key, bytes) in encoded_entries(entries)? {
        db.insert(key, bytes).map_err(|error| StorageIOError::write_logs(&error))?;
    }
    Ok(())
}

/// The entries of `range` above the purged id: the flusher removes purged entries a chunk at a
/// time, so some may still be stored.
// openraft's trait methods return its (large) `StorageError`; boxing it here would only move
// the allocation.
#[allow(clippy::result_large_err)]
fn read_entries(db: &sled::Db, range: impl RangeBounds<u64>) -> Result<Vec<Entry>, StorageError> {
    let Some((start, end)) = key_range(&range) else {
        return Ok(Vec::new());
    };
    let purged = read_value::<LogId<u64>>(db, PURGED_KEY)
        .map_err(|error| StorageIOError::read_logs(AnyError::error(error)))?;
    let start = match purged.map(|purged| purged.index.checked_add(1)) {
        None => start,
        Some(Some(first_kept)) => start.max(log_key(first_kept).to_vec()),
        Some(None) => return Ok(Vec::new()),
    };
    if start >= end {
        return Ok(Vec::new());
    }
    let mut entries = Vec::new();
    for item in db.range(start..end) {
        let (key, value) = item.map_err(|error| StorageIOError::read_logs(&error))?;
        let entry = decode_entry(&key, &value)
            .map_err(|error| StorageIOError::read_logs(AnyError::error(error)))?;
        entries.push(entry);
    }
    Ok(entries)
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        read_entries(&self.db, range)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        read_entries(&self.db, range)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id: Option<LogId<u64>> = read_value(&self.db, PURGED_KEY)
            .map_err(|error| StorageIOError::read_logs(AnyError::error(error)))?;
        let last = self.db.range(LOG_PREFIX..LOG_END).next_back();
        let last_entry = match last {
            None => None,
            Some(item) => {
                let (key, value) = item.map_err(|error| StorageIOError::read_logs(&error))?;
                let entry = decode_entry(&key, &value)
                    .map_err(|error| StorageIOError::read_logs(AnyError::error(error)))?;
                Some(entry.log_id)
            }
        };
        let last_log_id = later(last_purged_log_id, last_entry);
        Ok(LogState { last_purged_log_id, last_log_id })
    }

    async fn get_log_reader(&mut self) -> LogReader {
        LogReader { db: self.db.clone(), _open: self.open.clone() }
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError> {
        // A term only grows: a vote saved over a later one would let this node vote twice in
        // a term after a restart.
        if let Some(saved) = &self.vote {
            let (term, saved_term) = (vote.leader_id().term, saved.leader_id().term);
            assert!(term >= saved_term, "a term only grows: vote of term {term} over {saved_term}");
        }
        write_value(&self.db, VOTE_KEY, vote)
            .map_err(|error| StorageIOError::write_vote(AnyError::error(error)))?;
        self.flusher.sync().await.map_err(|error| StorageIOError::write_vote(&error))?;
        self.vote = Some(*vote);
        Ok(())
    }

    /// Called by openraft once, at start-up.
    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError> {
        let vote: Option<Vote<u64>> = read_value(&self.db, VOTE_KEY)
            .map_err(|error| StorageIOError::read_vote(AnyError::error(error)))?;
        let record: Option<BootstrapRecord> = read_value(&self.db, BOOTSTRAP_KEY)
            .map_err(|error| StorageIOError::read_vote(AnyError::error(error)))?;
        let vote = vote.map(|vote| vote_after_restart(vote, record.map(|record| record.node_id)));
        self.vote = vote;
        Ok(vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<(), StorageError> {
        // Not synced: a lost committed log id only means re-applying less on restart.
        write_value(&self.db, COMMITTED_KEY, &committed)
            .map_err(|error| StorageIOError::write(AnyError::error(error)))?;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, StorageError> {
        let committed: Option<Option<LogId<u64>>> = read_value(&self.db, COMMITTED_KEY)
            .map_err(|error| StorageIOError::read(AnyError::error(error)))?;
        Ok(committed.flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let Some(last) = entries.last().map(|entry| entry.log_id) else {
            callback.log_io_completed(Ok(()));
            return Ok(());
        };
        let early = acknowledge_early(&entries, self.own_id, self.vote.as_ref());
        insert_entries(&self.db, &entries)?;
        let flushing = if early {
            // The leader's own entries: replicated while the flusher makes them durable.
            callback.log_io_completed(Ok(()));
            self.flusher.written(last).await
        } else {
            self.flusher.appended(callback, last).await
        };
        flushing.map_err(|error| StorageIOError::write_logs(&error))?;
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), StorageError> {
        let mut batch = sled::Batch::default();
        for key in self.db.range(log_key(log_id.index).to_vec()..LOG_END.to_vec()).keys() {
            batch.remove(key.map_err(|error| StorageIOError::write_logs(&error))?);
        }
        self.db.apply_batch(batch).map_err(|error| StorageIOError::write_logs(&error))?;
        // Rare (a new leader overwrote this node's tail), so it may as well be durable at once.
        self.flusher.sync().await.map_err(|error| StorageIOError::write_logs(&error))?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), StorageError> {
        self.purge_guard
            .wait_for_covering_snapshot(log_id)
            .await
            .map_err(|reason| StorageIOError::write_logs(AnyError::error(reason)))?;
        // The purged id is recorded here, the entries it covers are removed by the flusher
        // thread a chunk at a time (`flusher.rs`): a snapshot interval's entries in one batch
        // stalled this task, openraft's, for most of a second. Nothing reads an entry at or
        // below the purged id again (openraft reads above it, and the log's last id is the
        // later of the two), and a stop only leaves more behind, removed at the next open. Not
        // synced: a lost purge only keeps more.
        write_value(&self.db, PURGED_KEY, &log_id)
            .map_err(|error| StorageIOError::write_logs(AnyError::error(error)))?;
        self.flusher
            .purge(log_id.index)
            .await
            .map_err(|error| StorageIOError::write_logs(&error))?;
        Ok(())
    }
}

/// The vote a node restarts with. A committed vote for itself (it was the established leader)
/// comes back uncommitted, same term and candidate. openraft 0.9.25 restarts such a node as the
/// leader of the same term, reusing that term's old no-op log id, so `ensure_linearizable`
/// would read at the persisted committed index, which can lag what the previous incarnation
/// acknowledged: after a crash of the whole group a linearizable read could miss an
/// acknowledged write (seen by the `all_masters_killed_at_once` end-to-end test). Uncommitted,
/// the node must win a new term, whose first entry fences every read. Election safety is
/// unchanged: the node still voted for itself in that term and votes for no one else in it.
pub fn vote_after_restart(vote: Vote<u64>, own_id: Option<u64>) -> Vote<u64> {
    if vote.committed && own_id.is_some() && vote.leader_id().voted_for() == own_id {
        return Vote::new(vote.leader_id().term, vote.leader_id().node_id);
    }
    vote
}

#[cfg(test)]
mod restart_tests {
    use super::*;

    /// Only a committed vote for this very node is downgraded on restart.
    #[test]
    fn own_established_leadership_is_not_restored() {
        let check = |vote: Vote<u64>, own_id: Option<u64>, expected: Vote<u64>| {
            assert_eq!(vote_after_restart(vote, own_id), expected, "{vote} as {own_id:?}");
        };
        check(Vote::new_committed(3, 1), Some(1), Vote::new(3, 1));
        check(Vote::new_committed(3, 2), Some(1), Vote::new_committed(3, 2));
        check(Vote::new(3, 1), Some(1), Vote::new(3, 1));
        check(Vote::new_committed(3, 1), None, Vote::new_committed(3, 1));
    }
}

#[cfg(test)]
mod purge_tests;

#[cfg(test)]
mod flush_tests;

impl RaftLog for LogStore {
    async fn check_bootstrap(&mut self, record: &BootstrapRecord) -> Result<(), StartError> {
        self.record_bootstrap(record).await
    }

    fn durable(&self) -> DurableWatch {
        self.durable.watch()
    }

    fn purge_behind(&mut self, durable_snapshots: watch::Receiver<Option<LogId<u64>>>) {
        self.purge_guard.attach(durable_snapshots);
    }
}
