//! No lost task: every grant is resolved, by a report that was (or may have been) accepted,
//! or by a later grant of the same task under a higher epoch (it timed out, failed or its
//! trainer was lost, and went back to the queue) within a bound, unless the run ended first.
//! A task that is granted and then never seen again is lost: its pass can never end. Time
//! with a majority of masters down (the `majority-outage` fault) does not count against the
//! bound: nothing can be granted then.

use crate::checker::{completed, Completed, Violation};
use crate::history::{Op, OpKind, Operation, Phase, Value};

const NAME: &str = "lost-task";
/// The fault that keeps a majority of masters down for longer than the bound.
const MAJORITY_OUTAGE: &str = "majority-outage";

pub fn check(ops: &[Op], regrant_ms: u64) -> Vec<Violation> {
    let pairs = completed(ops);
    let end_ms = ops.last().map_or(0, |op| op.time_ms);
    let outages = outage_windows(ops, end_ms);
    let deadline = |granted_ms: u64| extended(granted_ms, regrant_ms, &outages);
    let grants: Vec<(&Completed<'_>, u64, u64)> = pairs
        .iter()
        .filter(|pair| pair.kind() == OpKind::Ok)
        .filter_map(|pair| match pair.complete.value {
            Value::Task { task_id, epoch, .. } => Some((pair, task_id, epoch)),
            _ => None,
        })
        .collect();
    grants
        .iter()
        .filter(|(grant, _, _)| deadline(grant.complete.time_ms) < end_ms)
        .filter(|(_, task_id, epoch)| !reported(&pairs, *task_id, *epoch))
        .filter(|(grant, task_id, epoch)| {
            !grants.iter().any(|(later, later_task_id, later_epoch)| {
                later_task_id == task_id && later_epoch > epoch && later.complete.time_ms <= deadline(grant.complete.time_ms)
            })
        })
        .map(|(grant, task_id, epoch)| {
            let message = format!(
                "task {task_id} epoch {epoch}, granted at {} ms, was never reported accepted nor granted again within {regrant_ms} ms",
                grant.complete.time_ms
            );
            Violation::new(NAME, message, vec![grant.complete.index])
        })
        .collect()
}

/// The majority outages' windows (start, stop) in order; one never healed ends at `end_ms`.
fn outage_windows(ops: &[Op], end_ms: u64) -> Vec<(u64, u64)> {
    let mut windows: Vec<(u64, u64)> = Vec::new();
    for op in ops {
        let Operation::Nemesis { fault, phase, .. } = &op.f else { continue };
        if fault != MAJORITY_OUTAGE {
            continue;
        }
        match phase {
            Phase::Start => windows.push((op.time_ms, end_ms)),
            Phase::Stop => {
                if let Some(open) = windows.last_mut() {
                    open.1 = op.time_ms;
                }
            }
        }
    }
    windows
}

/// `granted_ms + bound_ms`, pushed back by every outage that overlaps the time so far.
fn extended(granted_ms: u64, bound_ms: u64, outages: &[(u64, u64)]) -> u64 {
    let mut deadline = granted_ms + bound_ms;
    for (start, stop) in outages {
        if *start <= deadline && *stop >= granted_ms {
            deadline += stop.saturating_sub((*start).max(granted_ms));
        }
    }
    deadline
}

/// Whether a report of (task_id, epoch) was accepted or may have been (its outcome is unknown).
fn reported(pairs: &[Completed<'_>], task_id: u64, epoch: u64) -> bool {
    pairs.iter().any(|pair| {
        let about = matches!(pair.invoke.f,
            Operation::TaskFinished { task_id: reported, epoch: at, .. } | Operation::TaskFailed { task_id: reported, epoch: at, .. }
            if reported == task_id && at == epoch);
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

    /// Time with a majority of masters down does not count against the bound (nothing can be
    /// granted then), but time outside it does.
    #[test]
    fn a_majority_outage_extends_the_bound_by_its_length() {
        let outage = |builder: Builder, phase, time_ms| {
            let f =
                Operation::Nemesis { fault: MAJORITY_OUTAGE.into(), targets: vec![0, 1], phase };
            builder.op(time_ms, crate::history::NEMESIS_PROCESS, OpKind::Info, f, Value::None)
        };
        let regranted = |at: u64| {
            let history = Builder::default().grant((1_000, 1_001), 1, 7, 1);
            let history = outage(history, crate::history::Phase::Start, 5_000);
            let history = outage(history, crate::history::Phase::Stop, 65_000);
            history.grant((at, at + 1), 2, 7, 2).finish((at + 2, at + 3), 2, 7, 2, true)
        };
        assert_eq!(check(&end(regranted(70_000), 200_000), 15_000), Vec::new());
        assert_eq!(check(&end(regranted(80_000), 200_000), 15_000).len(), 1);
    }

    #[test]
    fn a_grant_near_the_end_is_not_judged() {
        let history = Builder::default().grant((50_000, 50_001), 1, 7, 1);
        assert_eq!(check(&end(history, 60_000), 15_000), Vec::new());
    }
}
