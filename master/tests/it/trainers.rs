//! RegisterTrainer and TrainerLost: replicated ids, and a lost trainer's tasks back at once.

use master::state::{Response, TrainerView};

use crate::support::{
    at, counts, failed, finished, get, is, lost, policy, register, run, script, setup, task, Step,
};

fn registered(trainer: u64) -> crate::support::Expect {
    is(Response::TrainerRegistered { trainer })
}

fn removed(requeued: &[u64]) -> crate::support::Expect {
    is(Response::TrainerRemoved { requeued: requeued.to_vec() })
}

/// A case: what it proves, its script, and the registered trainers after it.
type Case<'a> = (&'a str, Vec<Step>, &'a [(u64, &'a str)]);

fn check(name: &str, steps: Vec<Step>, trainers: &[(u64, &str)]) {
    let state = run(name, &steps);
    let expected: Vec<TrainerView> = trainers
        .iter()
        .map(|(trainer, name)| TrainerView { trainer: *trainer, name: name.to_string() })
        .collect();
    assert_eq!(state.sole().trainers(), expected, "{name}: trainers");
    assert_eq!(state.status().trainers, expected, "{name}: status trainers");
    for trainer in 0..5 {
        let registered = expected.iter().any(|view| view.trainer == trainer);
        assert_eq!(
            state.sole().is_trainer_registered(trainer),
            registered,
            "{name}: trainer {trainer}"
        );
    }
}

/// Ids come from the replicated counter and are never reused.
#[test]
fn trainer_registry() {
    let cases: Vec<Case<'_>> = vec![
        (
            "ids start at 1 and count up",
            vec![
                at(0, register("a"), registered(1)),
                at(0, register("b"), registered(2)),
                at(0, register("a"), registered(3)),
            ],
            &[(1, "a"), (2, "b"), (3, "a")],
        ),
        (
            "a lost trainer's id is not reused",
            vec![
                at(0, register("a"), registered(1)),
                at(0, lost(1), removed(&[])),
                at(0, register("b"), registered(2)),
            ],
            &[(2, "b")],
        ),
        (
            "losing an unknown trainer is answered UnknownTrainer",
            vec![at(0, lost(4), is(Response::UnknownTrainer))],
            &[],
        ),
    ];
    for (name, steps, trainers) in cases {
        check(name, steps, trainers);
    }
}

/// A leader decision carries the term its soft state was computed in: committed in another
/// term (leadership was lost and regained in between, without fresh leases) it changes nothing.
#[test]
fn decisions_from_another_term_change_nothing() {
    let mut state = crate::support::run(
        "setup",
        &script(setup(2, 1, policy()), vec![at(0, get(1, 0), task(0, 1, 0, 1000))]),
    );
    let before = state.clone();
    let decision = |term| master::state::Request {
        client: None,
        now_ms: 5,
        term: Some(term),
        command: lost(1),
    };
    let refused = state.apply_in_term(&decision(3), 4);
    assert_eq!(refused, Response::WrongTerm { decided: 3, committed: 4 });
    assert_eq!(state.status(), before.status(), "nothing changed");
    let applied = state.apply_in_term(&decision(4), 4);
    assert_eq!(applied, Response::TrainerRemoved { requeued: vec![0] });
}

/// Losing a trainer requeues all its pending tasks at once, uncounted, and fences its late reports.
#[test]
fn lost_trainers() {
    let zero_failures = master::state::QueuePolicy { max_task_failures: 0, ..policy() };
    let cases: Vec<Case<'_>> = vec![
        (
            "the lost trainer's pending task goes back to todo at once, others stay",
            script(
                setup(4, 1, policy()),
                vec![
                    at(0, register("two"), registered(2)),
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(0, get(2, 0), task(1, 1, 0, 1000)),
                    at(10, lost(1), removed(&[0])),
                    counts(0, [3, 1, 0, 0], false),
                    at(10, get(1, 0), is(Response::UnknownTrainer)),
                ],
            ),
            &[(2, "two")],
        ),
        (
            "a lost trainer's task is not failed even with zero failures allowed",
            script(
                setup(1, 1, zero_failures),
                vec![
                    at(0, register("two"), registered(2)),
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(10, lost(1), removed(&[0])),
                    counts(0, [1, 0, 0, 0], false),
                    at(20, get(2, 0), task(0, 2, 0, 1020)),
                    at(30, finished(0, 2), is(Response::Accepted)),
                    counts(0, [0, 0, 1, 0], true),
                ],
            ),
            &[(2, "two")],
        ),
        (
            "late reports from the lost trainer are stale, before and after the redispatch",
            script(
                setup(1, 1, policy()),
                vec![
                    at(0, register("two"), registered(2)),
                    at(0, get(1, 0), task(0, 1, 0, 1000)),
                    at(10, lost(1), removed(&[0])),
                    at(11, finished(0, 1), is(Response::Stale)),
                    at(12, get(2, 0), task(0, 2, 0, 1012)),
                    at(13, failed(0, 1, "late"), is(Response::Stale)),
                    counts(0, [0, 1, 0, 0], false),
                ],
            ),
            &[(2, "two")],
        ),
        (
            "a too long trainer name is rejected",
            vec![at(0, register(&"n".repeat(300)), crate::support::Expect::RejectedWith("name"))],
            &[],
        ),
    ];
    for (name, steps, trainers) in cases {
        check(name, steps, trainers);
    }
}
