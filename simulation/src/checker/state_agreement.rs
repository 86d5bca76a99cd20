//! State agreement: every running node whose state machine holds the log up to the same index
//! holds the same task-queue state, whether it applied each entry, installed a snapshot, or
//! joined the group on a wiped disk. (State machine safety compares what each entry answered;
//! this compares what the entries built.)

use std::collections::BTreeMap;

use super::{NodeView, Violation};

pub fn check(nodes: &[NodeView]) -> Result<(), Violation> {
    let mut first_at: BTreeMap<u64, &NodeView> = BTreeMap::new();
    for node in nodes {
        let Some(first) = first_at.get(&node.applied_index) else {
            first_at.insert(node.applied_index, node);
            continue;
        };
        if first.state != node.state {
            return Err(Violation::new(
                "state agreement",
                format!(
                    "nodes {} and {} both applied up to index {} and hold different states",
                    first.id, node.id, node.applied_index
                ),
            ));
        }
    }
    Ok(())
}
