//! PServer slots, checkpoint metadata and the latest evaluation.

use master::state::{CheckpointMeta, Command, PServerSlotView, Response, SlotHolder, SlotSecret};

use crate::support::{at, is, policy, run, script, setup, Expect, Step};

fn claim(addr: &str, desired: u32) -> Command {
    Command::ClaimPServerSlot { addr: addr.to_string(), desired }
}

fn release(slot: u32, generation: u64) -> Command {
    Command::ReleasePServerSlot { slot, generation }
}

/// The checkpoint of slot 0 the holder of `generation` wrote at `step`, named as the
/// checkpointer names it.
fn meta((generation, step): (u64, u64)) -> CheckpointMeta {
    let path = format!("/ckpt/{}", storage::checkpoint::file_name(0, step, generation));
    CheckpointMeta { path, step, crc32: 7, created_ms: step.saturating_mul(10) }
}

fn checkpoint(slot: u32, generation: u64, step: u64) -> Command {
    let path = format!("/ckpt/{}", storage::checkpoint::file_name(slot, step, generation));
    Command::RecordCheckpoint {
        slot,
        generation,
        meta: CheckpointMeta { path, ..meta((generation, step)) },
    }
}

/// `checkpoint`: the (generation, step) of the checkpoint the claim hands over.
fn claimed(slot: u32, generation: u64, checkpoint: Option<(u64, u64)>) -> Expect {
    is(Response::SlotClaimed { slot, generation, checkpoint: checkpoint.map(meta) })
}

/// A slot after a case: `(index, holder (addr, generation), checkpoint (generation, step))`.
type Slot<'a> = (u32, Option<(&'a str, u64)>, Option<(u64, u64)>);
/// A case: what it proves, its script, and the slots after it.
type Case<'a> = (&'a str, Vec<Step>, &'a [Slot<'a>]);

fn check(name: &str, steps: Vec<Step>, slots: &[Slot<'_>]) {
    let state = run(name, &steps);
    let expected: Vec<PServerSlotView> = slots
        .iter()
        .map(|(slot, holder, step)| PServerSlotView {
            slot: *slot,
            holder: holder
                .map(|(addr, generation)| SlotHolder { addr: addr.to_string(), generation }),
            checkpoint: step.map(meta),
        })
        .collect();
    assert_eq!(state.sole().pservers(), expected, "{name}: slots");
    assert_eq!(state.status().pservers, expected, "{name}: status slots");
    let desired = u32::try_from(expected.len()).expect("few slots");
    assert_eq!(state.sole().pservers_desired().unwrap_or(0), desired, "{name}: desired");
}

/// Claims take the lowest free slot once `desired` is fixed, every claim gets a new
/// generation, and only the holder of the current generation acts for a slot.
#[test]
fn pserver_slots() {
    let cases: Vec<Case<'_>> = vec![
        (
            "claims fill the lowest free slot; a new claim from the holder keeps the slot under a new generation",
            vec![
                at(0, claim("a:1", 2), claimed(0, 1, None)),
                at(0, claim("b:1", 2), claimed(1, 2, None)),
                at(0, claim("a:1", 2), claimed(0, 3, None)),
            ],
            &[(0, Some(("a:1", 3)), None), (1, Some(("b:1", 2)), None)],
        ),
        (
            "when every slot is held a new address gets SlotsFull",
            vec![
                at(0, claim("a:1", 1), claimed(0, 1, None)),
                at(0, claim("b:1", 1), is(Response::SlotsFull { desired: 1 })),
            ],
            &[(0, Some(("a:1", 1)), None)],
        ),
        (
            "the first claim fixes desired; another count is rejected, invalid counts and addresses too",
            vec![
                at(0, claim("a:1", 0), Expect::RejectedWith("desired")),
                at(0, claim("no-port", 2), Expect::RejectedWith("host:port")),
                at(0, claim("a:1", 2), claimed(0, 1, None)),
                at(0, claim("b:1", 3), Expect::RejectedWith("2 pserver slots")),
            ],
            &[(0, Some(("a:1", 1)), None), (1, None, None)],
        ),
        (
            "only the current generation frees a slot, and the replacement gets it with its checkpoint",
            vec![
                at(0, claim("a:1", 2), claimed(0, 1, None)),
                at(0, checkpoint(0, 1, 5), is(Response::Accepted)),
                at(0, release(0, 2), is(Response::SlotNotHeld)),
                at(0, release(1, 1), is(Response::SlotNotHeld)),
                at(0, release(0, 1), is(Response::Accepted)),
                at(0, claim("c:1", 2), claimed(0, 2, Some((1, 5)))),
            ],
            &[(0, Some(("c:1", 2)), Some((1, 5))), (1, None, None)],
        ),
        (
            "a paused holder whose slot was given away records nothing, whatever its step",
            vec![
                at(0, claim("a:1", 1), claimed(0, 1, None)),
                at(0, release(0, 1), is(Response::Accepted)),
                at(0, claim("b:1", 1), claimed(0, 2, None)),
                at(0, checkpoint(0, 1, 1_000_000_000), is(Response::SlotNotHeld)),
                at(0, checkpoint(0, 2, 3), is(Response::Accepted)),
            ],
            &[(0, Some(("b:1", 2)), Some((2, 3)))],
        ),
        (
            "only a higher step replaces a slot's checkpoint; the rest is answered Stale",
            vec![
                at(0, claim("a:1", 1), claimed(0, 1, None)),
                at(0, checkpoint(0, 1, 5), is(Response::Accepted)),
                at(0, checkpoint(0, 1, 3), is(Response::Stale)),
                at(0, checkpoint(0, 1, 5), is(Response::Stale)),
                at(0, checkpoint(0, 1, 9), is(Response::Accepted)),
            ],
            &[(0, Some(("a:1", 1)), Some((1, 9)))],
        ),
        (
            "a path that is not the checkpointer's name for (slot, step, generation) is rejected",
            vec![
                at(0, claim("a:1", 1), claimed(0, 1, None)),
                at(0, unnamed("/nonexistent", 1 << 62), Expect::RejectedWith("is not a file named")),
                at(0, unnamed(&name_at("/c/../etc", 5), 5), Expect::RejectedWith("is not a file")),
                at(0, unnamed(&name_at("/c", 6), 5), Expect::RejectedWith("is not a file named")),
                at(0, checkpoint(0, 1, 5), is(Response::Accepted)),
            ],
            &[(0, Some(("a:1", 1)), Some((1, 5)))],
        ),
        (
            "checkpoints for slots nobody holds are refused",
            vec![
                at(0, checkpoint(0, 1, 5), is(Response::SlotNotHeld)),
                at(0, claim("a:1", 1), claimed(0, 1, None)),
                at(0, checkpoint(1, 1, 5), is(Response::SlotNotHeld)),
            ],
            &[(0, Some(("a:1", 1)), None)],
        ),
    ];
    for (name, steps, slots) in cases {
        check(name, steps, slots);
    }
}

/// A record of slot 0 under generation 1 at `step` with `path`.
fn unnamed(path: &str, step: u64) -> Command {
    let meta = CheckpointMeta { path: path.to_string(), ..meta((1, step)) };
    Command::RecordCheckpoint { slot: 0, generation: 1, meta }
}

/// The name of slot 0's checkpoint at `step` under generation 1, in `dir`.
fn name_at(dir: &str, step: u64) -> String {
    format!("{dir}/{}", storage::checkpoint::file_name(0, step, 1))
}

/// Only the claim's secret confirms its holder: not another secret, not another generation,
/// and nothing confirms a holder that claimed without one (an older build's claim).
#[test]
fn only_the_claims_secret_confirms_its_holder() {
    let secret = SlotSecret::from_bits(0x5ec7e7);
    let claim_with = |addr: &str| Command::ClaimPServerSlotWithSecret {
        addr: addr.to_string(),
        desired: 2,
        secret,
    };
    let steps = vec![
        at(0, claim_with("a:1"), claimed(0, 1, None)),
        at(0, claim("b:1", 2), claimed(1, 2, None)),
    ];
    let state = run("one claim with a secret, one without", &steps);
    assert!(state.sole().slot_held(0, 1, secret));
    assert!(!state.sole().slot_held(0, 1, SlotSecret::from_bits(1)), "another secret");
    assert!(!state.sole().slot_held(0, 2, secret), "another generation");
    assert!(!state.sole().slot_held(1, 2, secret), "a claim without a secret");
    assert!(!state.sole().slot_held(1, 2, SlotSecret::from_bits(0)), "a claim without a secret");
}

/// The latest evaluation replaces the previous one and shows in status bit for bit; an
/// accuracy that is not a fraction, or a pass the job does not have, is refused.
#[test]
fn latest_eval_is_kept() {
    let eval = |pass, loss, accuracy| Command::RecordEval { pass, loss, accuracy };
    let steps = script(
        vec![at(0, eval(0, 1.0, 0.5), is(Response::NoDataset))],
        script(
            setup(3, 2, policy()),
            vec![
                at(0, eval(0, 2.5, 0.1), is(Response::Accepted)),
                at(0, eval(1, 0.25, 0.9), is(Response::Accepted)),
                at(0, eval(1, 0.25, 1.5), Expect::RejectedWith("accuracy")),
                at(0, eval(1, 0.25, f32::NAN), Expect::RejectedWith("accuracy")),
                at(0, eval(2, 0.25, 0.5), Expect::RejectedWith("pass 2")),
            ],
        ),
    );
    let state = run("two evaluations", &steps);
    let latest = state.status().eval.expect("an evaluation was recorded");
    assert_eq!((latest.pass, latest.loss(), latest.accuracy()), (1, 0.25, 0.9));
}

/// The evaluation of the highest pass is kept whatever order the reports arrive in: a slow
/// trainer's report of an earlier pass is acknowledged and changes nothing, a report of the same
/// pass replaces the one before.
#[test]
fn eval_of_highest_pass_is_kept() {
    // (name, reports as (pass, loss), the (pass, loss) status must show)
    let cases: [EvalCase; 5] = [
        ("one report", &[(1, 0.5)], (1, 0.5)),
        ("rising passes", &[(0, 2.0), (1, 1.0), (2, 0.5)], (2, 0.5)),
        ("late pass 0 after pass 2", &[(2, 0.5), (0, 2.0)], (2, 0.5)),
        ("late pass 1 between", &[(0, 2.0), (2, 0.5), (1, 1.0)], (2, 0.5)),
        ("same pass replaces", &[(1, 1.0), (1, 0.75)], (1, 0.75)),
    ];
    for (name, reports, want) in cases {
        check_eval(name, reports, want);
    }
}

/// A case of `eval_of_highest_pass_is_kept`.
type EvalCase = (&'static str, &'static [(u32, f32)], (u32, f32));

fn check_eval(name: &str, reports: &[(u32, f32)], want: (u32, f32)) {
    let steps = script(
        setup(3, 3, policy()),
        reports
            .iter()
            .map(|(pass, loss)| {
                let command = Command::RecordEval { pass: *pass, loss: *loss, accuracy: 0.5 };
                at(0, command, is(Response::Accepted))
            })
            .collect(),
    );
    let state = run(name, &steps);
    let kept = state.status().eval.expect("an evaluation was recorded");
    assert_eq!((kept.pass, kept.loss()), want, "{name}");
}
