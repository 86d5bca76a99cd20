//! Adapts an application [`StateMachine`] to openraft's `RaftStateMachine`: applies entries,
//! tracks the last applied log id and membership, builds and installs snapshot files.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta, StorageIOError,
    StoredMembership,
};
use tokio::sync::watch;

use crate::applied_index::AppliedIndex;
use crate::apply_observer::ApplyObserver;
use crate::durable_log::DurableWatch;
use crate::error::StartError;
use crate::snapshot_file::{SnapshotContents, SnapshotDir, STATE_SNAPSHOT_BYTES_MAX};
use crate::snapshot_store::SnapshotStore;
use crate::type_config::{Entry, Responses, StorageError, TypeConfig};
use crate::StateMachine;

/// The application state plus what openraft needs to know about it. Cheap to clone: the
/// clones share one state (the snapshot builder is a clone).
pub struct StateMachineStore<S> {
    shared: Arc<Shared<S>>,
}

struct Shared<S> {
    applied: RwLock<Applied<S>>,
    /// `applied.last_applied`'s index, raised after it, for linearizable reads to wait on.
    applied_index: AppliedIndex,
    snapshots: Arc<dyn SnapshotStore>,
    /// Told of every applied entry, when the node was opened with one.
    observer: Option<Arc<dyn ApplyObserver>>,
    current: Mutex<Option<StoredSnapshot>>,
    /// Held by a snapshot build from reading the state to setting `current`, and by an install
    /// from writing its file to setting `current`. openraft runs builds on their own task, so
    /// without it a build that read the state before an install could finish after it and put
    /// its older snapshot back as `current` (and in the newest file), and both could delete
    /// the same old file.
    snapshot_turn: tokio::sync::Mutex<()>,
    /// The newest snapshot whose file (and directory entry) is fsynced; the log store purges
    /// only entries it covers (see `LogStore::purge_behind`).
    durable: watch::Sender<Option<LogId<u64>>>,
    /// [`STATE_SNAPSHOT_BYTES_MAX`]; smaller in tests.
    state_bytes_max: usize,
    /// The log's durability, once the node attached it: entries are applied only once durable
    /// in this node's log (see `durable_log`).
    apply_gate: OnceLock<DurableWatch>,
}

struct Applied<S> {
    machine: S,
    last_applied: Option<LogId<u64>>,
    last_membership: StoredMembership<u64, BasicNode>,
    /// Per member id, the index of the last applied membership that listed it (voter or
    /// learner): what a removed member compares a leader's membership against.
    listed: BTreeMap<u64, u64>,
}

impl<S> Applied<S> {
    /// Makes `membership` the last applied one and notes the members it lists.
    fn set_membership(&mut self, membership: StoredMembership<u64, BasicNode>) {
        note_listed(&mut self.listed, &membership);
        self.last_membership = membership;
    }
}

/// Notes in `listed` that `membership`'s entry listed each of its members.
fn note_listed(listed: &mut BTreeMap<u64, u64>, membership: &StoredMembership<u64, BasicNode>) {
    let Some(log_id) = membership.log_id() else { return };
    for (id, _) in membership.membership().nodes() {
        let noted = listed.entry(*id).or_insert(log_id.index);
        *noted = (*noted).max(log_id.index);
    }
}

#[derive(Clone)]
struct StoredSnapshot {
    meta: SnapshotMeta<u64, BasicNode>,
    bytes: Vec<u8>,
}

impl StoredSnapshot {
    fn into_snapshot(self) -> Snapshot<TypeConfig> {
        Snapshot { meta: self.meta, snapshot: Box::new(Cursor::new(self.bytes)) }
    }
}

impl<S> Clone for StateMachineStore<S> {
    fn clone(&self) -> Self {
        Self { shared: Arc::clone(&self.shared) }
    }
}

impl<S: StateMachine> StateMachineStore<S> {
    /// Opens the snapshot directory and restores `machine` from the newest snapshot in it.
    pub fn open(snapshot_dir: &Path, machine: S) -> Result<Self, StartError> {
        Self::open_in(Arc::new(SnapshotDir::open(snapshot_dir)?), None, machine)
    }

    /// Restores `machine` from the newest snapshot in `snapshots`; `observer` sees every
    /// entry applied from then on.
    pub fn open_in(
        snapshots: Arc<dyn SnapshotStore>,
        observer: Option<Arc<dyn ApplyObserver>>,
        mut machine: S,
    ) -> Result<Self, StartError> {
        let (last_applied, last_membership, current) = match snapshots.load_newest()? {
            None => (None, StoredMembership::default(), None),
            Some((path, contents, bytes)) => {
                machine
                    .restore(&contents.state)
                    .map_err(|error| StartError::Snapshot { path, reason: error.to_string() })?;
                let meta = contents.meta;
                let current = StoredSnapshot { meta: meta.clone(), bytes };
                (meta.last_log_id, meta.last_membership, Some(current))
            }
        };
        let applied_index = AppliedIndex::new(last_applied.map_or(0, |log_id| log_id.index));
        let mut listed = BTreeMap::new();
        note_listed(&mut listed, &last_membership);
        let applied = Applied { machine, last_applied, last_membership, listed };
        let durable = watch::Sender::new(
            current.as_ref().and_then(|current: &StoredSnapshot| current.meta.last_log_id),
        );
        let shared = Shared {
            durable,
            state_bytes_max: STATE_SNAPSHOT_BYTES_MAX,
            apply_gate: OnceLock::new(),
            applied: RwLock::new(applied),
            applied_index,
            snapshots,
            observer,
            current: Mutex::new(current),
            snapshot_turn: tokio::sync::Mutex::new(()),
        };
        Ok(Self { shared: Arc::new(shared) })
    }

    /// Like [`StateMachineStore::open`] with a smaller state limit, to test the refusal.
    #[cfg(test)]
    fn open_with_state_limit(snapshot_dir: &Path, machine: S, state_bytes_max: usize) -> Self {
        let mut store = Self::open(snapshot_dir, machine).expect("the snapshot dir opens");
        Arc::get_mut(&mut store.shared).expect("not shared yet").state_bytes_max = state_bytes_max;
        store
    }

    /// From now on, applies an entry only once `durable` covers it (see `durable_log`). Set
    /// once, before Raft starts.
    pub(crate) fn apply_when_durable(&self, durable: DurableWatch) {
        let attached = self.shared.apply_gate.set(durable);
        assert!(attached.is_ok(), "the apply gate is attached once");
    }

    /// Returns once every entry up to `last` is durable in this node's log.
    async fn wait_until_durable(&self, last: LogId<u64>) -> Result<(), StorageError> {
        let Some(gate) = self.shared.apply_gate.get() else {
            return Ok(());
        };
        gate.covers(last).await.map_err(|reason| {
            StorageIOError::write_logs(AnyError::error(format!("before applying {last}: {reason}")))
                .into()
        })
    }

    /// The last log id of the newest snapshot that is durable on disk, as it changes.
    pub fn durable_snapshots(&self) -> watch::Receiver<Option<LogId<u64>>> {
        self.shared.durable.subscribe()
    }

    /// Returns once the entry at `index` is applied (see `applied_index`).
    pub(crate) async fn applied_reaches(&self, index: u64) {
        self.shared.applied_index.reaches(index).await;
    }

    /// Runs `read` on the applied state.
    pub fn read<R>(&self, read: impl FnOnce(&S) -> R) -> R {
        read(&self.applied().machine)
    }

    /// Runs `read` on the applied state; also returns the index of the last entry in it.
    pub fn read_applied<R>(&self, read: impl FnOnce(&S) -> R) -> (u64, R) {
        let applied = self.applied();
        (applied.last_applied.map_or(0, |log_id| log_id.index), read(&applied.machine))
    }

    /// Runs `read` on the applied state; also returns the index and term of the last entry in
    /// it (zeros before any).
    pub fn read_applied_log_id<R>(&self, read: impl FnOnce(&S) -> R) -> ((u64, u64), R) {
        let applied = self.applied();
        let log_id = applied.last_applied.map_or((0, 0), |id| (id.index, id.leader_id.term));
        (log_id, read(&applied.machine))
    }

    /// The last membership applied (committed: it can no longer be undone).
    pub fn applied_membership(&self) -> StoredMembership<u64, BasicNode> {
        self.applied().last_membership.clone()
    }

    /// The index of the last applied membership that listed member `id` (as a voter or a
    /// learner), since this store opened (its snapshot's membership included).
    pub fn last_listed(&self, id: u64) -> Option<u64> {
        self.applied().listed.get(&id).copied()
    }

    fn applied(&self) -> RwLockReadGuard<'_, Applied<S>> {
        // A panic in `apply` leaves a state no replica can trust; carrying on is no worse than
        // what the panic already did, and openraft stops on the failed apply task anyway.
        self.shared.applied.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn applied_mut(&self) -> RwLockWriteGuard<'_, Applied<S>> {
        self.shared.applied.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn current(&self) -> Option<StoredSnapshot> {
        self.shared.current.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    fn set_current(&self, snapshot: StoredSnapshot) {
        *self.shared.current.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) =
            Some(snapshot);
    }

    /// Stores the snapshot durably, then announces it to the log's purges.
    async fn write_file(&self, snapshot: &StoredSnapshot) -> Result<(), StorageError> {
        let signature = Some(snapshot.meta.signature());
        let write = self.shared.snapshots.write(snapshot.meta.clone(), snapshot.bytes.clone());
        write.await.map_err(|error| StorageIOError::write_snapshot(signature, &error))?;
        let written = snapshot.meta.last_log_id;
        self.shared.durable.send_if_modified(|durable| {
            let newer = written > *durable;
            if newer {
                *durable = written;
            }
            newer
        });
        Ok(())
    }
}

impl<S> StateMachineStore<S> {
    /// The answer to a build whose state is too large for every replica to store and install.
    /// An error from `build_snapshot` stops openraft 0.9's core for good (the state machine
    /// worker's result is `?`-propagated in `RaftCore`), so the build "succeeds" with the
    /// previous snapshot (or an empty meta): openraft sees nothing newer, keeps its snapshot
    /// and purges nothing, and the group keeps committing with a growing log while a human
    /// shrinks the state.
    fn refuse_oversized(
        &self,
        last_log_id: Option<LogId<u64>>,
        size_bytes: usize,
    ) -> Snapshot<TypeConfig> {
        tracing::error!(
            ?last_log_id,
            size_bytes,
            size_bytes_max = self.shared.state_bytes_max,
            "the application state is too large to snapshot; keeping the previous snapshot and the log"
        );
        let previous =
            self.shared.current.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        match previous {
            Some(previous) => previous.into_snapshot(),
            None => Snapshot {
                meta: SnapshotMeta::default(),
                snapshot: Box::new(Cursor::new(Vec::new())),
            },
        }
    }
}

impl<S: StateMachine> RaftSnapshotBuilder<TypeConfig> for StateMachineStore<S> {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let _turn = self.shared.snapshot_turn.lock().await;
        let (last_log_id, last_membership, state) = {
            let applied = self.applied();
            (applied.last_applied, applied.last_membership.clone(), applied.machine.snapshot())
        };
        if state.len() > self.shared.state_bytes_max {
            return Ok(self.refuse_oversized(last_log_id, state.len()));
        }
        if let Some(current) =
            self.current().filter(|current| current.meta.last_log_id >= last_log_id)
        {
            // Never replace a snapshot that is as new or newer (an install got there first).
            return Ok(current.into_snapshot());
        }
        let (index, term) = last_log_id.map_or((0, 0), |id| (id.index, id.leader_id.term));
        // Named by its contents, so a replayed simulation names it alike.
        let snapshot_id = format!("{term}-{index}-{:08x}", crc32fast::hash(&state));
        let meta = SnapshotMeta { last_log_id, last_membership, snapshot_id };
        let contents = SnapshotContents { meta: meta.clone(), state };
        let bytes = contents
            .encode()
            .map_err(|error| StorageIOError::write_snapshot(Some(meta.signature()), &error))?;
        let stored = StoredSnapshot { meta: meta.clone(), bytes };
        self.write_file(&stored).await?;
        let snapshot = Box::new(Cursor::new(stored.bytes.clone()));
        self.set_current(stored);
        Ok(Snapshot { meta, snapshot })
    }
}

impl<S: StateMachine> RaftStateMachine<TypeConfig> for StateMachineStore<S> {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), StorageError> {
        let applied = self.applied();
        Ok((applied.last_applied, applied.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Responses>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        if let Some(last) = entries.last() {
            self.wait_until_durable(last.log_id).await?;
        }
        let mut applied = self.applied_mut();
        let mut responses = Vec::new();
        for entry in entries {
            let response = match &entry.payload {
                EntryPayload::Blank => Vec::new(),
                EntryPayload::Normal(commands) => {
                    let entry_term = entry.log_id.leader_id.term;
                    let machine = &mut applied.machine;
                    let answers =
                        commands.0.iter().map(|command| machine.apply(command, entry_term));
                    answers
                        .collect::<Result<_, _>>()
                        .map_err(|error| unappliable(&entry, &error))?
                }
                EntryPayload::Membership(membership) => {
                    let membership = membership.clone();
                    applied.set_membership(StoredMembership::new(Some(entry.log_id), membership));
                    Vec::new()
                }
            };
            applied.last_applied = Some(entry.log_id);
            if let Some(observer) = &self.shared.observer {
                observer.applied(&entry, &response);
            }
            responses.push(Responses(response));
        }
        let last_applied = applied.last_applied;
        drop(applied);
        self.shared.applied_index.raise(last_applied.map_or(0, |log_id| log_id.index));
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let signature = Some(meta.signature());
        let bytes = snapshot.into_inner();
        let contents = SnapshotContents::decode(&bytes).map_err(|reason| {
            StorageIOError::read_snapshot(signature.clone(), AnyError::error(reason))
        })?;
        if contents.meta.last_log_id != meta.last_log_id {
            let reason = format!(
                "file is at {:?}, the leader says {:?}",
                contents.meta.last_log_id, meta.last_log_id
            );
            return Err(StorageIOError::read_snapshot(signature, AnyError::error(reason)).into());
        }
        let stored = StoredSnapshot { meta: meta.clone(), bytes };
        let _turn = self.shared.snapshot_turn.lock().await;
        self.write_file(&stored).await?;
        {
            let mut applied = self.applied_mut();
            applied
                .machine
                .restore(&contents.state)
                .map_err(|error| StorageIOError::read_snapshot(signature, &error))?;
            applied.last_applied = meta.last_log_id;
            applied.set_membership(meta.last_membership.clone());
        }
        self.shared.applied_index.raise(meta.last_log_id.map_or(0, |log_id| log_id.index));
        self.set_current(stored);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        Ok(self.current().map(StoredSnapshot::into_snapshot))
    }
}

#[cfg(test)]
mod tests;

/// The fatal error of an entry this build cannot apply: openraft stops the core, and the
/// message (which says what to upgrade) is what `ConsensusNode::core_stopped` reports.
fn unappliable(entry: &Entry, error: &crate::ApplyError) -> StorageError {
    let reason = format!("entry {}: {error}", entry.log_id);
    StorageIOError::apply(entry.log_id, AnyError::error(reason)).into()
}
