//! The task-queue invariants: `MasterState::check_invariants` on every node's state after every
//! step, and `MasterState::check_transition` between a node's consecutive states (within one
//! incarnation: a restarted node starts from the empty state and replays its log).

use std::collections::BTreeMap;

use master::state::MasterState;

use super::{NodeView, Violation};

/// Each node's state at the previous step, with its incarnation.
#[derive(Default)]
pub struct TaskQueueInvariants {
    previous: BTreeMap<u64, (u64, MasterState)>,
}

impl TaskQueueInvariants {
    pub fn check(&mut self, nodes: &[NodeView]) -> Result<(), Violation> {
        for node in nodes {
            let id = node.id;
            node.state.check_invariants().map_err(|violation| {
                Violation::new("task queue", format!("node {id}: {violation}"))
            })?;
            if let Some((incarnation, before)) = self.previous.get(&id) {
                if *incarnation == node.incarnation {
                    MasterState::check_transition(before, &node.state).map_err(|violation| {
                        Violation::new("task queue transition", format!("node {id}: {violation}"))
                    })?;
                }
            }
            self.previous.insert(id, (node.incarnation, node.state.clone()));
        }
        Ok(())
    }
}
