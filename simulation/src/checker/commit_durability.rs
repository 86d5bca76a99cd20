//! Commit durability: no node knows of a commit beyond what is durable on the leader. The
//! leader acknowledges its own new entries before they are durable (`consensus::durable_log`)
//! and so may count itself towards a quorum it is not yet part of on disk; it must then never
//! announce such a commit, or a follower could apply (and answer from, and snapshot) an entry
//! that a power loss on the leader would take back. Every node the newest leader leads
//! learned its commit from this leader or an earlier one, and what was committed before is
//! durable on every later leader (it voted durably, after its log), so every other node's
//! saved commit stays at or below the leader's durable log. The leader's own commit may run
//! ahead of its disk; that is the early acknowledgement, not a fault.

use super::{NodeView, Violation};

pub fn check(nodes: &[NodeView]) -> Result<(), Violation> {
    let leaders = nodes.iter().filter(|node| leads(node));
    let Some(leader) = leaders.max_by_key(|node| node.metrics.current_term) else {
        return Ok(());
    };
    let durable = leader.durable_last_index;
    // A node in a later term may have heard a newer leader that is down or not yet seen to
    // lead here; only what leaders up to this one's term announced is held to its disk. The
    // term is read from all a node shows: its metrics, its saved vote, and its commit's own
    // entry (a node just restarted shows term 0 in its metrics until it read its vote, yet
    // its commit may be of a later term it led itself).
    let term = leader.metrics.current_term;
    let newest_term = |node: &NodeView| {
        let vote = node.durable_vote.map_or(0, |vote| vote.leader_id().term);
        let commit = node.committed.map_or(0, |log_id| log_id.leader_id.term);
        node.metrics.current_term.max(vote).max(commit)
    };
    let led = nodes.iter().filter(|node| node.id != leader.id && newest_term(node) <= term);
    for node in led {
        let committed = node.committed.map(|log_id| log_id.index);
        if committed > durable {
            return Err(Violation::new(
                "commit durability",
                format!(
                    "node {} knows entry {committed:?} committed, beyond what its leader, node {} \
                     in term {}, has durable ({durable:?})",
                    node.id, leader.id, leader.metrics.current_term
                ),
            ));
        }
    }
    Ok(())
}

fn leads(node: &NodeView) -> bool {
    let metrics = &node.metrics;
    metrics.state == openraft::ServerState::Leader && metrics.current_leader == Some(node.id)
}
