//! A removed member counts in no quorum: once the entry that removes it is committed, the
//! removed member (by id and life: the same id on a wiped disk is a new member) never leads in
//! a later term and never applies an entry past that one. The leader stops sending it the log
//! when it appends its removal, and every later leader holds the removal, so a removed member
//! that still runs (a removed master runs until it learns it was removed) can neither win a
//! joint or new quorum nor learn of any later commit.

use std::collections::BTreeMap;

use openraft::{LogId, ServerState};

use super::{NodeView, Violation};

pub fn check(
    nodes: &[NodeView],
    removed: &BTreeMap<(u64, u64), LogId<u64>>,
) -> Result<(), Violation> {
    for node in nodes {
        let Some(removal) = removed.get(&(node.id, node.life)) else { continue };
        let metrics = &node.metrics;
        let term = metrics.vote.leader_id().term;
        if metrics.state == ServerState::Leader && term > removal.leader_id.term {
            return Err(Violation::new(
                "removed member",
                format!(
                    "node {} (life {}) leads in term {term}, after its removal at {removal}",
                    node.id, node.life
                ),
            ));
        }
        let applied = metrics.last_applied.map_or(0, |log_id| log_id.index);
        if applied > removal.index {
            return Err(Violation::new(
                "removed member",
                format!(
                    "node {} (life {}) applied index {applied}, past its removal at {removal}",
                    node.id, node.life
                ),
            ));
        }
    }
    Ok(())
}
