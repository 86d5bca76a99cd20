//! The checkers catch bugs planted on purpose, at fixed seeds that pass without the bug. All
//! but the first are planted in the production code (`consensus::planted`, `master::planted`)
//! and switched on for the simulation's thread only.

use simulation::dataset::SimDataset;
use simulation::{run, PlantedBugs, SimulationConfig};

/// Runs `seed` without and with `bugs`; the clean run must pass and the buggy one must break
/// `invariant`. The seeds were found running RecordIO jobs, so that is what they run here
/// (some draw an index job, whose schedule differs).
fn check(seed: u64, bugs: PlantedBugs, invariant: &str) -> anyhow::Result<()> {
    let config = SimulationConfig::new(seed).with_dataset(SimDataset::RecordIo);
    let clean = run(&config)?;
    assert_eq!(clean.violation, None, "--seed {seed} fails without the planted bug");
    let broken = run(&config.with_bugs(bugs))?;
    let violation = broken
        .violation
        .ok_or_else(|| anyhow::anyhow!("--seed {seed}: {bugs:?} went unnoticed"))?;
    assert_eq!(violation.invariant, invariant, "--seed {seed}: {violation}");
    Ok(())
}

fn production(bug: &'static [&'static str]) -> PlantedBugs {
    PlantedBugs { production: bug, ..PlantedBugs::default() }
}

/// A log store that acknowledges appends before they are durable loses acknowledged entries in
/// a crash: at seeds 44 and 70 a node elected later lacks an entry committed before.
#[test]
fn acknowledging_before_durable_is_caught() -> anyhow::Result<()> {
    let bugs = PlantedBugs { ack_before_durable: true, ..PlantedBugs::default() };
    check(44, bugs, "leader completeness")?;
    check(70, bugs, "leader completeness")
}

/// A master service that applies `TaskFinished` under the task's current epoch, whatever
/// epoch the trainer reported, tells a trainer the task was taken from that its late report
/// was accepted: the log shows another epoch's report, never the one the trainer was told of.
#[test]
fn skipping_the_epoch_check_is_caught() -> anyhow::Result<()> {
    check(11, production(&["skip-epoch-check"]), "client-visible safety")
}

/// A master that answers `TaskFinished` before the report is committed tells a trainer of a
/// completion no replica applies.
#[test]
fn answering_before_commit_is_caught() -> anyhow::Result<()> {
    check(1, production(&["answer-before-commit"]), "client-visible safety")
}

/// Trainer and pserver heartbeats answered by a node that believes it leads, without a
/// quorum confirming it: a leader isolated from the other masters (but not from its pservers)
/// keeps telling a pserver it holds its slot after the new leader gave the slot to another.
#[test]
fn heartbeats_answered_by_a_deposed_leader_are_caught() -> anyhow::Result<()> {
    check(20, production(&["deposed-heartbeats"]), "slot holders")
}

/// Lease tables carried across terms: a node that leads again declares holders lost at once,
/// judged by leases it granted in an old term.
#[test]
fn leases_carried_across_terms_are_caught() -> anyhow::Result<()> {
    check(3, production(&["leases-across-terms"]), "lease terms")
}

/// A batcher whose entries wait for openraft's answer only (no end at a leadership change or
/// the write timeout): a leader isolated with entries in flight, overtaken, caught up by a
/// snapshot that replaced those entries and elected again, holds its batcher slots for ever
/// and commits nothing after the heal.
#[test]
fn a_jammed_batcher_is_caught() -> anyhow::Result<()> {
    check(561, production(&["jammed-batcher"]), "liveness after heal")
}
