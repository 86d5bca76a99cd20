//! Agreement: any two masters' digests taken at the same applied index are equal (replicas
//! that applied the same log hold the same state), and the final reads, after the last heal
//! and a quiet window, find every master at the same index.

use std::collections::BTreeMap;

use crate::checker::{completed, Violation};
use crate::history::{Op, OpKind, Operation, Value};

const NAME: &str = "agreement";

pub fn check(ops: &[Op]) -> Vec<Violation> {
    let digests: Vec<(usize, u64, u64, u64)> = completed(ops)
        .into_iter()
        .filter(|pair| pair.kind() == OpKind::Ok)
        .filter_map(|pair| match (&pair.invoke.f, &pair.complete.value) {
            (Operation::Digest { master }, Value::Digest { applied_index, digest }) => {
                Some((pair.complete.index, *master, *applied_index, *digest))
            }
            _ => None,
        })
        .collect();
    let mut violations = Vec::new();
    let mut first_at: BTreeMap<u64, (usize, u64, u64)> = BTreeMap::new();
    for (op, master, index, digest) in &digests {
        match first_at.get(index) {
            Some((other_op, other_master, other_digest)) if other_digest != digest => {
                let message = format!(
                    "masters {other_master} and {master} applied up to index {index} but hold different states ({other_digest:#x} vs {digest:#x})"
                );
                violations.push(Violation::new(NAME, message, vec![*other_op, *op]));
            }
            Some(_) => {}
            None => {
                first_at.insert(*index, (*op, *master, *digest));
            }
        }
    }
    violations.extend(final_reads_converged(&digests));
    violations
}

/// The last digest read of each master: all at one index.
fn final_reads_converged(digests: &[(usize, u64, u64, u64)]) -> Option<Violation> {
    let mut last: BTreeMap<u64, (usize, u64)> = BTreeMap::new();
    for (op, master, index, _) in digests {
        last.insert(*master, (*op, *index));
    }
    let indexes: Vec<u64> = last.values().map(|(_, index)| *index).collect();
    if indexes.windows(2).all(|pair| pair[0] == pair[1]) {
        return None;
    }
    let message = format!("after the heal the masters never reached the same applied index: {last:?} (master: (op, index))");
    Some(Violation::new(NAME, message, last.values().map(|(op, _)| *op).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_history::Builder;

    fn digests(values: &[(u64, u64, u64)]) -> Vec<Op> {
        let mut builder = Builder::default();
        for (time, (master, applied_index, digest)) in values.iter().enumerate() {
            let time = time as u64 * 2;
            let f = Operation::Digest { master: *master };
            builder = builder.call(
                (time, time + 1),
                800,
                f,
                OpKind::Ok,
                Value::Digest { applied_index: *applied_index, digest: *digest },
            );
        }
        builder.ops
    }

    #[test]
    fn equal_states_at_equal_indexes_pass() {
        assert_eq!(check(&digests(&[(1, 40, 7), (2, 40, 7), (3, 40, 7)])), Vec::new());
    }

    #[test]
    fn diverged_states_are_caught() {
        let violations = check(&digests(&[(1, 40, 7), (2, 40, 8), (3, 40, 7)]));
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].message.contains("masters 1 and 2"), "{violations:?}");
    }

    #[test]
    fn replicas_that_never_converge_are_caught() {
        let violations = check(&digests(&[(1, 40, 7), (2, 40, 7), (3, 12, 3)]));
        assert!(
            violations.iter().any(|violation| violation.message.contains("never reached")),
            "{violations:?}"
        );
    }
}
