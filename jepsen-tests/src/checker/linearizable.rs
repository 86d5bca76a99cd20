//! Linearizability of the task queue, Wing & Gong style with Lowe's memoisation: for each
//! task, its grants and reports must fit some total order consistent with real time against
//! a sequential model of one task. Partitioning by task is sound here because the model's
//! tasks are independent once the master's own moves are allowed between operations.
//!
//! The model of one task: `Todo`, `Pending(epoch)` or `Done`, and the last epoch granted.
//! A grant of epoch `e` needs `e` above every earlier epoch (grants the history never saw,
//! whose answers were lost, may come between); an accepted report of `e` needs `Pending(e)`
//! and leaves `Done` (or `Todo` for a failure); a refused report needs anything else. The
//! master moves a task by itself, so between operations `Pending -> Todo` (a timeout, a lost
//! trainer) and `Done -> Todo` (the next pass) are always allowed. An operation whose outcome
//! is unknown may take effect at any point after its invocation, or never.

use std::collections::{BTreeMap, HashSet};

use crate::checker::{completed, Completed, Violation};
use crate::history::{Op, OpKind, Operation, Value};

const NAME: &str = "linearizable";

/// What the search concluded.
#[derive(Debug, Default)]
pub struct Outcome {
    pub violations: Vec<Violation>,
    /// Tasks whose search hit the state bound: neither proven nor refuted.
    pub unknown: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Status {
    Todo,
    Pending(u64),
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct State {
    status: Status,
    last_epoch: u64,
}

/// One operation on a task, as the model sees it.
#[derive(Clone, Copy, Debug)]
enum Step {
    Grant { epoch: u64 },
    Report { epoch: u64, failed: bool, accepted: Option<bool> },
}

#[derive(Clone, Debug)]
struct Entry {
    step: Step,
    invoke_ms: u64,
    /// `u64::MAX` for an unknown outcome (it may take effect any time after its invocation).
    complete_ms: u64,
    op: usize,
}

pub fn check(ops: &[Op], states_max: u64) -> Outcome {
    let mut outcome = Outcome::default();
    for (task_id, entries) in by_task(&completed(ops)) {
        match search(&entries, states_max) {
            Search::Linearizable => {}
            Search::Unknown => {
                outcome.unknown.push(format!("task {task_id}: search bound reached"))
            }
            Search::Stuck => {
                let window = minimal_window(&entries, states_max);
                let message = format!(
                    "task {task_id}: no order of its {} operations fits the queue; the shortest failing prefix ends with op {}",
                    entries.len(),
                    window.last().copied().unwrap_or(0)
                );
                outcome.violations.push(Violation::new(NAME, message, window));
            }
        }
    }
    outcome
}

/// Each task's grants (successful) and reports (answered or unknown), in invocation order.
fn by_task(pairs: &[Completed<'_>]) -> BTreeMap<u64, Vec<Entry>> {
    let mut tasks: BTreeMap<u64, Vec<Entry>> = BTreeMap::new();
    for pair in pairs {
        let complete_ms =
            if pair.kind() == OpKind::Info { u64::MAX } else { pair.complete.time_ms };
        let entry = |step| Entry {
            step,
            invoke_ms: pair.invoke.time_ms,
            complete_ms,
            op: pair.complete.index,
        };
        let accepted = match (&pair.complete.value, pair.kind()) {
            (Value::Accepted { accepted }, OpKind::Ok) => Some(*accepted),
            _ => None,
        };
        let answered = accepted.is_some() || pair.kind() == OpKind::Info;
        match (&pair.invoke.f, &pair.complete.value) {
            (Operation::GetTask { .. }, Value::Task { task_id, epoch, .. }) => {
                tasks.entry(*task_id).or_default().push(entry(Step::Grant { epoch: *epoch }));
            }
            (Operation::TaskFinished { task_id, epoch, .. }, _) if answered => {
                tasks.entry(*task_id).or_default().push(entry(Step::Report {
                    epoch: *epoch,
                    failed: false,
                    accepted,
                }));
            }
            (Operation::TaskFailed { task_id, epoch, .. }, _) if answered => {
                tasks.entry(*task_id).or_default().push(entry(Step::Report {
                    epoch: *epoch,
                    failed: true,
                    accepted,
                }));
            }
            _ => {}
        }
    }
    tasks
}

enum Search {
    Linearizable,
    Stuck,
    Unknown,
}

/// Depth-first search over linearization orders; `(done set, state)` pairs already explored
/// are not explored again.
fn search(entries: &[Entry], states_max: u64) -> Search {
    search_from(entries, &[State { status: Status::Todo, last_epoch: 0 }], states_max)
}

/// [`search`] from any of `initial`.
fn search_from(entries: &[Entry], initial: &[State], states_max: u64) -> Search {
    let mut seen: HashSet<(Vec<bool>, State)> = HashSet::new();
    let mut stack: Vec<(Vec<bool>, State)> =
        initial.iter().map(|state| (vec![false; entries.len()], *state)).collect();
    let mut explored = 0u64;
    while let Some((done, state)) = stack.pop() {
        if done.iter().all(|linearized| *linearized) {
            return Search::Linearizable;
        }
        explored += 1;
        if explored > states_max {
            return Search::Unknown;
        }
        for (index, next) in candidates(entries, &done) {
            for after in apply(state, next.step) {
                let mut linearized = done.clone();
                linearized[index] = true;
                if seen.insert((linearized.clone(), after)) {
                    stack.push((linearized, after));
                }
            }
            // An operation with an unknown outcome may also never take effect.
            if next.complete_ms == u64::MAX {
                let mut skipped = done.clone();
                skipped[index] = true;
                if seen.insert((skipped.clone(), state)) {
                    stack.push((skipped, state));
                }
            }
        }
    }
    Search::Stuck
}

/// The operations that may be linearized next: not done, and invoked before every pending
/// operation's completion (none of the others must come first).
fn candidates<'a>(entries: &'a [Entry], done: &[bool]) -> Vec<(usize, &'a Entry)> {
    let open: Vec<(usize, &Entry)> =
        entries.iter().enumerate().filter(|(index, _)| !done[*index]).collect();
    let first_completion =
        open.iter().map(|(_, entry)| entry.complete_ms).min().unwrap_or(u64::MAX);
    open.into_iter().filter(|(_, entry)| entry.invoke_ms <= first_completion).collect()
}

/// The states `step` may lead to from `state`, the master's own moves first allowed.
fn apply(state: State, step: Step) -> Vec<State> {
    let mut before = vec![state];
    match state.status {
        Status::Pending(_) | Status::Done => before.push(State { status: Status::Todo, ..state }),
        Status::Todo => {}
    }
    before.into_iter().filter_map(|state| transition(state, step)).collect()
}

fn transition(state: State, step: Step) -> Option<State> {
    match step {
        Step::Grant { epoch } => (state.status == Status::Todo && epoch > state.last_epoch)
            .then_some(State { status: Status::Pending(epoch), last_epoch: epoch }),
        Step::Report { epoch, failed, accepted } => {
            let pending = state.status == Status::Pending(epoch);
            let applied =
                State { status: if failed { Status::Todo } else { Status::Done }, ..state };
            match accepted {
                Some(true) => pending.then_some(applied),
                Some(false) => (!pending).then_some(state),
                // Unknown: it took effect here (if it could).
                None => pending.then_some(applied),
            }
        }
    }
}

/// The ops of the shortest failing prefix, trimmed from the front while what is left fails
/// from every state the task could have been in before it.
fn minimal_window(entries: &[Entry], states_max: u64) -> Vec<usize> {
    let fails = |slice: &[Entry]| matches!(search(slice, states_max), Search::Stuck);
    let end =
        (1..=entries.len()).find(|length| fails(&entries[..*length])).unwrap_or(entries.len());
    let fails_anywhere = |slice: &[Entry]| {
        matches!(search_from(slice, &any_state(slice), states_max), Search::Stuck)
    };
    let start = (0..end).rev().find(|start| fails_anywhere(&entries[*start..end])).unwrap_or(0);
    entries[start..end].iter().map(|entry| entry.op).collect()
}

/// Every state a task may be in before `entries`, as far as their epochs can tell.
fn any_state(entries: &[Entry]) -> Vec<State> {
    let epochs: Vec<u64> = entries
        .iter()
        .map(|entry| match entry.step {
            Step::Grant { epoch } | Step::Report { epoch, .. } => epoch,
        })
        .collect();
    let mut states = vec![State { status: Status::Todo, last_epoch: 0 }];
    for epoch in epochs {
        for last_epoch in [epoch.saturating_sub(1), epoch] {
            for status in [Status::Todo, Status::Done, Status::Pending(last_epoch)] {
                states.push(State { status, last_epoch });
            }
        }
    }
    states
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_history::Builder;

    fn violations(builder: Builder) -> Vec<Violation> {
        let outcome = check(&builder.ops, 100_000);
        assert!(outcome.unknown.is_empty(), "{:?}", outcome.unknown);
        outcome.violations
    }

    #[test]
    fn concurrent_and_unknown_operations_can_be_linearized() {
        let history = Builder::default()
            .grant((0, 10), 1, 7, 1)
            // A report racing a timeout and re-grant: refused, then the re-grant is finished.
            .finish((12, 30), 1, 7, 1, false)
            .grant((15, 20), 2, 7, 2)
            .call(
                (21, 22),
                2,
                Operation::TaskFinished { trainer: 2, task_id: 7, epoch: 2 },
                OpKind::Info,
                Value::None,
            )
            .grant((40, 41), 3, 7, 3);
        assert_eq!(violations(history), Vec::new());
    }

    #[test]
    fn a_grant_to_two_trainers_at_once_is_caught() {
        let history = Builder::default().grant((0, 10), 1, 7, 1).grant((1, 11), 2, 7, 1);
        let found = violations(history);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].ops, vec![1, 3]);
    }

    #[test]
    fn an_accepted_report_of_an_epoch_never_granted_is_caught() {
        let history = Builder::default().grant((0, 1), 1, 7, 1).finish((2, 3), 1, 7, 2, true);
        assert_eq!(violations(history).len(), 1);
    }

    #[test]
    fn a_report_accepted_after_its_task_was_granted_again_is_caught() {
        let history = Builder::default().grant((0, 1), 1, 7, 1).grant((2, 3), 2, 7, 2).finish(
            (4, 5),
            1,
            7,
            1,
            true,
        );
        let found = violations(history);
        assert_eq!(found.len(), 1, "{found:?}");
    }

    #[test]
    fn a_refusal_needs_the_task_to_have_moved_which_the_master_may_do() {
        // Explained by a timeout between the grant and the report.
        let history = Builder::default().grant((0, 1), 1, 7, 1).finish((2, 3), 1, 7, 1, false);
        assert_eq!(violations(history), Vec::new());
    }
}
