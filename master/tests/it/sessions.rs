//! Exactly-once client writes: a retried (client, seq) is answered, not applied again.

use master::state::{Command, Response, SESSION_COUNT_MAX, SESSION_IDLE_MS_MAX};

use crate::support::{
    accepted, at, counts, get, is, policy, register, report, run, stamped, task, Step,
};

fn registered(trainer: u64) -> crate::support::Expect {
    is(Response::TrainerRegistered { trainer })
}

fn check(name: &str, steps: Vec<Step>) {
    run(name, &steps);
}

/// Replays, stale sequence numbers and both ways sessions are forgotten.
#[test]
fn client_sessions() {
    let eval = Command::RecordEval { pass: 0, loss: 1.0, accuracy: 0.5 };
    let mut crowd = vec![stamped(1, 1, 0, register("a"), registered(1))];
    // SESSION_COUNT_MAX more clients, each seen later than client 1: client 1 is the oldest.
    for client_id in 2..=u64::try_from(SESSION_COUNT_MAX).expect("small") + 1 {
        crowd.push(stamped(client_id, 1, client_id, eval.clone(), is(Response::Accepted)));
    }
    crowd.push(stamped(1, 1, 1_000_000, register("a"), registered(2)));
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "a replayed GetTask returns the same assignment and dispatches nothing more",
            vec![
                stamped(7, 1, 0, register("t"), registered(1)),
                stamped(7, 2, 0, report(2, 1, policy()), accepted(2, 1)),
                stamped(7, 3, 10, get(1, 0), task(0, 1, 0, 1010)),
                stamped(7, 3, 20, get(1, 0), task(0, 1, 0, 1010)),
                counts(0, [1, 1, 0, 0], false),
                stamped(7, 4, 30, get(1, 0), task(1, 1, 0, 1030)),
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
            "a client idle longer than SESSION_IDLE_MS_MAX is forgotten",
            vec![
                stamped(7, 1, 0, register("t"), registered(1)),
                stamped(8, 1, SESSION_IDLE_MS_MAX + 1, register("u"), registered(2)),
                stamped(7, 1, SESSION_IDLE_MS_MAX + 2, register("t"), registered(3)),
            ],
        ),
        ("beyond SESSION_COUNT_MAX clients the longest idle is forgotten", crowd),
    ];
    for (name, steps) in cases {
        check(name, steps);
    }
}
