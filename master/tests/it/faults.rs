//! Whose fault a task failure is: a trainer's own (`Local`) spends no failure budget while
//! another trainer may read the task, the data's (`Content`) spends it once per distinct
//! trainer, and a lone trainer still fails a corrupt chunk.

use master::state::{Command, Fault, Response};

use crate::support::{
    at, counts, get, is, more_trainers, policy, run, script, setup, task, Expect, Step,
};

fn failed_with(task_id: u64, epoch: u64, reason: &str, fault: Fault) -> Command {
    Command::TaskFailedWithFault { task_id, epoch, reason: reason.to_string(), fault }
}

/// `trainer` takes the one task at `epoch` and fails it with `fault`.
fn take_and_fail(trainer: u64, epoch: u64, fault: Fault) -> Vec<Step> {
    let reason = format!("trainer {trainer}: {fault:?} fault");
    vec![
        at(0, get(trainer, 0), task(0, epoch, 0, 1000)),
        at(0, failed_with(0, epoch, &reason, fault), is(Response::Accepted)),
    ]
}

fn accepted() -> Expect {
    is(Response::Accepted)
}

/// One trainer failing a task for its own reasons, however often, never fails it: the task
/// goes back to todo each time, and another trainer finishes it.
#[test]
fn local_failures_never_fail_a_task() {
    let mut steps = script(setup(1, 1, policy()), more_trainers(2));
    for epoch in 1..=20 {
        steps.extend(take_and_fail(1, epoch, Fault::Local));
    }
    steps.push(counts(0, [1, 0, 0, 0], false));
    steps.push(at(0, get(2, 0), task(0, 21, 0, 1000)));
    steps.push(at(0, Command::TaskFinished { task_id: 0, epoch: 21 }, accepted()));
    steps.push(counts(0, [0, 0, 1, 0], true));
    run("local failures", &steps);
}

/// A file cut short for every trainer is not mistaken for one trainer's broken view: once every
/// registered trainer failed the task locally, each further local failure spends the budget
/// and the task fails with the reason.
#[test]
fn local_failures_of_every_trainer_fail_a_task() {
    let mut steps = script(setup(1, 1, policy()), more_trainers(2));
    for epoch in 1..=3 {
        steps.extend(take_and_fail(1, epoch, Fault::Local));
    }
    steps.push(counts(0, [1, 0, 0, 0], false));
    steps.extend(take_and_fail(2, 4, Fault::Local));
    steps.push(counts(0, [1, 0, 0, 0], false));
    steps.extend(take_and_fail(1, 5, Fault::Local));
    steps.push(counts(0, [0, 0, 0, 1], true));
    let state = run("every trainer local", &steps);
    assert_eq!(state.status().failed_tasks[0].reason, "trainer 1: Local fault");
}

/// With a budget of two failures (`max_task_failures` 1), one trainer's repeated content
/// failures spend it once while other trainers have not tried; a second trainer's failure
/// spends the rest and the task fails with that trainer's reason.
#[test]
fn content_failures_count_once_per_distinct_trainer() {
    let mut steps = script(setup(1, 1, policy()), more_trainers(3));
    for epoch in 1..=5 {
        steps.extend(take_and_fail(1, epoch, Fault::Content));
    }
    steps.push(counts(0, [1, 0, 0, 0], false));
    steps.extend(take_and_fail(2, 6, Fault::Content));
    steps.push(counts(0, [0, 0, 0, 1], true));
    let state = run("two trainers", &steps);
    let failed = state.status().failed_tasks;
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].reason, "trainer 2: Content fault");
}

/// A job with one trainer still fails a corrupt chunk: once every registered trainer has
/// failed it, each further content failure spends the budget. A failure without a fault
/// (an old sender's `TaskFailed`) is a content failure.
#[test]
fn a_lone_trainer_still_fails_a_corrupt_chunk() {
    let mut steps = setup(1, 1, policy());
    steps.extend(take_and_fail(1, 1, Fault::Content));
    steps.push(counts(0, [1, 0, 0, 0], false));
    steps.push(at(0, get(1, 0), task(0, 2, 0, 1000)));
    let old_sender = Command::TaskFailed { task_id: 0, epoch: 2, reason: "crc".to_string() };
    steps.push(at(0, old_sender, accepted()));
    steps.push(counts(0, [0, 0, 0, 1], true));
    let state = run("lone trainer", &steps);
    assert_eq!(state.status().failed_tasks[0].reason, "crc");
}

/// A trainer that left no longer counts as one who could still try: after the other
/// trainer is lost, the first trainer's repeated content failure spends the budget.
#[test]
fn lost_trainers_do_not_count_as_untried() {
    let mut steps = script(setup(1, 1, policy()), more_trainers(2));
    steps.extend(take_and_fail(1, 1, Fault::Content));
    steps.extend(take_and_fail(1, 2, Fault::Content));
    steps.push(counts(0, [1, 0, 0, 0], false));
    steps.push(at(0, Command::TrainerLost { trainer: 2 }, is(lost_nothing())));
    steps.extend(take_and_fail(1, 3, Fault::Content));
    steps.push(counts(0, [0, 0, 0, 1], true));
    run("lost trainer", &steps);
}

fn lost_nothing() -> Response {
    Response::TrainerRemoved { requeued: Vec::new() }
}
