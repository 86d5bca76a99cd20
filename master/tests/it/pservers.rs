//! PServer slots, checkpoint metadata and the latest evaluation.

use master::state::{CheckpointMeta, Command, PServerSlotView, Response};

use crate::support::{at, is, run, Expect, Step};

fn claim(addr: &str, desired: u32) -> Command {
    Command::ClaimPServerSlot { addr: addr.to_string(), desired }
}

fn release(index: u32, addr: &str) -> Command {
    Command::ReleasePServerSlot { index, addr: addr.to_string() }
}

fn meta(step: u64) -> CheckpointMeta {
    CheckpointMeta { path: format!("ckpt/{step}"), step, crc32: 7, created_ms: step * 10 }
}

fn checkpoint(index: u32, step: u64) -> Command {
    Command::RecordCheckpoint { index, meta: meta(step) }
}

fn claimed(index: u32, checkpoint_step: Option<u64>) -> Expect {
    is(Response::SlotClaimed { index, checkpoint: checkpoint_step.map(meta) })
}

/// A case: what it proves, its script, and the slots `(index, holder, checkpoint step)` after it.
type Case<'a> = (&'a str, Vec<Step>, &'a [(u32, Option<&'a str>, Option<u64>)]);

fn check(name: &str, steps: Vec<Step>, slots: &[(u32, Option<&str>, Option<u64>)]) {
    let state = run(name, &steps);
    let expected: Vec<PServerSlotView> = slots
        .iter()
        .map(|(index, addr, step)| PServerSlotView {
            index: *index,
            addr: addr.map(str::to_string),
            checkpoint: step.map(meta),
        })
        .collect();
    assert_eq!(state.pservers(), expected, "{name}: slots");
    assert_eq!(state.status().pservers, expected, "{name}: status slots");
    let desired = u32::try_from(expected.len()).expect("few slots");
    assert_eq!(state.pservers_desired().unwrap_or(0), desired, "{name}: desired");
}

/// Claims take the lowest free slot once `desired` is fixed, are idempotent per address, and
/// checkpoints only move forward.
#[test]
fn pserver_slots() {
    let cases: Vec<Case<'_>> = vec![
        (
            "claims fill the lowest free slot and a repeated claim keeps its slot",
            vec![
                at(0, claim("a:1", 2), claimed(0, None)),
                at(0, claim("b:1", 2), claimed(1, None)),
                at(0, claim("a:1", 2), claimed(0, None)),
            ],
            &[(0, Some("a:1"), None), (1, Some("b:1"), None)],
        ),
        (
            "when every slot is held a new address gets SlotsFull",
            vec![
                at(0, claim("a:1", 1), claimed(0, None)),
                at(0, claim("b:1", 1), is(Response::SlotsFull { desired: 1 })),
            ],
            &[(0, Some("a:1"), None)],
        ),
        (
            "the first claim fixes desired; another count is rejected, invalid counts too",
            vec![
                at(0, claim("a:1", 0), Expect::RejectedWith("desired")),
                at(0, claim("a:1", 2), claimed(0, None)),
                at(0, claim("b:1", 3), Expect::RejectedWith("2 pserver slots")),
            ],
            &[(0, Some("a:1"), None), (1, None, None)],
        ),
        (
            "only the holder frees a slot, and the replacement gets it with its checkpoint",
            vec![
                at(0, claim("a:1", 2), claimed(0, None)),
                at(0, checkpoint(0, 5), is(Response::Accepted)),
                at(0, release(0, "b:1"), is(Response::SlotNotHeld)),
                at(0, release(1, "a:1"), is(Response::SlotNotHeld)),
                at(0, release(0, "a:1"), is(Response::Accepted)),
                at(0, claim("c:1", 2), claimed(0, Some(5))),
            ],
            &[(0, Some("c:1"), Some(5)), (1, None, None)],
        ),
        (
            "only a higher step replaces a slot's checkpoint",
            vec![
                at(0, claim("a:1", 1), claimed(0, None)),
                at(0, checkpoint(0, 5), is(Response::Accepted)),
                at(0, checkpoint(0, 3), is(Response::Stale)),
                at(0, checkpoint(0, 5), is(Response::Stale)),
                at(0, checkpoint(0, 9), is(Response::Accepted)),
            ],
            &[(0, Some("a:1"), Some(9))],
        ),
        (
            "checkpoints for slots that do not exist are rejected",
            vec![
                at(0, checkpoint(0, 5), Expect::RejectedWith("no pserver slot")),
                at(0, claim("a:1", 1), claimed(0, None)),
                at(0, checkpoint(1, 5), Expect::RejectedWith("slot 1")),
            ],
            &[(0, Some("a:1"), None)],
        ),
    ];
    for (name, steps, slots) in cases {
        check(name, steps, slots);
    }
}

/// The latest evaluation replaces the previous one and shows in status bit for bit.
#[test]
fn latest_eval_is_kept() {
    let eval = |pass, loss, accuracy| Command::RecordEval { pass, loss, accuracy };
    let steps = vec![
        at(0, eval(0, 2.5, 0.1), is(Response::Accepted)),
        at(0, eval(1, 0.25, 0.9), is(Response::Accepted)),
    ];
    let state = run("two evaluations", &steps);
    let latest = state.status().eval.expect("an evaluation was recorded");
    assert_eq!((latest.pass, latest.loss(), latest.accuracy()), (1, 0.25, 0.9));
}
