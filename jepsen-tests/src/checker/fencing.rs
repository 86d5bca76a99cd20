//! Fencing: no grant of a task is handed out twice (two clients told the same task and
//! epoch); no report under an epoch is accepted once a newer grant of that task was seen; no
//! two reports of one grant are both accepted; and no pserver slot is served by an older
//! generation after a newer one was seen serving it.

use std::collections::BTreeMap;

use crate::checker::{completed, Completed, Violation};
use crate::history::{Op, OpKind, Operation, Value};

const NAME: &str = "fencing";

pub fn check(ops: &[Op]) -> Vec<Violation> {
    let pairs: Vec<Completed<'_>> =
        completed(ops).into_iter().filter(|pair| pair.kind() == OpKind::Ok).collect();
    let mut violations = duplicate_grants(&pairs);
    violations.extend(stale_reports(&pairs));
    violations.extend(done_twice_in_a_pass(&pairs));
    violations.extend(slots(&pairs));
    violations
}

/// A successful grant: the op, task id, epoch and pass.
type Grant<'a> = (&'a Completed<'a>, u64, u64, u32);

/// Every successful grant.
fn grants<'a>(pairs: &'a [Completed<'a>]) -> Vec<Grant<'a>> {
    pairs
        .iter()
        .filter_map(|pair| match pair.complete.value {
            Value::Task { task_id, epoch, pass } => Some((pair, task_id, epoch, pass)),
            _ => None,
        })
        .collect()
}

fn duplicate_grants(pairs: &[Completed<'_>]) -> Vec<Violation> {
    let mut seen: BTreeMap<(u64, u64), &Completed<'_>> = BTreeMap::new();
    let mut violations = Vec::new();
    for (pair, task_id, epoch, _) in grants(pairs) {
        match seen.get(&(task_id, epoch)) {
            Some(first) if first.invoke.process != pair.invoke.process => {
                let message = format!(
                    "task {task_id} epoch {epoch} was granted to processes {} and {}",
                    first.invoke.process, pair.invoke.process
                );
                violations.push(Violation::new(
                    NAME,
                    message,
                    vec![first.complete.index, pair.complete.index],
                ));
            }
            Some(_) => {}
            None => {
                seen.insert((task_id, epoch), pair);
            }
        }
    }
    violations
}

/// Accepted reports (task id, epoch, finished?) with the op that made them.
fn accepted_reports<'a>(pairs: &'a [Completed<'a>]) -> Vec<(&'a Completed<'a>, u64, u64)> {
    pairs
        .iter()
        .filter(|pair| pair.complete.value == Value::Accepted { accepted: true })
        .filter_map(|pair| match pair.invoke.f {
            Operation::TaskFinished { task_id, epoch, .. }
            | Operation::TaskFailed { task_id, epoch, .. } => Some((pair, task_id, epoch)),
            _ => None,
        })
        .collect()
}

fn stale_reports(pairs: &[Completed<'_>]) -> Vec<Violation> {
    let grants = grants(pairs);
    let mut violations = Vec::new();
    let mut accepted: BTreeMap<(u64, u64), &Completed<'_>> = BTreeMap::new();
    for (report, task_id, epoch) in accepted_reports(pairs) {
        let newer = grants.iter().find(|(grant, granted, newer_epoch, _)| {
            *granted == task_id
                && *newer_epoch > epoch
                && grant.complete.index < report.invoke.index
        });
        if let Some((grant, _, newer_epoch, _)) = newer {
            let message = format!("a report for task {task_id} epoch {epoch} was accepted after epoch {newer_epoch} was granted");
            violations.push(Violation::new(
                NAME,
                message,
                vec![grant.complete.index, report.complete.index],
            ));
        }
        if let Some(first) = accepted.insert((task_id, epoch), report) {
            let message = format!("task {task_id} epoch {epoch} was reported and accepted twice");
            violations.push(Violation::new(
                NAME,
                message,
                vec![first.complete.index, report.complete.index],
            ));
        }
    }
    violations
}

/// A task finished (accepted) in a pass is not handed out again in that pass: only a
/// timeout, a failure or a lost trainer puts a task back, and each of those refuses the
/// report that would have finished it.
fn done_twice_in_a_pass(pairs: &[Completed<'_>]) -> Vec<Violation> {
    let grants = grants(pairs);
    let mut violations = Vec::new();
    for report in
        pairs.iter().filter(|pair| pair.complete.value == Value::Accepted { accepted: true })
    {
        let Operation::TaskFinished { task_id, epoch, .. } = report.invoke.f else { continue };
        let Some((_, _, _, pass)) =
            grants.iter().find(|(_, granted, at, _)| *granted == task_id && *at == epoch)
        else {
            continue;
        };
        let again = grants.iter().find(|(grant, granted, at, in_pass)| {
            *granted == task_id
                && *at > epoch
                && in_pass == pass
                && grant.invoke.index > report.complete.index
        });
        if let Some((grant, _, again_epoch, _)) = again {
            let message = format!("task {task_id} was finished (epoch {epoch}) and handed out again (epoch {again_epoch}) in pass {pass}");
            violations.push(Violation::new(
                NAME,
                message,
                vec![report.complete.index, grant.complete.index],
            ));
        }
    }
    violations
}

/// Per slot of a job, the newest generation seen serving so far (by completion); a later read
/// of an older one serving is a violation.
fn slots(pairs: &[Completed<'_>]) -> Vec<Violation> {
    let mut observations: Vec<(&Completed<'_>, (&str, u32), u64)> = pairs
        .iter()
        .filter_map(|pair| match &pair.complete.value {
            Value::Slot { job, slot, generation, serving: true } => {
                Some((pair, (job.as_str(), *slot), *generation))
            }
            _ => None,
        })
        .collect();
    observations.sort_by_key(|(pair, _, _)| pair.invoke.index);
    let mut violations = Vec::new();
    for (index, (later, slot, generation)) in observations.iter().enumerate() {
        let newer =
            observations[..index].iter().find(|(earlier, earlier_slot, earlier_generation)| {
                earlier_slot == slot
                    && earlier_generation > generation
                    && earlier.complete.index < later.invoke.index
            });
        if let Some((earlier, _, newer_generation)) = newer {
            let (job, slot) = slot;
            let job = if job.is_empty() { String::new() } else { format!("job {job} ") };
            let message = format!("{job}slot {slot} was served by generation {generation} after generation {newer_generation} served it");
            violations.push(Violation::new(
                NAME,
                message,
                vec![earlier.complete.index, later.complete.index],
            ));
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_history::Builder;

    #[test]
    fn a_clean_regrant_passes() {
        let history = Builder::default()
            .grant((0, 1), 1, 7, 1)
            .grant((4, 5), 2, 7, 2)
            .finish((6, 7), 1, 7, 1, false)
            .finish((8, 9), 2, 7, 2, true);
        assert_eq!(check(&history.ops), Vec::new());
    }

    #[test]
    fn a_stale_report_accepted_is_caught() {
        let history = Builder::default().grant((0, 1), 1, 7, 1).grant((2, 3), 2, 7, 2).finish(
            (4, 5),
            1,
            7,
            1,
            true,
        );
        let violations = check(&history.ops);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].message.contains("after epoch 2"), "{violations:?}");
    }

    #[test]
    fn a_grant_to_two_processes_is_caught() {
        let history = Builder::default().grant((0, 1), 1, 7, 1).grant((0, 2), 2, 7, 1);
        let violations = check(&history.ops);
        assert!(
            violations
                .iter()
                .any(|violation| violation.message.contains("granted to processes 1 and 2")),
            "{violations:?}"
        );
    }

    #[test]
    fn a_grant_accepted_twice_is_caught() {
        let history = Builder::default()
            .grant((0, 1), 1, 7, 1)
            .finish((2, 3), 1, 7, 1, true)
            .finish((4, 5), 1, 7, 1, true);
        let violations = check(&history.ops);
        assert!(
            violations.iter().any(|violation| violation.message.contains("accepted twice")),
            "{violations:?}"
        );
    }

    #[test]
    fn a_task_finished_then_handed_out_again_in_its_pass_is_caught() {
        let history = Builder::default()
            .grant((0, 1), 1, 7, 1)
            .finish((2, 3), 1, 7, 1, true)
            .grant((4, 5), 2, 7, 2);
        let violations = check(&history.ops);
        assert!(
            violations
                .iter()
                .any(|violation| violation.message.contains("again (epoch 2) in pass 1")),
            "{violations:?}"
        );
    }

    fn served(builder: Builder, times: (u64, u64), generation: u64) -> Builder {
        let f = Operation::PserverStatus { pserver: generation };
        builder.call(
            times,
            700,
            f,
            OpKind::Ok,
            Value::Slot { job: String::new(), slot: 0, generation, serving: true },
        )
    }

    #[test]
    fn an_old_generation_serving_after_a_new_one_is_caught() {
        let clean = served(served(Builder::default(), (0, 1), 3), (2, 3), 4);
        assert_eq!(check(&clean.ops), Vec::new());
        let stale = served(served(Builder::default(), (0, 1), 4), (2, 3), 3);
        let violations = check(&stale.ops);
        assert!(
            violations
                .iter()
                .any(|violation| violation.message.contains("generation 3 after generation 4")),
            "{violations:?}"
        );
    }
}
