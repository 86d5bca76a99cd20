//! Log matching (Raft §5.3): if two logs hold an entry with the same index and term, they hold
//! the same entry there and the same entries before it.

use std::collections::BTreeMap;

use openraft::LogId;

use super::{NodeView, Violation};

type LogSummary = BTreeMap<u64, (LogId<u64>, u64)>;

/// Compares the logs of every pair of running nodes.
pub fn check(nodes: &[NodeView]) -> Result<(), Violation> {
    for (position, first) in nodes.iter().enumerate() {
        for second in &nodes[position + 1..] {
            check_pair(first.id, &first.log, second.id, &second.log)?;
        }
    }
    Ok(())
}

fn check_pair(
    first_id: u64,
    first: &LogSummary,
    second_id: u64,
    second: &LogSummary,
) -> Result<(), Violation> {
    // Walking down from the top: once an index and term match, every lower index must match.
    let mut matched_at: Option<u64> = None;
    for (index, (log_id, hash)) in first.iter().rev() {
        let Some((other_id, other_hash)) = second.get(index) else { continue };
        let same_id = log_id == other_id;
        if same_id && hash != other_hash {
            return Err(Violation::new(
                "log matching",
                format!("entry {log_id} differs between nodes {first_id} and {second_id}"),
            ));
        }
        match (same_id, matched_at) {
            (true, None) => matched_at = Some(*index),
            (false, Some(matched)) => {
                return Err(Violation::new(
                    "log matching",
                    format!(
                        "nodes {first_id} and {second_id} agree at index {matched} but hold \
                         {log_id} and {other_id} at index {index}"
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}
