//! The checkers catch bugs planted on purpose, at fixed seeds that pass without the bug.

use simulation::{run, PlantedBugs, SimulationConfig};

/// Runs `seed` without and with `bugs`; the clean run must pass and the buggy one must break
/// `invariant`.
fn check(seed: u64, bugs: PlantedBugs, invariant: &str) -> anyhow::Result<()> {
    let clean = run(&SimulationConfig::new(seed))?;
    assert_eq!(clean.violation, None, "--seed {seed} fails without the planted bug");
    let broken = run(&SimulationConfig::new(seed).with_bugs(bugs))?;
    let violation = broken
        .violation
        .ok_or_else(|| anyhow::anyhow!("--seed {seed}: {bugs:?} went unnoticed"))?;
    assert_eq!(violation.invariant, invariant, "--seed {seed}: {violation}");
    Ok(())
}

/// A log store that acknowledges appends before they are durable loses acknowledged entries in
/// a crash: at seeds 30 and 50 a node elected later lacks an entry committed in term 1 (leader
/// completeness). (openraft no longer stops a leader whose follower's log went back: the
/// workspace builds it with `loosen-follower-log-revert` so a master that lost its disk can
/// rejoin; the checkers, not openraft's assertion, must find the lost entries.)
#[test]
fn acknowledging_before_durable_is_caught() -> anyhow::Result<()> {
    let bugs = PlantedBugs { ack_before_durable: true, ..PlantedBugs::default() };
    check(30, bugs, "leader completeness")?;
    check(50, bugs, "leader completeness")
}

/// A master service that applies `TaskFinished` under the task's current epoch, whatever
/// epoch the trainer reported, accepts a late report from a trainer the task was taken from.
#[test]
fn skipping_the_epoch_check_is_caught() -> anyhow::Result<()> {
    let bugs = PlantedBugs { production: &["skip-epoch-check"], ..PlantedBugs::default() };
    check(3, bugs, "epoch fencing")
}
