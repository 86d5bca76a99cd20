//! Raft core health: the openraft core of every running node keeps running. openraft stops a
//! core on a fatal error and panics on a broken assumption of its own (for example that a
//! follower's log never goes back); either leaves that node dead while the other two may still
//! finish the job, so without this check such a run would pass.

use super::{NodeView, Violation};

pub fn check(nodes: &[NodeView]) -> Result<(), Violation> {
    match nodes.iter().find(|node| !node.core_running) {
        Some(node) => {
            let why = match &node.metrics.running_state {
                Err(fatal) => format!(": {fatal}"),
                Ok(()) => " (it panicked)".to_string(),
            };
            Err(Violation::new(
                "raft core",
                format!(
                    "node {} (incarnation {}) stopped its Raft core{why}",
                    node.id, node.incarnation
                ),
            ))
        }
        None => Ok(()),
    }
}
