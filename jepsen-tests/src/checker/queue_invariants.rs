//! Queue invariants in every status read: once the job is defined its task count never
//! changes (todo + pending + done + failed: no task lost or duplicated between the queues);
//! and reads are linearizable among themselves: a read that began after another ended shows
//! no smaller applied index, term, pass or dispatch count.

use crate::checker::{completed, Completed, Violation};
use crate::history::{Op, OpKind, Operation, StatusSnapshot, Value};

const NAME: &str = "queue-invariants";

pub fn check(ops: &[Op]) -> Vec<Violation> {
    let reads: Vec<(Completed<'_>, &StatusSnapshot)> = completed(ops)
        .into_iter()
        .filter(|pair| pair.kind() == OpKind::Ok && pair.invoke.f == Operation::Status)
        .filter_map(|pair| match &pair.complete.value {
            Value::Status(snapshot) => Some((pair.clone(), snapshot)),
            _ => None,
        })
        .collect();
    let mut violations = task_count_constant(&reads);
    violations.extend(monotone(&reads));
    violations
}

fn task_count_constant(reads: &[(Completed<'_>, &StatusSnapshot)]) -> Vec<Violation> {
    let defined: Vec<&(Completed<'_>, &StatusSnapshot)> =
        reads.iter().filter(|(_, snapshot)| snapshot.task_count > 0).collect();
    let Some((first, expected)) = defined.first() else { return Vec::new() };
    defined
        .iter()
        .filter(|(_, snapshot)| snapshot.task_count != expected.task_count)
        .map(|(pair, snapshot)| {
            let message = format!(
                "the queues hold {} tasks (todo {} + pending {} + done {} + failed {}), but {} at op {}",
                snapshot.task_count, snapshot.todo, snapshot.pending, snapshot.done, snapshot.failed,
                expected.task_count, first.complete.index
            );
            Violation::new(NAME, message, vec![first.complete.index, pair.complete.index])
        })
        .collect()
}

/// For reads A and B with A completed before B was invoked: B's counters are not behind A's.
fn monotone(reads: &[(Completed<'_>, &StatusSnapshot)]) -> Vec<Violation> {
    let mut violations = Vec::new();
    // The latest-completing earlier read is enough to compare against (real-time order).
    let mut best: Option<&(Completed<'_>, &StatusSnapshot)> = None;
    let mut by_completion: Vec<&(Completed<'_>, &StatusSnapshot)> = reads.iter().collect();
    by_completion.sort_by_key(|(pair, _)| pair.complete.index);
    let mut completed_before = by_completion.iter().peekable();
    let mut by_invocation: Vec<&(Completed<'_>, &StatusSnapshot)> = reads.iter().collect();
    by_invocation.sort_by_key(|(pair, _)| pair.invoke.index);
    for read in by_invocation {
        while let Some(earlier) =
            completed_before.next_if(|(pair, _)| pair.complete.index < read.0.invoke.index)
        {
            if best.is_none_or(|known| behind(known.1, earlier.1)) {
                best = Some(earlier);
            }
        }
        if let Some(earlier) = best {
            if behind(read.1, earlier.1) {
                let message = format!("a later read went back: {:?} after {:?}", read.1, earlier.1);
                violations.push(Violation::new(
                    NAME,
                    message,
                    vec![earlier.0.complete.index, read.0.complete.index],
                ));
            }
        }
    }
    violations
}

/// Whether `later` is behind `earlier` in any counter that never goes back.
fn behind(later: &StatusSnapshot, earlier: &StatusSnapshot) -> bool {
    later.applied_index < earlier.applied_index
        || later.term < earlier.term
        || later.pass < earlier.pass
        || later.dispatched < earlier.dispatched
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_history::Builder;

    fn status(applied_index: u64, todo: u64, done: u64) -> Value {
        let snapshot = StatusSnapshot {
            term: 1,
            applied_index,
            pass: 1,
            todo,
            done,
            task_count: todo + done,
            dispatched: done,
            ..Default::default()
        };
        Value::Status(snapshot)
    }

    fn read(builder: Builder, times: (u64, u64), value: Value) -> Builder {
        builder.call(times, 900, Operation::Status, OpKind::Ok, value)
    }

    #[test]
    fn consistent_reads_pass() {
        let history =
            read(read(Builder::default(), (0, 1), status(5, 10, 0)), (2, 3), status(9, 7, 3));
        assert_eq!(check(&history.ops), Vec::new());
    }

    #[test]
    fn a_lost_task_is_caught() {
        let history =
            read(read(Builder::default(), (0, 1), status(5, 10, 0)), (2, 3), status(9, 6, 3));
        let violations = check(&history.ops);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].message.contains("9 tasks"), "{violations:?}");
    }

    #[test]
    fn a_read_going_back_is_caught() {
        let history =
            read(read(Builder::default(), (0, 1), status(9, 7, 3)), (2, 3), status(5, 10, 0));
        let violations = check(&history.ops);
        assert!(
            violations.iter().any(|violation| violation.message.contains("went back")),
            "{violations:?}"
        );
    }

    #[test]
    fn concurrent_reads_may_come_in_any_order() {
        // Read A (process 1) spans read B (process 2): B may be ordered first.
        let history = Builder::default()
            .op(0, 1, OpKind::Invoke, Operation::Status, Value::None)
            .op(1, 2, OpKind::Invoke, Operation::Status, Value::None)
            .op(2, 2, OpKind::Ok, Operation::Status, status(5, 10, 0))
            .op(3, 1, OpKind::Ok, Operation::Status, status(9, 7, 3));
        assert_eq!(check(&history.ops), Vec::new());
    }
}
