//! TaskFinished and TaskFailed: fenced by (task, epoch); failures requeue, then fail for good.

use master::state::{Command, FailedTaskView, Response};

use crate::support::{
    at, counts, failed, finished, get, is, more_trainers, policy, run, script, setup, task, Expect,
    Step,
};

/// A case: what it proves, its script, and the failed tasks with reasons after it.
type Case<'a> = (&'a str, Vec<Step>, &'a [(u64, &'a str)]);

fn check(name: &str, steps: Vec<Step>, failed_tasks: &[(u64, &str)]) {
    let state = run(name, &steps);
    let expected: Vec<FailedTaskView> = failed_tasks
        .iter()
        .map(|(task_id, reason)| FailedTaskView { task_id: *task_id, reason: reason.to_string() })
        .collect();
    assert_eq!(state.status().failed_tasks, expected, "{name}: failed tasks");
}

/// Only the current dispatch's report counts: others are Stale (or Rejected if no such task).
#[test]
fn task_reports() {
    let cases: Vec<Case<'_>> = vec![
        (
            "a current finish moves the task to done",
            script(
                setup(2, 1, policy()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(1, finished(0, 1), is(Response::Accepted)),
                    counts(0, [1, 0, 1, 0], false),
                ],
            ),
            &[],
        ),
        (
            "a report with an old epoch is Stale and changes nothing",
            script(
                script(setup(2, 1, policy()), more_trainers(2)),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(1, failed(0, 1, "io"), is(Response::Accepted)),
                    at(1, get(1, 0), task(1, 1, 0, 1001)),
                    at(1, get(2, 0), task(0, 2, 0, 1001)),
                    at(2, finished(0, 1), is(Response::Stale)),
                    at(2, failed(0, 1, "late"), is(Response::Stale)),
                    counts(0, [0, 2, 0, 0], false),
                    at(3, finished(0, 2), is(Response::Accepted)),
                ],
            ),
            &[],
        ),
        (
            "a report for a task that is not pending (todo or done) is Stale",
            script(
                setup(2, 1, policy()),
                vec![
                    at(0, finished(1, 0), is(Response::Stale)),
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(1, finished(0, 1), is(Response::Accepted)),
                    at(2, finished(0, 1), is(Response::Stale)),
                    at(2, failed(0, 1, "x"), is(Response::Stale)),
                    counts(0, [1, 0, 1, 0], false),
                ],
            ),
            &[],
        ),
        (
            "a report naming a task that does not exist is rejected",
            script(
                setup(2, 1, policy()),
                vec![at(0, finished(9, 1), Expect::RejectedWith("task 9"))],
            ),
            &[],
        ),
    ];
    for (name, steps, failed_tasks) in cases {
        check(name, steps, failed_tasks);
    }
}

/// Failures go to the back of todo until the limit, then to failed with the reason.
#[test]
fn task_failures() {
    let long_reason = "r".repeat(5000);
    let kept_reason = "r".repeat(master::state::FAILURE_REASON_BYTES_MAX);
    let kept: &[(u64, &str)] = &[(0, &kept_reason)];
    let cases: Vec<Case<'_>> = vec![
        (
            "a failure below the limit puts the task at the back of todo",
            script(
                script(setup(3, 1, policy()), more_trainers(3)),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(1, failed(0, 1, "io"), is(Response::Accepted)),
                    counts(0, [3, 0, 0, 0], false),
                    at(2, get(1, 0), task(1, 1, 0, 1002)),
                    at(2, get(2, 0), task(2, 1, 0, 1002)),
                    at(2, get(3, 0), task(0, 2, 0, 1002)),
                ],
            ),
            &[],
        ),
        (
            "a failure past the limit moves the task to failed with its last reason",
            script(
                script(setup(2, 1, policy()), more_trainers(2)),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(1, failed(0, 1, "first"), is(Response::Accepted)),
                    at(1, get(1, 0), task(1, 1, 0, 1001)),
                    at(1, get(2, 0), task(0, 2, 0, 1001)),
                    at(2, failed(0, 2, "corrupt chunk"), is(Response::Accepted)),
                    counts(0, [0, 1, 0, 1], false),
                ],
            ),
            &[(0, "corrupt chunk")],
        ),
        (
            "timeouts and failures share the limit",
            script(
                script(setup(2, 1, policy()), more_trainers(2)),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(
                        1000,
                        Command::ExpireTasks,
                        is(Response::Expired { requeued: vec![0], failed: vec![] }),
                    ),
                    at(1000, get(1, 0), task(1, 1, 0, 2000)),
                    at(1000, get(2, 0), task(0, 2, 0, 2000)),
                    at(1001, failed(0, 2, "io"), is(Response::Accepted)),
                    counts(0, [0, 1, 0, 1], false),
                ],
            ),
            &[(0, "io")],
        ),
        (
            "a long failure reason is cut to FAILURE_REASON_BYTES_MAX",
            script(
                setup(1, 1, zero_failures()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(1, failed(0, 1, &long_reason), is(Response::Accepted)),
                ],
            ),
            kept,
        ),
    ];
    for (name, steps, failed_tasks) in cases {
        check(name, steps, failed_tasks);
    }
}

fn zero_failures() -> master::state::QueuePolicy {
    master::state::QueuePolicy { max_task_failures: 0, ..policy() }
}

/// Status lists at most `FAILED_TASKS_SHOWN_MAX` failed tasks (the lowest ids) while the count
/// stays whole, so a job whose every task failed still answers a small status.
#[test]
fn status_lists_a_bounded_number_of_failed_tasks() {
    let shown_max = master::state::FAILED_TASKS_SHOWN_MAX as u64;
    let task_count = shown_max + 20;
    let mut steps = setup(task_count, 1, zero_failures());
    for task_id in 0..task_count {
        steps.push(at(0, get(1, 0), crate::support::task(task_id, 1, 0, 1000)));
        steps.push(at(0, failed(task_id, 1, "corrupt"), is(Response::Accepted)));
    }
    let status = crate::support::run_unchecked("every task fails", &steps).status();
    assert_eq!(status.failed_count, task_count);
    assert_eq!(status.failed_tasks.len() as u64, shown_max);
    assert_eq!(status.failed_tasks.last().map(|failed| failed.task_id), Some(shown_max - 1));
}
