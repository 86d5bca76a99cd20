//! Exactly-once client writes: a retried (client, seq) is answered, not applied again.

use master::state::{
    Command, Response, SESSION_COUNT_MAX, SESSION_IDLE_MS_MAX, SESSION_RETRY_MS_MAX,
    STRANGER_SESSION_COUNT_MAX,
};

use crate::support::{
    accepted, at, counts, finished, get, is, policy, register, report, run, stamped, task, Expect,
    Step,
};

fn registered(trainer: u64) -> crate::support::Expect {
    is(Response::TrainerRegistered { trainer })
}

fn check(name: &str, steps: Vec<Step>) {
    run(name, &steps);
}

/// Applies a long script without the per-step clone and transition check of `run` (a crowd of
/// 16,384 clients would make them quadratic), checking every answer and, at the end, every
/// invariant including the session index.
fn check_crowd(name: &str, steps: Vec<Step>) {
    let state = crate::support::run_unchecked(name, &steps);
    state.check_invariants().expect("invariants after the crowd");
    state.check_session_index().expect("the session index after the crowd");
}

fn eval() -> Command {
    Command::RecordEval { pass: 0, loss: 1.0, accuracy: 0.5 }
}

/// Client 1 registers trainer 1 and reports the job, then a crowd of
/// `STRANGER_SESSION_COUNT_MAX` strangers (clients 2 and up, client 2 the oldest) records
/// evaluations (a write that takes a session), then a new stranger at `newcomer_ms`.
fn crowd(newcomer_ms: u64, newcomer: Expect) -> Vec<Step> {
    let mut steps = vec![
        stamped(1, 1, 0, register("a"), registered(1)),
        stamped(1, 2, 0, report(2, 1, policy()), accepted(2, 1)),
    ];
    let last = u64::try_from(STRANGER_SESSION_COUNT_MAX).expect("small") + 1;
    for client_id in 2..=last {
        steps.push(stamped(client_id, 1, client_id, eval(), is(Response::Accepted)));
    }
    steps.push(stamped(last + 1, 1, newcomer_ms, eval(), newcomer));
    steps
}

/// A member that ends (trainer lost, slot released or claimed again) unbinds its client,
/// which keeps its last answer as a stranger; the client binds again by registering.
fn members_leaving() -> Vec<(&'static str, Vec<Step>)> {
    let lost = Command::TrainerLost { trainer: 1 };
    let claim = || Command::ClaimPServerSlot { addr: "a:1".into(), desired: 1 };
    // `check_crowd` checks at the end that every bound member is alive: generation 1 is not.
    let claimed = |generation| Response::SlotClaimed { slot: 0, generation, checkpoint: None };
    let release = Command::ReleasePServerSlot { slot: 0, generation: 1 };
    vec![
        (
            "a lost trainer's client keeps its answer as a stranger, then registers again",
            vec![
                stamped(7, 1, 0, register("t"), registered(1)),
                at(5, lost, is(Response::TrainerRemoved { requeued: Vec::new() })),
                stamped(7, 1, 10, register("t"), registered(1)),
                stamped(7, 2, 10, register("t"), registered(2)),
                stamped(7, 2, 10, register("t"), registered(2)),
            ],
        ),
        (
            "a holder's own release is replayed after the slot is gone",
            vec![
                stamped(8, 1, 0, claim(), is(claimed(1))),
                stamped(8, 2, 0, release.clone(), is(Response::Accepted)),
                stamped(8, 2, 5, release, is(Response::Accepted)),
            ],
        ),
        (
            "a slot claimed again by its holder binds the new generation only",
            vec![
                stamped(8, 1, 0, claim(), is(claimed(1))),
                stamped(8, 2, 0, claim(), is(claimed(2))),
                stamped(8, 3, 0, Command::ReleasePServerSlot { slot: 0, generation: 1 }, {
                    is(Response::SlotNotHeld)
                }),
            ],
        ),
    ]
}

/// Replays, stale sequence numbers, stamps reused for another call, and how sessions end.
#[test]
fn client_sessions() {
    // The oldest stranger was last seen at 2: its place frees up after 2 + SESSION_RETRY_MS_MAX.
    let full = is(Response::TryAgainLater { retry_after_ms: 3 });
    let mut full_pool_admits_members = crowd(SESSION_RETRY_MS_MAX, full);
    full_pool_admits_members.extend([
        stamped(1, 2, SESSION_RETRY_MS_MAX, report(2, 1, policy()), accepted(2, 1)),
        stamped(u64::MAX, 1, SESSION_RETRY_MS_MAX, register("b"), registered(2)),
        stamped(u64::MAX, 2, SESSION_RETRY_MS_MAX, eval(), is(Response::Accepted)),
    ]);
    let late = SESSION_RETRY_MS_MAX + 3;
    let mut evicts_oldest = crowd(late, is(Response::Accepted));
    // Client 2 was pushed out: a sequence number below its last is applied (a millisecond
    // later, in client 3's place), not refused as stale; client 4 still has its session.
    evicts_oldest.push(stamped(2, 0, late + 1, eval(), is(Response::Accepted)));
    let stale = is(Response::StaleRequest { last_seq: 1 });
    evicts_oldest.push(stamped(4, 0, late + 1, eval(), stale));
    let mut refusals_take_no_session = vec![stamped(1, 1, 0, register("a"), registered(1))];
    for client_id in 2..=u64::try_from(SESSION_COUNT_MAX).expect("small") + 10 {
        refusals_take_no_session.push(stamped(
            client_id,
            1,
            5,
            get(99, 0),
            is(Response::UnknownTrainer),
        ));
    }
    refusals_take_no_session.push(stamped(1, 1, 6, register("a"), registered(1)));
    let crowds: Vec<(&str, Vec<Step>)> = vec![
        (
            "with the strangers' pool full of clients that may still retry, a new stranger is \
             told when to try again, and members still register and write",
            full_pool_admits_members,
        ),
        ("once the oldest stranger can no longer retry, a newcomer takes its place", evicts_oldest),
        ("answers that changed nothing take no session", refusals_take_no_session),
    ];
    for (name, steps) in crowds {
        check_crowd(name, steps);
    }
    for (name, steps) in members_leaving() {
        check_crowd(name, steps);
    }
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "a replayed GetTask returns the same assignment and dispatches nothing more",
            vec![
                stamped(7, 1, 0, register("t"), registered(1)),
                stamped(7, 2, 0, report(2, 1, policy()), accepted(2, 1)),
                stamped(7, 3, 10, get(1, 0), task(0, 1, 0, 1010)),
                stamped(7, 3, 20, get(1, 0), task(0, 1, 0, 1010)),
                counts(0, [1, 1, 0, 0], false),
                stamped(8, 1, 30, register("u"), registered(2)),
                stamped(8, 2, 30, get(2, 0), task(1, 1, 0, 1030)),
            ],
        ),
        (
            "a stamp reused for another call is refused, and the first call's answer stays",
            vec![
                stamped(7, 1, 0, register("t"), registered(1)),
                stamped(7, 1, 0, get(1, 0), is(Response::StampReused { seq: 1 })),
                stamped(7, 1, 0, register("t"), registered(1)),
            ],
        ),
        (
            "a stamp reused with another name is refused, not answered with the first id",
            vec![
                stamped(7, 1, 0, register("alice"), registered(1)),
                stamped(7, 1, 0, register("mallory"), is(Response::StampReused { seq: 1 })),
                stamped(7, 1, 0, register("alice"), registered(1)),
                stamped(7, 2, 0, register("mallory"), registered(2)),
            ],
        ),
        (
            "a stamp reused for another task's report is refused and the task stays pending",
            vec![
                stamped(7, 1, 0, register("t"), registered(1)),
                stamped(8, 1, 0, register("u"), registered(2)),
                stamped(7, 2, 0, report(2, 1, policy()), accepted(2, 1)),
                stamped(7, 3, 10, get(1, 0), task(0, 1, 0, 1010)),
                stamped(8, 2, 10, get(2, 0), task(1, 1, 0, 1010)),
                stamped(7, 4, 20, finished(0, 1), is(Response::Accepted)),
                stamped(7, 4, 20, finished(1, 1), is(Response::StampReused { seq: 4 })),
                counts(0, [0, 1, 1, 0], false),
                stamped(7, 4, 20, finished(0, 1), is(Response::Accepted)),
                stamped(8, 3, 30, finished(1, 1), is(Response::Accepted)),
            ],
        ),
        (
            "a replayed registration returns the same id",
            vec![
                stamped(7, 1, 0, register("t"), registered(1)),
                stamped(7, 1, 0, register("t"), registered(1)),
                stamped(7, 2, 0, register("t"), registered(2)),
            ],
        ),
        (
            "a sequence number below the last one is StaleRequest",
            vec![
                stamped(7, 5, 0, register("t"), registered(1)),
                stamped(7, 4, 0, register("t"), is(Response::StaleRequest { last_seq: 5 })),
            ],
        ),
        (
            "clients are independent, and unstamped requests skip sessions",
            vec![
                stamped(7, 1, 0, register("t"), registered(1)),
                stamped(8, 1, 0, register("u"), registered(2)),
                at(0, register("v"), registered(3)),
                at(0, register("v"), registered(4)),
            ],
        ),
        (
            "a stranger idle longer than SESSION_IDLE_MS_MAX is forgotten, a trainer's client \
             is not",
            vec![
                at(0, report(2, 1, policy()), accepted(2, 1)),
                stamped(9, 5, 0, eval(), is(Response::Accepted)),
                stamped(7, 1, 0, register("t"), registered(1)),
                stamped(8, 1, SESSION_IDLE_MS_MAX + 1, eval(), is(Response::Accepted)),
                stamped(9, 4, SESSION_IDLE_MS_MAX + 2, eval(), is(Response::Accepted)),
                stamped(7, 1, SESSION_IDLE_MS_MAX + 2, register("t"), registered(1)),
            ],
        ),
    ];
    for (name, steps) in cases {
        check(name, steps);
    }
}
