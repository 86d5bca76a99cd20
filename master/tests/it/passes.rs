//! Pass advance: when todo and pending drain, the next pass starts or the job finishes.

use master::state::{QueuePolicy, Response};

use crate::support::{
    at, counts, failed, finished, get, is, more_trainers, policy, run, script, setup, task, Step,
};

fn check(name: &str, steps: Vec<Step>) {
    run(name, &steps);
}

fn strict(retry_failed_next_pass: bool) -> QueuePolicy {
    QueuePolicy { max_task_failures: 0, retry_failed_next_pass, ..policy() }
}

/// Passes advance on every drain, including one ending in a failure, and the job always ends.
#[test]
fn pass_advance() {
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "done tasks return to todo sorted by id, with epochs still growing",
            script(
                script(setup(3, 2, policy()), more_trainers(3)),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(0, get(2, 0), task(1, 1, 0, 1000)),
                    at(0, get(3, 0), task(2, 1, 0, 1000)),
                    at(1, finished(2, 1), is(Response::Accepted)),
                    at(1, finished(0, 1), is(Response::Accepted)),
                    at(1, finished(1, 1), is(Response::Accepted)),
                    counts(1, [3, 0, 0, 0], false),
                    at(2, get(1, 1), task(0, 2, 1, 1002)),
                    at(2, get(2, 1), task(1, 2, 1, 1002)),
                    at(2, get(3, 1), task(2, 2, 1, 1002)),
                ],
            ),
        ),
        (
            "the pass advances when its last task moves to failed (the Go master hung here)",
            script(
                script(setup(2, 2, strict(false)), more_trainers(2)),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(0, get(2, 0), task(1, 1, 0, 1000)),
                    at(1, finished(0, 1), is(Response::Accepted)),
                    at(2, failed(1, 1, "corrupt"), is(Response::Accepted)),
                    counts(1, [1, 0, 0, 1], false),
                    at(3, get(1, 1), task(0, 2, 1, 1003)),
                    at(4, finished(0, 2), is(Response::Accepted)),
                    counts(1, [0, 0, 1, 1], true),
                ],
            ),
        ),
        (
            "with retry, failed tasks come back next pass with fresh failure counts",
            script(
                script(
                    setup(2, 2, QueuePolicy { retry_failed_next_pass: true, ..policy() }),
                    more_trainers(2),
                ),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(1, failed(0, 1, "one"), is(Response::Accepted)),
                    at(1, get(1, 0), task(1, 1, 0, 1001)),
                    at(1, get(2, 0), task(0, 2, 0, 1001)),
                    at(2, failed(0, 2, "two"), is(Response::Accepted)),
                    at(2, finished(1, 1), is(Response::Accepted)),
                    counts(1, [2, 0, 0, 0], false),
                    at(3, get(1, 1), task(0, 3, 1, 1003)),
                    // One failure is within the limit again in the new pass.
                    at(4, failed(0, 3, "three"), is(Response::Accepted)),
                    counts(1, [2, 0, 0, 0], false),
                ],
            ),
        ),
    ];
    for (name, steps) in cases {
        check(name, steps);
    }
}

/// When only failed tasks remain, the policy decides between another pass and the end; a lost
/// trainer's task comes back instead of ending the pass.
#[test]
fn failed_tasks_at_the_end() {
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "every task failed and failed tasks stay out: the job finishes instead of hanging",
            script(
                setup(1, 3, strict(false)),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(1, failed(0, 1, "corrupt"), is(Response::Accepted)),
                    counts(0, [0, 0, 0, 1], true),
                    at(2, get(1, 0), is(Response::JobFinished)),
                ],
            ),
        ),
        (
            "every task failed but retry is on: the next pass tries again, then the job ends",
            script(
                setup(1, 2, strict(true)),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(1, failed(0, 1, "corrupt"), is(Response::Accepted)),
                    counts(1, [1, 0, 0, 0], false),
                    at(2, get(1, 1), task(0, 2, 1, 1002)),
                    at(3, failed(0, 2, "corrupt"), is(Response::Accepted)),
                    counts(1, [0, 0, 0, 1], true),
                ],
            ),
        ),
        (
            "a lost trainer does not advance the pass: its task comes back to todo",
            script(
                setup(1, 2, policy()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(
                        1,
                        crate::support::lost(1),
                        is(Response::TrainerRemoved { requeued: vec![0] }),
                    ),
                    counts(0, [1, 0, 0, 0], false),
                ],
            ),
        ),
    ];
    for (name, steps) in cases {
        check(name, steps);
    }
}
