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

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, Vote};

    use super::*;

    fn log_id(term: u64, index: u64) -> LogId<u64> {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    /// Node 2 in `life`, leading in `term` if asked, having applied up to `applied`.
    fn node(life: u64, term: u64, leads: bool, applied: u64) -> NodeView {
        let mut metrics = consensus::Metrics::new_initial(2);
        metrics.vote = Vote::new_committed(term, 2);
        metrics.current_term = term;
        metrics.state = if leads { ServerState::Leader } else { ServerState::Follower };
        metrics.last_applied = Some(log_id(term, applied));
        NodeView {
            id: 2,
            incarnation: 0,
            life,
            metrics,
            leading_since_ms: None,
            core_running: true,
            log: BTreeMap::new(),
            purged: None,
            durable_vote: None,
            committed: None,
            durable_last_index: None,
            applied_index: applied,
            state: master::state::MasterState::default(),
        }
    }

    /// Node 2 in life 0 was removed at index 10 of term 3: in that life it may apply up to
    /// there and lead no later term; its next life (a wiped disk) is another member.
    #[test]
    fn a_removed_member_neither_leads_later_nor_applies_past_its_removal() {
        let removed = BTreeMap::from([((2, 0), log_id(3, 10))]);
        let cases = [
            (node(0, 3, false, 10), None),
            (node(0, 3, true, 9), None),
            (node(0, 4, true, 9), Some("leads in term 4")),
            (node(0, 3, false, 11), Some("applied index 11")),
            (node(1, 9, true, 40), None),
        ];
        for (view, expected) in cases {
            let found = check(&[view], &removed).err().map(|violation| violation.detail);
            match (expected, found) {
                (None, None) => {}
                (Some(words), Some(detail)) => assert!(detail.contains(words), "{detail}"),
                (expected, found) => panic!("expected {expected:?}, found {found:?}"),
            }
        }
    }
}
