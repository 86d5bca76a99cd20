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

#[cfg(test)]
mod tests {
    use openraft::CommittedLeaderId;

    use super::*;

    /// A log of `(term, payload hash)` per index from 1.
    fn log(entries: &[(u64, u64)]) -> LogSummary {
        (1u64..)
            .zip(entries)
            .map(|(index, (term, hash))| {
                (index, (LogId::new(CommittedLeaderId::new(*term, 1), index), *hash))
            })
            .collect()
    }

    /// Logs that diverge only after their last common entry pass; a shared entry over a
    /// divergent prefix, or one log id with two payloads, is caught.
    #[test]
    fn pairs_are_judged_by_their_highest_match() {
        let check = |first: &[(u64, u64)], second: &[(u64, u64)], ok: bool| {
            let result = check_pair(1, &log(first), 2, &log(second));
            assert_eq!(result.is_ok(), ok, "{first:?} vs {second:?}: {result:?}");
        };
        check(&[(1, 10), (1, 11)], &[(1, 10)], true);
        check(&[(1, 10), (1, 11)], &[(1, 10), (2, 20)], true);
        check(&[(1, 10), (1, 11)], &[(2, 20), (1, 11)], false);
        check(&[(1, 10)], &[(1, 99)], false);
    }
}
