//! The simulation's tap on each node's production state machine (`consensus::ApplyObserver`):
//! records which entry, commands and answers every node applied at every index, for the
//! checkers to compare across nodes and against what clients were told.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use consensus::apply_observer::ApplyObserver;
use consensus::Entry;
use openraft::{EntryPayload, LogId};

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
    /// The configuration a membership entry sets (none for any other entry).
    pub membership: Option<MembershipSeen>,
}

/// A membership entry's configuration: its voter sets (two while a change is half done:
/// openraft's joint consensus) and every member, voter or learner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MembershipSeen {
    pub configs: Vec<BTreeSet<u64>>,
    pub nodes: BTreeSet<u64>,
}

impl MembershipSeen {
    /// Whether a change is half done: old and new voters both decide.
    pub fn joint(&self) -> bool {
        self.configs.len() > 1
    }

    /// Every voter of any of its configurations.
    pub fn voters(&self) -> BTreeSet<u64> {
        self.configs.iter().flatten().copied().collect()
    }
}

/// What one node incarnation applied since the checkers last looked. Cheap to clone.
#[derive(Clone, Default)]
pub struct SimObserver {
    unobserved: Arc<Mutex<Vec<AppliedEntry>>>,
}

impl SimObserver {
    fn entries(&self) -> MutexGuard<'_, Vec<AppliedEntry>> {
        self.unobserved.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The entries applied since the last call.
    pub fn take_applied(&self) -> Vec<AppliedEntry> {
        std::mem::take(&mut self.entries())
    }
}

impl ApplyObserver for SimObserver {
    fn applied(&self, entry: &Entry, responses: &[Vec<u8>]) {
        let commands = match &entry.payload {
            EntryPayload::Normal(batch) => batch
                .0
                .iter()
                .zip(responses)
                .map(|(request, response)| AppliedCommand {
                    request: request.clone(),
                    response: response.clone(),
                })
                .collect(),
            EntryPayload::Blank | EntryPayload::Membership(_) => Vec::new(),
        };
        let membership = match &entry.payload {
            EntryPayload::Membership(membership) => Some(MembershipSeen {
                configs: membership.get_joint_config().clone(),
                nodes: membership.nodes().map(|(id, _)| *id).collect(),
            }),
            EntryPayload::Blank | EntryPayload::Normal(_) => None,
        };
        let (log_id, payload_hash) = (entry.log_id, payload_hash(entry));
        let applied = AppliedEntry { log_id, payload_hash, commands, membership };
        self.entries().push(applied);
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
