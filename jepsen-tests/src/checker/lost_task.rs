//! No lost task: every grant is resolved, by a report that was (or may have been) accepted,
//! or by a later grant of the same task under a higher epoch (it timed out, failed or its
//! trainer was lost, and went back to the queue) within a bound, unless the run ended first.
//! A task that is granted and then never seen again is lost: its pass can never end.

use crate::checker::{completed, Completed, Violation};
use crate::history::{Op, OpKind, Operation, Value};

const NAME: &str = "lost-task";

pub fn check(ops: &[Op], regrant_ms: u64) -> Vec<Violation> {
    let pairs = completed(ops);
    let end_ms = ops.last().map_or(0, |op| op.time_ms);
    let grants: Vec<(&Completed<'_>, u64, u64)> = pairs
        .iter()
        .filter(|pair| pair.kind() == OpKind::Ok)
        .filter_map(|pair| match pair.complete.value {
            Value::Task { id, epoch, .. } => Some((pair, id, epoch)),
            _ => None,
        })
        .collect();
    grants
        .iter()
        .filter(|(grant, _, _)| grant.complete.time_ms + regrant_ms < end_ms)
        .filter(|(_, id, epoch)| !reported(&pairs, *id, *epoch))
        .filter(|(grant, id, epoch)| {
            !grants.iter().any(|(later, later_id, later_epoch)| {
                later_id == id && later_epoch > epoch && later.complete.time_ms <= grant.complete.time_ms + regrant_ms
            })
        })
        .map(|(grant, id, epoch)| {
            let message = format!(
                "task {id} epoch {epoch}, granted at {} ms, was never reported accepted nor granted again within {regrant_ms} ms",
                grant.complete.time_ms
            );
            Violation::new(NAME, message, vec![grant.complete.index])
        })
        .collect()
}

/// Whether a report of (id, epoch) was accepted or may have been (its outcome is unknown).
fn reported(pairs: &[Completed<'_>], id: u64, epoch: u64) -> bool {
    pairs.iter().any(|pair| {
        let about = matches!(pair.invoke.f,
            Operation::TaskFinished { id: task, epoch: at, .. } | Operation::TaskFailed { id: task, epoch: at, .. }
            if task == id && at == epoch);
        about && (pair.kind() == OpKind::Info || pair.complete.value == Value::Accepted { accepted: true })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_history::Builder;

    fn end(builder: Builder, time_ms: u64) -> Vec<Op> {
        builder.call((time_ms, time_ms + 1), 99, Operation::Status, OpKind::Fail, Value::None).ops
    }

    #[test]
    fn reported_or_regranted_tasks_pass() {
        let history = Builder::default()
            .grant((0, 1), 1, 7, 1)
            .finish((2, 3), 1, 7, 1, true)
            .grant((10, 11), 2, 8, 1)
            .grant((3_000, 3_001), 3, 8, 2)
            .finish((3_002, 3_003), 3, 8, 2, true);
        assert_eq!(check(&end(history, 60_000), 15_000), Vec::new());
    }

    #[test]
    fn a_task_never_seen_again_is_caught() {
        let history = Builder::default().grant((0, 1), 1, 7, 1).finish((2, 3), 1, 7, 1, false);
        let violations = check(&end(history, 60_000), 15_000);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].message.contains("task 7 epoch 1"), "{violations:?}");
    }

    #[test]
    fn a_grant_near_the_end_is_not_judged() {
        let history = Builder::default().grant((50_000, 50_001), 1, 7, 1);
        assert_eq!(check(&end(history, 60_000), 15_000), Vec::new());
    }
}
