//! GetTask: which answer a trainer gets, and how a dispatch is stamped (epoch, deadline).

use master::state::{Response, TaskAssignment};

use crate::support::{
    at, counts, failed, finished, get, is, policy, register, run, script, setup, task, Step,
};

fn check(name: &str, steps: Vec<Step>) {
    run(name, &steps);
}

/// Every GetTask outcome: a task, or why not.
#[test]
fn get_task() {
    let first = TaskAssignment { task_id: 0, epoch: 1, pass: 0, deadline_ms: 1010 };
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "the front of todo is dispatched with its chunks, epoch 1 and now + min timeout",
            script(
                setup(3, 2, policy()),
                vec![at(10, get(1, 0), is(Response::Task(first))), counts(0, [2, 1, 0, 0], false)],
            ),
        ),
        (
            "an unregistered trainer is told so, before anything else",
            script(setup(3, 2, policy()), vec![at(0, get(7, 0), is(Response::UnknownTrainer))]),
        ),
        (
            "a future pass gets PassAfter, and nothing is dispatched",
            script(
                setup(3, 2, policy()),
                vec![
                    at(0, get(1, 1), is(Response::PassAfter { current: 0 })),
                    counts(0, [3, 0, 0, 0], false),
                ],
            ),
        ),
        (
            "an empty todo with tasks pending gets NoMoreAvailable",
            script(
                setup(2, 1, policy()),
                vec![
                    at(0, register("two"), is(Response::TrainerRegistered { trainer: 2 })),
                    at(0, register("three"), is(Response::TrainerRegistered { trainer: 3 })),
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(0, get(2, 0), task(1, 1, 0, 1000)),
                    at(0, get(3, 0), is(Response::NoMoreAvailable)),
                ],
            ),
        ),
        (
            "a trainer that asks again while holding a task gets the task it holds, not another",
            script(
                setup(3, 1, policy()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(7, get(1, 0), task(0, 1, 0, 1000)),
                    counts(0, [2, 1, 0, 0], false),
                    at(8, finished(0, 1), is(Response::Accepted)),
                    at(9, get(1, 0), task(1, 1, 0, 1009)),
                ],
            ),
        ),
        (
            "a past pass gets PassBefore once the next pass runs",
            script(
                setup(1, 2, policy()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(5, finished(0, 1), is(Response::Accepted)),
                    at(5, get(1, 0), is(Response::PassBefore { current: 1 })),
                    at(5, get(1, 1), task(0, 2, 1, 1005)),
                ],
            ),
        ),
        (
            "after the last pass every GetTask gets JobFinished",
            script(
                setup(1, 1, policy()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(5, finished(0, 1), is(Response::Accepted)),
                    at(5, get(1, 0), is(Response::JobFinished)),
                    at(5, get(1, 3), is(Response::JobFinished)),
                ],
            ),
        ),
    ];
    for (name, steps) in cases {
        check(name, steps);
    }
}

/// A dispatch bumps the epoch and sets the deadline from the minimum or k x the average.
#[test]
fn dispatch_stamps() {
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "each dispatch bumps the task's epoch",
            script(
                setup(1, 1, policy()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(1, failed(0, 1, "bad batch"), is(Response::Accepted)),
                    at(2, get(1, 0), task(0, 2, 0, 1002)),
                ],
            ),
        ),
        (
            "the deadline follows k x the integer moving average once it exceeds the minimum",
            script(
                setup(3, 1, policy()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    // The first sample sets the average: 3000, so the timeout is 2 x 3000.
                    at(3000, finished(0, 1), is(Response::Accepted)),
                    at(3000, get(1, 0), task(1, 1, 0, 9000)),
                    // (7 x 3000 + 800) / 8 = 2725, so the timeout is 5450.
                    at(3800, finished(1, 1), is(Response::Accepted)),
                    at(4000, get(1, 0), task(2, 1, 0, 9450)),
                ],
            ),
        ),
        (
            "failed reports do not feed the average: the minimum still applies",
            script(
                setup(2, 1, policy()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(9000, failed(0, 1, "slow and broken"), is(Response::Accepted)),
                    at(9000, get(1, 0), task(1, 1, 0, 10_000)),
                ],
            ),
        ),
    ];
    for (name, steps) in cases {
        check(name, steps);
    }
}
