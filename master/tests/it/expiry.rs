//! ExpireTasks and the leader's queries that decide when to propose it.

use master::state::{Command, FailedTaskView, Response, TIMED_OUT_REASON};

use crate::support::{
    at, counts, finished, get, is, more_trainers, policy, run, script, setup, task, Step,
};

fn expired(requeued: &[u64], failed: &[u64]) -> crate::support::Expect {
    is(Response::Expired { requeued: requeued.to_vec(), failed: failed.to_vec() })
}

fn progress(task_id: u64, epoch: u64) -> Command {
    Command::TaskProgress { task_id, epoch }
}

fn check(name: &str, steps: Vec<Step>, deadline_ms: Option<u64>) {
    let state = run(name, &steps);
    assert_eq!(state.sole().next_deadline_ms(), deadline_ms, "{name}: next deadline");
}

/// Tasks are taken back exactly when their deadline is at or before the request's now_ms.
#[test]
fn expire_tasks() {
    let cases: Vec<(&str, Vec<Step>, Option<u64>)> = vec![
        (
            "a deadline after now_ms keeps the task pending",
            script(
                setup(2, 1, policy()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(999, Command::ExpireTasks, expired(&[], &[])),
                    counts(0, [1, 1, 0, 0], false),
                ],
            ),
            Some(1000),
        ),
        (
            "progress of the holder moves the deadline a whole timeout on; a stale epoch's, none",
            script(
                setup(1, 1, policy()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(900, progress(0, 1), is(Response::TaskExtended { timeout_ms: 1000 })),
                    at(1000, progress(0, 7), is(Response::Stale)),
                    at(1899, Command::ExpireTasks, expired(&[], &[])),
                    at(1899, finished(0, 1), is(Response::Accepted)),
                    at(1900, progress(0, 1), is(Response::Stale)),
                ],
            ),
            None,
        ),
        (
            "a task whose holder stopped reporting progress expires at its moved deadline",
            script(
                setup(2, 1, policy()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(600, progress(0, 1), is(Response::TaskExtended { timeout_ms: 1000 })),
                    at(300, progress(0, 1), is(Response::TaskExtended { timeout_ms: 1000 })),
                    at(1600, Command::ExpireTasks, expired(&[0], &[])),
                ],
            ),
            None,
        ),
        (
            "a deadline equal to now_ms expires: the task goes to the back of todo",
            script(
                script(setup(2, 1, policy()), more_trainers(2)),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(500, get(2, 0), task(1, 1, 0, 1500)),
                    at(1000, Command::ExpireTasks, expired(&[0], &[])),
                    counts(0, [1, 1, 0, 0], false),
                ],
            ),
            Some(1500),
        ),
        (
            "a late finish after the expiry is stale; the redispatch gets a new epoch",
            script(
                setup(1, 1, policy()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(2000, Command::ExpireTasks, expired(&[0], &[])),
                    at(2001, finished(0, 1), is(Response::Stale)),
                    at(2002, get(1, 0), task(0, 2, 0, 3002)),
                ],
            ),
            Some(3002),
        ),
        (
            "expiring past the limit moves the task to failed, and the pass then ends",
            script(
                setup(1, 2, policy()),
                vec![
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(1000, Command::ExpireTasks, expired(&[0], &[])),
                    at(1000, get(1, 0), task(0, 2, 0, 2000)),
                    at(2000, Command::ExpireTasks, expired(&[], &[0])),
                    counts(0, [0, 0, 0, 1], true),
                ],
            ),
            None,
        ),
        (
            "a now_ms earlier than one already applied does not move the state's clock back",
            script(
                setup(1, 1, policy()),
                vec![
                    at(5000, get(1, 0), task(0, 1, 0, 6000)),
                    at(100, Command::ExpireTasks, expired(&[], &[])),
                ],
            ),
            Some(6000),
        ),
    ];
    for (name, steps, deadline_ms) in cases {
        check(name, steps, deadline_ms);
    }
}

/// `has_expired` is true exactly from the earliest deadline on, and the timed-out reason shows.
#[test]
fn has_expired_tracks_the_earliest_deadline() {
    let steps = script(
        script(setup(2, 1, policy()), more_trainers(2)),
        vec![at(0, get(1, 0), task(0, 1, 0, 1000)), at(300, get(2, 0), task(1, 1, 0, 1300))],
    );
    let state = run("two pending tasks", &steps);
    let cases = [(0, false), (999, false), (1000, true), (1300, true), (u64::MAX, true)];
    for (now_ms, expected) in cases {
        assert_eq!(state.has_expired(now_ms), expected, "has_expired({now_ms})");
    }
    let policy_zero = master::state::QueuePolicy { max_task_failures: 0, ..policy() };
    let failing = run(
        "zero failures allowed",
        &script(
            setup(1, 1, policy_zero),
            vec![
                at(0, get(1, 0), task(0, 1, 0, 1000)),
                at(1000, Command::ExpireTasks, expired(&[], &[0])),
            ],
        ),
    );
    let expected = vec![FailedTaskView { task_id: 0, reason: TIMED_OUT_REASON.to_string() }];
    assert_eq!(failing.status().failed_tasks, expected);
    // Nothing pending: nothing to expire, whatever the time.
    assert!(!failing.has_expired(u64::MAX));
}

/// Status counts every dispatch over the job: a task taken back and handed out again counts
/// twice (the retry the demo reports).
#[test]
fn status_counts_dispatches_with_retries() {
    let steps = script(
        setup(1, 1, policy()),
        vec![
            at(0, get(1, 0), task(0, 1, 0, 1000)),
            at(2000, Command::ExpireTasks, expired(&[0], &[])),
            at(2002, get(1, 0), task(0, 2, 0, 3002)),
        ],
    );
    let state = run("a retried task", &steps);
    assert_eq!(state.status().dispatched_count, 2);
}
