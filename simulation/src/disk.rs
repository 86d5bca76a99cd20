//! A node's simulated disk: the Raft log as the running process sees it (the page cache) and
//! as it survives a crash (the durable image), and the snapshot files. A log write reaches the
//! durable image only when a flush covering it completes; a crash throws away every write that
//! was not flushed, and a snapshot whose write had not finished. The disk can be made slow or
//! stalled (a fault), which holds every flush and snapshot write.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use consensus::log_store::BootstrapRecord;
use consensus::Entry;
use openraft::{BasicNode, LogId, SnapshotMeta, Vote};
use tokio::sync::Notify;

use crate::observer::payload_hash;

/// The log as stored: entries, vote, committed and purged log ids.
#[derive(Clone, Debug, Default)]
pub struct LogImage {
    pub vote: Option<Vote<u64>>,
    pub committed: Option<LogId<u64>>,
    pub purged: Option<LogId<u64>>,
    pub bootstrap: Option<BootstrapRecord>,
    pub entries: BTreeMap<u64, Entry>,
    /// Each entry's log id and payload hash, kept beside the entries so the checkers can
    /// compare logs without cloning them.
    pub summary: BTreeMap<u64, (LogId<u64>, u64)>,
}

/// One write, in the order the store issued it.
#[derive(Clone, Debug)]
enum Write {
    Append(Vec<Entry>),
    /// Removes entries at and after this index.
    Truncate(u64),
    /// Removes entries at and before this log id and records it as purged.
    Purge(LogId<u64>),
    Vote(Vote<u64>),
    Committed(Option<LogId<u64>>),
    Bootstrap(BootstrapRecord),
}

impl LogImage {
    fn apply(&mut self, write: &Write) {
        match write {
            Write::Append(entries) => {
                for entry in entries {
                    let summary = (entry.log_id, payload_hash(entry));
                    self.summary.insert(entry.log_id.index, summary);
                    self.entries.insert(entry.log_id.index, entry.clone());
                }
            }
            Write::Truncate(index) => {
                self.entries.split_off(index);
                self.summary.split_off(index);
            }
            Write::Purge(log_id) => {
                self.entries = self.entries.split_off(&(log_id.index + 1));
                self.summary = self.summary.split_off(&(log_id.index + 1));
                self.purged = Some(*log_id);
            }
            Write::Vote(vote) => self.vote = Some(*vote),
            Write::Committed(committed) => self.committed = *committed,
            Write::Bootstrap(record) => self.bootstrap = Some(record.clone()),
        }
    }
}

/// A snapshot file on the disk.
#[derive(Clone, Debug)]
pub struct SnapshotFile {
    pub meta: SnapshotMeta<u64, BasicNode>,
    pub bytes: Vec<u8>,
}

/// How the disk misbehaves: every flush and snapshot write takes `slow_factor` times as long,
/// and none completes while it is stalled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskFaults {
    pub slow_factor: u64,
    pub stalled: bool,
}

impl Default for DiskFaults {
    fn default() -> Self {
        Self { slow_factor: 1, stalled: false }
    }
}

/// The newest snapshot files kept, as the production store keeps two.
const SNAPSHOT_FILES_KEPT: usize = 2;

/// The disk of one node, shared by its successive incarnations. Cheap to clone.
#[derive(Clone, Default)]
pub struct SimDisk {
    inner: Arc<Mutex<DiskState>>,
    faults: Arc<(Mutex<DiskFaults>, Notify)>,
}

#[derive(Default)]
struct DiskState {
    /// Bumped by every crash; a store of an older generation belongs to a dead process.
    generation: u64,
    current: LogImage,
    durable: LogImage,
    /// Writes not yet flushed, with their sequence numbers, oldest first.
    unflushed: VecDeque<(u64, Write)>,
    next_sequence: u64,
    /// Durable snapshot files, oldest first.
    snapshots: Vec<SnapshotFile>,
    /// Snapshot writes begun and not finished (a crash loses them).
    snapshot_writes_in_flight: u64,
    /// Flushes still to fail with an I/O error (a fault), each leaving its writes unflushed.
    failing_flushes: u64,
}

/// A write made by a process that crashed since: its store must stop.
#[derive(Debug)]
pub struct ProcessCrashed;

/// Why a flush did not make its writes durable.
#[derive(Debug)]
pub enum FlushError {
    /// The process crashed since it issued the writes.
    Crashed,
    /// The disk reported an I/O error (a fault): the writes are not durable.
    Failed,
}

impl std::fmt::Display for FlushError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            Self::Crashed => "the process crashed before the flush",
            Self::Failed => "the disk reported an I/O error on the flush",
        })
    }
}

impl SimDisk {
    fn state(&self) -> MutexGuard<'_, DiskState> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sets how the disk misbehaves.
    pub fn set_faults(&self, faults: DiskFaults) {
        *self.faults.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = faults;
        self.faults.1.notify_waiters();
    }

    /// Waits until the disk is not stalled; the factor a write's time is multiplied by.
    /// (Woken through a `Notify`, in the order the waits began, so a seed replays.)
    pub async fn usable(&self) -> u64 {
        loop {
            let changed = self.faults.1.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let faults = *self.faults.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if !faults.stalled {
                return faults.slow_factor.max(1);
            }
            changed.await;
        }
    }

    /// The generation a newly started process works in.
    pub fn generation(&self) -> u64 {
        self.state().generation
    }

    /// What the process of `generation` reads, or `ProcessCrashed`.
    pub fn read<R>(
        &self,
        generation: u64,
        read: impl FnOnce(&LogImage) -> R,
    ) -> Result<R, ProcessCrashed> {
        let state = self.state();
        if state.generation != generation {
            return Err(ProcessCrashed);
        }
        Ok(read(&state.current))
    }

    /// The last entry the living process's log was purged behind.
    pub fn purged(&self) -> Option<LogId<u64>> {
        self.state().current.purged
    }

    /// The commit the living process last saved (what openraft told it is committed).
    pub fn committed(&self) -> Option<LogId<u64>> {
        self.state().current.committed
    }

    /// The index of the last log entry the disk would keep in a crash now (an entry, or the
    /// purged log id behind which a durable snapshot holds the rest).
    pub fn durable_last_index(&self) -> Option<u64> {
        let state = self.state();
        let last_entry = state.durable.entries.keys().next_back().copied();
        last_entry.max(state.durable.purged.map(|purged| purged.index))
    }

    /// The vote the disk would keep in a crash now.
    pub fn durable_vote(&self) -> Option<Vote<u64>> {
        self.state().durable.vote
    }

    /// Log id and payload hash of every entry the living process sees, for the checkers.
    pub fn summary(&self) -> BTreeMap<u64, (LogId<u64>, u64)> {
        self.state().current.summary.clone()
    }

    fn write(&self, generation: u64, write: Write) -> Result<u64, ProcessCrashed> {
        let mut state = self.state();
        if state.generation != generation {
            return Err(ProcessCrashed);
        }
        state.current.apply(&write);
        let sequence = state.next_sequence;
        state.next_sequence += 1;
        state.unflushed.push_back((sequence, write));
        Ok(sequence)
    }

    /// Buffers appended entries; returns the sequence number a flush must reach.
    pub fn append(&self, generation: u64, entries: Vec<Entry>) -> Result<u64, ProcessCrashed> {
        self.write(generation, Write::Append(entries))
    }

    /// Buffers the removal of entries from `index` on.
    pub fn truncate(&self, generation: u64, index: u64) -> Result<u64, ProcessCrashed> {
        self.write(generation, Write::Truncate(index))
    }

    /// Buffers the removal of entries up to `log_id`.
    pub fn purge(&self, generation: u64, log_id: LogId<u64>) -> Result<u64, ProcessCrashed> {
        self.write(generation, Write::Purge(log_id))
    }

    /// Buffers a vote.
    pub fn save_vote(&self, generation: u64, vote: Vote<u64>) -> Result<u64, ProcessCrashed> {
        self.write(generation, Write::Vote(vote))
    }

    /// Buffers the committed log id.
    pub fn save_committed(
        &self,
        generation: u64,
        committed: Option<LogId<u64>>,
    ) -> Result<u64, ProcessCrashed> {
        self.write(generation, Write::Committed(committed))
    }

    /// Buffers the record of who bootstrapped the log.
    pub fn save_bootstrap(
        &self,
        generation: u64,
        record: BootstrapRecord,
    ) -> Result<u64, ProcessCrashed> {
        self.write(generation, Write::Bootstrap(record))
    }

    /// A snapshot write begins: a crash before [`SimDisk::finish_snapshot`] loses it.
    pub fn begin_snapshot(&self, generation: u64) -> Result<(), ProcessCrashed> {
        let mut state = self.state();
        if state.generation != generation {
            return Err(ProcessCrashed);
        }
        state.snapshot_writes_in_flight += 1;
        Ok(())
    }

    /// The snapshot write is durable (written, fsynced and renamed into place).
    pub fn finish_snapshot(
        &self,
        generation: u64,
        file: SnapshotFile,
    ) -> Result<(), ProcessCrashed> {
        let mut state = self.state();
        if state.generation != generation {
            return Err(ProcessCrashed);
        }
        state.snapshot_writes_in_flight = state.snapshot_writes_in_flight.saturating_sub(1);
        state.snapshots.push(file);
        state.snapshots.sort_by_key(|file| file.meta.last_log_id);
        let old = state.snapshots.len().saturating_sub(SNAPSHOT_FILES_KEPT);
        state.snapshots.drain(..old);
        Ok(())
    }

    /// The newest durable snapshot file.
    pub fn newest_snapshot(&self) -> Option<SnapshotFile> {
        self.state().snapshots.last().cloned()
    }

    /// Whether a snapshot write is under way (a crash now loses it).
    pub fn snapshot_write_in_flight(&self) -> bool {
        self.state().snapshot_writes_in_flight > 0
    }

    /// The next flush fails with an I/O error and makes nothing durable (as an fsync that
    /// returns EIO: the process can no longer know what reached the disk and must stop).
    pub fn fail_next_flush(&self) {
        self.state().failing_flushes += 1;
    }

    /// Makes every write up to `sequence` durable, as an fsync does: in order, all or nothing
    /// per write.
    pub fn flush(&self, generation: u64, sequence: u64) -> Result<(), FlushError> {
        let mut state = self.state();
        if state.generation != generation {
            return Err(FlushError::Crashed);
        }
        if state.failing_flushes > 0 {
            state.failing_flushes -= 1;
            return Err(FlushError::Failed);
        }
        while state.unflushed.front().is_some_and(|(pending, _)| *pending <= sequence) {
            let Some((_, write)) = state.unflushed.pop_front() else { break };
            state.durable.apply(&write);
        }
        Ok(())
    }

    /// The process dies: every unflushed write and unfinished snapshot is lost and the page
    /// cache is what the disk holds. Returns how many writes were lost.
    pub fn crash(&self) -> usize {
        let mut state = self.state();
        state.generation += 1;
        let lost = state.unflushed.len();
        state.unflushed.clear();
        state.current = state.durable.clone();
        let lost_snapshots = std::mem::take(&mut state.snapshot_writes_in_flight);
        lost + lost_snapshots as usize
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;

    fn entry(index: u64) -> Entry {
        let log_id = LogId::new(CommittedLeaderId::new(1, 1), index);
        Entry { log_id, payload: EntryPayload::Blank }
    }

    /// A failed flush makes nothing durable and the next one flushes what it left.
    #[test]
    fn a_failed_flush_leaves_its_writes_unflushed() -> Result<(), ProcessCrashed> {
        let disk = SimDisk::default();
        let generation = disk.generation();
        let first = disk.append(generation, vec![entry(1)])?;
        disk.fail_next_flush();
        assert!(matches!(disk.flush(generation, first), Err(FlushError::Failed)));
        let second = disk.append(generation, vec![entry(2)])?;
        disk.flush(generation, second).map_err(|_failed| ProcessCrashed)?;
        assert_eq!(disk.crash(), 0, "the second flush covered both entries");
        assert_eq!(disk.summary().keys().copied().collect::<Vec<_>>(), [1, 2]);
        Ok(())
    }

    /// A crash keeps exactly the flushed writes, and the crashed process can neither read nor
    /// write any more.
    #[test]
    fn crash_keeps_only_flushed_writes() -> Result<(), ProcessCrashed> {
        let disk = SimDisk::default();
        let generation = disk.generation();
        let flushed = disk.append(generation, vec![entry(1), entry(2)])?;
        disk.save_vote(generation, Vote::new(1, 1))?;
        disk.flush(generation, flushed).map_err(|_failed| ProcessCrashed)?;
        disk.append(generation, vec![entry(3)])?;
        disk.truncate(generation, 2)?;
        assert_eq!(disk.summary().keys().copied().collect::<Vec<_>>(), [1]);
        assert_eq!(disk.crash(), 3, "the vote, the third entry and the truncation were unflushed");
        assert_eq!(disk.summary().keys().copied().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(disk.durable_vote(), None);
        assert!(disk.append(generation, vec![entry(3)]).is_err());
        assert!(disk.read(generation, |image| image.entries.len()).is_err());
        assert_eq!(disk.read(disk.generation(), |image| image.entries.len())?, 2);
        Ok(())
    }
}
