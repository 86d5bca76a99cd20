//! Leases start afresh in every term: leases are the leader's soft state, so a node that starts
//! leading a term (even one that led before) must grant every holder a full lease before it
//! judges anyone. No `TrainerLost` or `ReleasePServerSlot` decided in term T may take effect
//! sooner than (nearly) a lease after T's leader was first seen (or, if earlier, since it
//! noted it began leading: the checkers may look only after a pause). The margin covers clock
//! drift and the checkers' step.

use std::collections::BTreeMap;

use master::state::{Command, Response};
use openraft::ServerState;

use super::state_machine_safety::LogCursor;
use super::{CanonicalLog, NodeView, Violation};

/// Of a lease, the part that must pass in a term before anyone is declared lost in it.
const LEASE_PART_PERCENT: u64 = 85;

/// When each term's leader was first seen, and how far the canonical log was read.
pub struct LeaseTerms {
    trainer_lease_ms: u64,
    pserver_lease_ms: u64,
    term_seen_ms: BTreeMap<u64, u64>,
    cursor: LogCursor,
}

impl LeaseTerms {
    pub fn new(trainer_lease_ms: u64, pserver_lease_ms: u64) -> Self {
        Self {
            trainer_lease_ms,
            pserver_lease_ms,
            term_seen_ms: BTreeMap::new(),
            cursor: LogCursor::default(),
        }
    }

    pub fn check(
        &mut self,
        nodes: &[NodeView],
        canonical: &CanonicalLog,
        now_ms: u64,
    ) -> Result<(), Violation> {
        for node in nodes.iter().filter(|node| node.metrics.state == ServerState::Leader) {
            let term = node.metrics.current_term;
            let since_ms = node.leading_since_ms.filter(|(led, _)| *led == term);
            let seen_ms = since_ms.map_or(now_ms, |(_, since_ms)| since_ms.min(now_ms));
            let first = self.term_seen_ms.entry(term).or_insert(seen_ms);
            *first = (*first).min(seen_ms);
        }
        for applied in self.cursor.read(canonical).into_iter().filter(|applied| !applied.replay) {
            let (request, response) = (applied.request, applied.response);
            let (Some(term), Some(lease_ms)) =
                (request.term, self.lease_ms(request.command.scoped().1))
            else {
                continue;
            };
            if matches!(response, Response::WrongTerm { .. }) {
                continue;
            }
            let Some(seen_ms) = self.term_seen_ms.get(&term) else { continue };
            let waited_ms = now_ms.saturating_sub(*seen_ms);
            if waited_ms * 100 < lease_ms * LEASE_PART_PERCENT {
                return Err(Violation::new(
                    "lease terms",
                    format!(
                        "entry {} applied {:?}, decided in term {term} only {waited_ms} ms \
                         after its leader was first seen: a lease is {lease_ms} ms",
                        applied.log_id, request.command
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The lease a leader decision ends, if it ends one.
    fn lease_ms(&self, command: &Command) -> Option<u64> {
        match command {
            Command::TrainerLost { .. } => Some(self.trainer_lease_ms),
            Command::ReleasePServerSlot { .. } => Some(self.pserver_lease_ms),
            _ => None,
        }
    }
}
