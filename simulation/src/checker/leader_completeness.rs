//! Leader completeness (Raft §5.4): an entry committed in some term is in the log of every
//! leader of a later term. An applied entry is committed; it is taken as committed in the
//! highest term any node had reached when it was first seen applied (a bound on the real
//! commit term), and every leader of a higher term must hold it, in its log or in the
//! snapshot its log was purged behind.

use std::collections::BTreeMap;

use openraft::ServerState;

use super::{CanonicalLog, NodeView, Violation};

/// Per committed index: the term bound it was committed under.
#[derive(Default)]
pub struct LeaderCompleteness {
    committed_term: BTreeMap<u64, u64>,
    highest_term: u64,
}

impl LeaderCompleteness {
    pub fn check(
        &mut self,
        nodes: &[NodeView],
        canonical: &CanonicalLog,
        highest_leader_term: u64,
    ) -> Result<(), Violation> {
        let current = nodes.iter().map(|node| node.metrics.current_term).max().unwrap_or(0);
        self.highest_term = self.highest_term.max(current).max(highest_leader_term);
        let newest = self.committed_term.keys().next_back().copied();
        for index in canonical.entries.keys().filter(|index| Some(**index) > newest) {
            self.committed_term.insert(*index, self.highest_term);
        }
        for node in nodes.iter().filter(|node| node.metrics.state == ServerState::Leader) {
            let term = node.metrics.current_term;
            for (index, committed_term) in &self.committed_term {
                if *committed_term >= term {
                    continue;
                }
                let Some(entry) = canonical.entries.get(index) else { continue };
                if node.purged.is_some_and(|purged| purged.index >= *index) {
                    continue;
                }
                let held = node.log.get(index).map(|(log_id, _)| *log_id);
                if held != Some(entry.log_id) {
                    return Err(Violation::new(
                        "leader completeness",
                        format!(
                            "node {} leads term {term} but holds {held:?} at index {index}, where \
                             {} was committed by term {committed_term}",
                            node.id, entry.log_id
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
