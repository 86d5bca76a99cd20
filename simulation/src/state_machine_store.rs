//! The simulator's in-memory `RaftStateMachine`: applies entries to a [`MasterMachine`] and
//! records, for the checkers, which entry (and which commands and answers) it applied at which
//! index. Snapshots are kept in memory: they are derived state, rebuilt from the durable log.

use std::io::Cursor;
use std::sync::{Arc, Mutex, MutexGuard};

use consensus::{Entry, Responses, TypeConfig};
use master::state::MasterState;
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};

use crate::machine::MasterMachine;
use crate::trace::fnv1a;

/// One applied command and the answer the state machine gave.
#[derive(Clone, Debug)]
pub struct AppliedCommand {
    pub request: Vec<u8>,
    pub response: Vec<u8>,
}

/// One applied log entry.
#[derive(Clone, Debug)]
pub struct AppliedEntry {
    pub log_id: LogId<u64>,
    /// A hash of the entry's payload, equal on every node that applied the same entry.
    pub payload_hash: u64,
    pub commands: Vec<AppliedCommand>,
}

/// The state machine of one process. Cheap to clone: clones share it.
#[derive(Clone)]
pub struct SimStateMachine {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    machine: Box<dyn MasterMachine>,
    last_applied: Option<LogId<u64>>,
    last_membership: StoredMembership<u64, BasicNode>,
    snapshot: Option<(SnapshotMeta<u64, BasicNode>, Vec<u8>)>,
    snapshot_count: u64,
    /// Applied entries the checkers have not looked at yet.
    unobserved: Vec<AppliedEntry>,
}

impl SimStateMachine {
    /// A fresh, empty state machine around `machine`.
    pub fn new(machine: Box<dyn MasterMachine>) -> Self {
        let inner = Inner {
            machine,
            last_applied: None,
            last_membership: StoredMembership::default(),
            snapshot: None,
            snapshot_count: 0,
            unobserved: Vec::new(),
        };
        Self { inner: Arc::new(Mutex::new(inner)) }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A copy of the task-queue state.
    pub fn master_state(&self) -> MasterState {
        self.inner().machine.master_state().clone()
    }

    /// The entries applied since the last call.
    pub fn take_applied(&self) -> Vec<AppliedEntry> {
        std::mem::take(&mut self.inner().unobserved)
    }
}

/// The hash that identifies an entry's payload across nodes.
pub fn payload_hash(entry: &Entry) -> u64 {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&entry.log_id.leader_id.term.to_le_bytes());
    bytes.extend_from_slice(&entry.log_id.index.to_le_bytes());
    match &entry.payload {
        EntryPayload::Blank => bytes.push(0),
        EntryPayload::Normal(commands) => {
            bytes.push(1);
            for command in &commands.0 {
                bytes.extend_from_slice(&(command.len() as u64).to_le_bytes());
                bytes.extend_from_slice(command);
            }
        }
        EntryPayload::Membership(membership) => {
            bytes.push(2);
            bytes.extend_from_slice(format!("{membership:?}").as_bytes());
        }
    }
    fnv1a(&bytes)
}

fn apply_one(inner: &mut Inner, entry: Entry) -> Responses {
    inner.last_applied = Some(entry.log_id);
    let payload_hash = payload_hash(&entry);
    let mut commands = Vec::new();
    match entry.payload {
        EntryPayload::Blank => {}
        EntryPayload::Normal(batch) => {
            for request in batch.0 {
                let response = inner.machine.apply(&request, entry.log_id.leader_id.term);
                commands.push(AppliedCommand { request, response });
            }
        }
        EntryPayload::Membership(membership) => {
            inner.last_membership = StoredMembership::new(Some(entry.log_id), membership);
        }
    }
    let responses = Responses(commands.iter().map(|command| command.response.clone()).collect());
    inner.unobserved.push(AppliedEntry { log_id: entry.log_id, payload_hash, commands });
    responses
}

impl RaftSnapshotBuilder<TypeConfig> for SimStateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        let mut inner = self.inner();
        inner.snapshot_count += 1;
        let last_log_id = inner.last_applied;
        let (index, term) = last_log_id.map_or((0, 0), |id| (id.index, id.leader_id.term));
        let snapshot_id = format!("{term}-{index}-{}", inner.snapshot_count);
        let last_membership = inner.last_membership.clone();
        let meta = SnapshotMeta { last_log_id, last_membership, snapshot_id };
        let bytes = inner.machine.snapshot();
        inner.snapshot = Some((meta.clone(), bytes.clone()));
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

impl RaftStateMachine<TypeConfig> for SimStateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        let inner = self.inner();
        Ok((inner.last_applied, inner.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Responses>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut inner = self.inner();
        Ok(entries.into_iter().map(|entry| apply_one(&mut inner, entry)).collect())
    }

    async fn get_snapshot_builder(&mut self) -> Self {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let bytes = snapshot.into_inner();
        let mut inner = self.inner();
        inner.machine.restore(&bytes).map_err(|error| {
            StorageIOError::read_snapshot(Some(meta.signature()), AnyError::error(error))
        })?;
        inner.last_applied = meta.last_log_id;
        inner.last_membership = meta.last_membership.clone();
        inner.snapshot = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        let inner = self.inner();
        Ok(inner
            .snapshot
            .clone()
            .map(|(meta, bytes)| Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) }))
    }
}
