//! Election safety (Raft §5.2), as openraft 0.9 defines it. The workspace builds openraft
//! without `single-term-leader`, so a leader is identified by its *leader id* (term, node id),
//! totally ordered, and two nodes may lead in one term (a seed found exactly that, legally:
//! a voter granted T9-N1 and then the greater T9-N2). What must hold, and is checked here:
//! - a node that says it leads holds a committed vote for itself (its leader id won a quorum);
//! - at most one node leads under one leader id;
//! - a node's durable vote never goes back, across crashes and restarts too. (The page-cache
//!   vote may: a crash can lose a committed vote whose flush had not finished, which is fine,
//!   as nothing was acknowledged on it; seed 333 does that.) A disk wiped after the node's
//!   removal starts a new member with the old id, and a new record of its votes.

use std::collections::BTreeMap;

use openraft::{ServerState, Vote};

use super::{NodeView, Violation};

/// Leaders by leader id, and each node's highest vote so far.
#[derive(Default)]
pub struct ElectionSafety {
    leaders: BTreeMap<(u64, u64), u64>,
    /// By node id and life (how many times its disk was wiped).
    votes: BTreeMap<(u64, u64), Vote<u64>>,
    highest_term: u64,
}

impl ElectionSafety {
    pub fn check(&mut self, nodes: &[NodeView]) -> Result<(), Violation> {
        for node in nodes {
            let (id, metrics) = (node.id, &node.metrics);
            if let Some(stored) = node.durable_vote {
                self.check_vote((id, node.life), stored)?;
            }
            let vote = metrics.vote;
            if metrics.state != ServerState::Leader {
                continue;
            }
            let leader_id = vote.leader_id();
            if !vote.is_committed() || leader_id.voted_for() != Some(id) {
                return Err(Violation::new(
                    "election safety",
                    format!("node {id} leads without a committed vote for itself (vote {vote})"),
                ));
            }
            self.highest_term = self.highest_term.max(leader_id.term);
            let key = (leader_id.term, id);
            if let Some(other) = self.leaders.insert(key, id).filter(|other| *other != id) {
                return Err(Violation::new(
                    "election safety",
                    format!("nodes {other} and {id} both lead as {leader_id}"),
                ));
            }
        }
        Ok(())
    }

    fn check_vote(&mut self, (id, life): (u64, u64), vote: Vote<u64>) -> Result<(), Violation> {
        match self.votes.insert((id, life), vote) {
            Some(before) if vote < before => Err(Violation::new(
                "election safety",
                format!("node {id}'s durable vote went back from {before} to {vote}"),
            )),
            _ => Ok(()),
        }
    }

    /// The highest term in which a leader was seen.
    pub fn highest_term(&self) -> u64 {
        self.highest_term
    }
}
