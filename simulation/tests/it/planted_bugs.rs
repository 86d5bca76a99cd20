//! The checkers catch bugs planted on purpose, at fixed seeds that pass without the bug. All
//! but the first are planted in the production code (`consensus::planted`, `master::planted`,
//! `pserver::planted`) and switched on for the simulation's thread only; they exist only with
//! this crate's `planted-bugs` feature (`cargo test -p simulation --features planted-bugs
//! --profile planted planted_bugs`, which a build without it runs nested: `planted_build.rs`).
//! Without it, a run that names one is refused.

use simulation::checker::Violation;
use simulation::dataset::SimDataset;
use simulation::{run, PlantedBugs, SimulationConfig};

/// Runs `seed` without and with `bugs`; the clean run must pass and the buggy one must break
/// `invariant`. The seeds were found running one RecordIO job, so that is what they run here
/// (some draw an index job, or two jobs, whose schedules differ). Issue 25's election timer
/// and handoff changes moved every schedule, and so did the leader's parallel flush; the seeds
/// that no longer caught their bug were found again by running each bug over seeds 0.. until
/// caught.
fn check(seed: u64, bugs: PlantedBugs, invariant: &str) -> anyhow::Result<()> {
    let config = SimulationConfig::new(seed).with_job_count(1).with_dataset(SimDataset::RecordIo);
    check_config(config, bugs, invariant).map(drop)
}

/// Runs `config` without and with `bugs`, as `check` does; the violation found.
fn check_config(
    config: SimulationConfig,
    bugs: PlantedBugs,
    invariant: &str,
) -> anyhow::Result<Violation> {
    let seed = config.seed;
    let clean = run(&config)?;
    assert_eq!(clean.violation, None, "--seed {seed} fails without the planted bug");
    let broken = run(&config.with_bugs(bugs))?;
    let violation = broken
        .violation
        .ok_or_else(|| anyhow::anyhow!("--seed {seed}: {bugs:?} went unnoticed"))?;
    assert_eq!(violation.invariant, invariant, "--seed {seed}: {violation}");
    Ok(violation)
}

#[cfg(feature = "planted-bugs")]
fn production(bug: &'static [&'static str]) -> PlantedBugs {
    PlantedBugs { production: bug, ..PlantedBugs::default() }
}

/// A log store that acknowledges appends before they are durable lets a commit run ahead of
/// the disks: at seeds 23 and 45 a follower knows of a commit beyond what its leader has
/// durable (the commit-durability checker, before any crash can lose the entry); at seed 27
/// below, a node elected later lacks an entry committed before.
#[test]
fn acknowledging_before_durable_is_caught() -> anyhow::Result<()> {
    let bugs = PlantedBugs { ack_before_durable: true, ..PlantedBugs::default() };
    check(23, bugs, "commit durability")?;
    check(45, bugs, "commit durability")
}

/// The same with two jobs at once: seed 27 draws two jobs (`--plant-ack-before-durable --jobs
/// 2 --seeds 60` finds 27, 29 and 44), passes clean, and with the bug a follower knows of a
/// commit beyond what its leader has durable.
#[test]
fn acknowledging_before_durable_is_caught_with_two_jobs() -> anyhow::Result<()> {
    let config = SimulationConfig::new(27);
    assert_eq!(config.jobs.len(), 2, "seed 27 no longer draws two jobs: find another seed");
    let bugs = PlantedBugs { ack_before_durable: true, ..PlantedBugs::default() };
    check_config(config, bugs, "commit durability").map(drop)
}

/// A master service that applies `TaskFinished` under the task's current epoch, whatever
/// epoch the trainer reported, tells a trainer the task was taken from that its late report
/// was accepted: the log shows another epoch's report, never the one the trainer was told of.
#[test]
#[cfg(feature = "planted-bugs")]
fn skipping_the_epoch_check_is_caught() -> anyhow::Result<()> {
    check(5, production(&["skip-epoch-check"]), "client-visible safety")
}

/// The same with two jobs at once, caught in the second job, whose task ids and epochs are
/// the first job's too: at seed 64 (which draws two jobs) a trainer of job "simulated-2" is
/// told its report of a task was accepted and no replica applies it; a checker that did not
/// keep jobs apart could take the first job's report of a task with the same id and epoch for
/// it. (Seeds move with every change to the schedule: 68, 71, 43, then 4 caught it until
/// clients' asks went on a stream; `--plant skip-epoch-check --seeds 80` finds 2, 64 and 69
/// in "simulated-2".)
#[test]
#[cfg(feature = "planted-bugs")]
fn skipping_the_epoch_check_is_caught_in_the_second_of_two_jobs() -> anyhow::Result<()> {
    let config = SimulationConfig::new(64);
    assert_eq!(config.jobs.len(), 2, "seed 64 no longer draws two jobs: find another seed");
    let bugs = production(&["skip-epoch-check"]);
    let violation = check_config(config, bugs, "client-visible safety")?;
    assert!(violation.detail.contains("of job \"simulated-2\""), "--seed 64: {violation}");
    Ok(())
}

/// The same in a hand-off: a master that applies a hand-off's finished receipts under each
/// task's current epoch tells a trainer whose task was taken that its finish was accepted,
/// and the log (read as the hand-off's finishes, then its ask) shows another epoch's. Seed 21
/// with `--hand-offs` (`--plant skip-epoch-check --hand-offs --seeds 30` finds 0, 6, 8, 14, 15 and
/// 24 in the first job; 21 did until clients' asks went on a stream).
#[test]
#[cfg(feature = "planted-bugs")]
fn skipping_the_epoch_check_in_a_hand_off_is_caught() -> anyhow::Result<()> {
    let config = SimulationConfig::new(6).with_hand_offs();
    check_config(config, production(&["skip-epoch-check"]), "client-visible safety").map(drop)
}

/// A master that answers `TaskFinished` before the report is committed tells a trainer of a
/// completion no replica applies.
#[test]
#[cfg(feature = "planted-bugs")]
fn answering_before_commit_is_caught() -> anyhow::Result<()> {
    check(1, production(&["answer-before-commit"]), "client-visible safety")
}

/// Trainer and pserver heartbeats answered by a node that believes it leads, without a
/// quorum confirming it: a leader isolated from the other masters (but not from its pservers)
/// keeps telling a pserver it holds its slot after the new leader gave the slot to another.
#[test]
#[cfg(feature = "planted-bugs")]
fn heartbeats_answered_by_a_deposed_leader_are_caught() -> anyhow::Result<()> {
    check(4, production(&["deposed-heartbeats"]), "slot holders")
}

/// Lease tables carried across terms: a node that leads again declares holders lost at once,
/// judged by leases it granted in an old term.
#[test]
#[cfg(feature = "planted-bugs")]
fn leases_carried_across_terms_are_caught() -> anyhow::Result<()> {
    check(2, production(&["leases-across-terms"]), "lease terms")
}

/// A restore that reaches a cancelled job and puts it back to running, as a restore once did
/// (the job's gate let it through, and the restore cleared the end): the operator cancels
/// seed 1's job while a data-only restore races the cancel, the restore applies after it, and
/// `check_transition` sees the cancelled job run again.
#[test]
#[cfg(feature = "planted-bugs")]
fn a_restore_that_revives_a_cancelled_job_is_caught() -> anyhow::Result<()> {
    let config = SimulationConfig::new(1).with_operator();
    let bugs = production(&["restore-revives-ended"]);
    let violation = check_config(config, bugs, "task queue transition")?;
    assert!(violation.detail.contains("cancelled: true"), "--seed 1: {violation}");
    Ok(())
}

/// A claim answered with another job incarnation's id (the next one) puts the pserver's files
/// in that incarnation's directory: the first checkpoint it records there is outside its own
/// job's, and the incarnation-files checker sees it in the state at once.
#[test]
#[cfg(feature = "planted-bugs")]
fn a_claim_naming_another_incarnation_is_caught() -> anyhow::Result<()> {
    check(1, production(&["claim-another-incarnation"]), "incarnation files")
}

/// A shard that applies a push whatever model restore it was computed on: the operator
/// restores seed 11's job with the model while its trainers push, a gradient computed on the
/// model before the restore lands in a reloaded shard, and restore fencing sees it from the
/// simulation's own record of what each shard was loaded for (`--plant push-across-restore
/// --operator --seeds 30` finds 11, 17 and 20; 11, 7, then 13 did before schedules moved).
#[test]
#[cfg(feature = "planted-bugs")]
fn a_push_across_a_restore_is_caught() -> anyhow::Result<()> {
    let config = SimulationConfig::new(11).with_operator();
    let violation = check_config(config, production(&["push-across-restore"]), "restore fencing")?;
    assert!(violation.detail.contains("reloaded for restore 1"), "--seed 11: {violation}");
    Ok(())
}

/// A batcher whose entries wait for openraft's answer only (no end at a leadership change or
/// the write timeout): a leader isolated with entries in flight, overtaken, caught up by a
/// snapshot that replaced those entries and elected again, holds its batcher slots for ever
/// and commits nothing after the heal. Seed 94 with one job and an 8 s fault phase has that
/// sequence (`--plant jammed-batcher --jobs 1 --fault-phase-ms 8000 --seeds 300` finds 94 and
/// 228; 37, 94, then 127 did before schedules moved; with the seeds' own fault phases none of
/// 0-450 did once an AppendEntries stopped waiting for the leader's flush).
#[test]
#[cfg(feature = "planted-bugs")]
fn a_jammed_batcher_is_caught() -> anyhow::Result<()> {
    let config =
        SimulationConfig { fault_phase_ms: 8_000, ..SimulationConfig::new(94).with_job_count(1) };
    check_config(config, production(&["jammed-batcher"]), "liveness after heal").map(drop)
}

/// A rendezvous compare by version that also accepts the version just before the key's
/// current one: at seed 8 with the rendezvous agents, an agent that read version 0 of the
/// state key before another agent wrote version 1 writes it by version 0, and the
/// rendezvous-keys checker's model of the applied log answers "not set" where the state said
/// set (`--plant rendezvous-stale-version --rendezvous --seeds 10` finds 0, 5, 6, 8 and 9).
#[test]
#[cfg(feature = "planted-bugs")]
fn a_compare_by_a_stale_rendezvous_version_is_caught() -> anyhow::Result<()> {
    let config = SimulationConfig::new(8).with_rendezvous();
    let violation =
        check_config(config, production(&["rendezvous-stale-version"]), "rendezvous keys")?;
    assert!(violation.detail.contains("a CompareVersion naming version"), "--seed 8: {violation}");
    Ok(())
}

/// A membership change answered as done once it is proposed, before openraft commits it (a
/// joint change then never even proposes its uniform configuration): at seed 3 with the
/// membership nemesis, the removal of member 2 is answered while the committed membership
/// still lists it, and the membership checker says so at that step, before the nemesis wipes
/// the member's disk (`--plant membership-ack-before-commit --membership --seeds 30` catches
/// it at every seed).
#[test]
#[cfg(feature = "planted-bugs")]
fn a_membership_change_answered_before_it_commits_is_caught() -> anyhow::Result<()> {
    let config = SimulationConfig::new(3).with_membership();
    let bug = production(&["membership-ack-before-commit"]);
    let violation = check_config(config, bug, "membership change acknowledged")?;
    assert!(violation.detail.contains("Remove of member 2"), "--seed 3: {violation}");
    Ok(())
}

/// Without the `planted-bugs` feature a run naming a production bug fails at once, naming the
/// feature, instead of running clean (which would read as "the bug went unnoticed").
#[test]
#[cfg(not(feature = "planted-bugs"))]
fn a_production_bug_is_refused_without_the_feature() {
    let bugs = PlantedBugs { production: &["skip-epoch-check"], ..PlantedBugs::default() };
    let refused = run(&SimulationConfig::new(11).with_bugs(bugs))
        .expect_err("a build without the planted bugs runs skip-epoch-check");
    let message = refused.to_string();
    assert!(message.contains("skip-epoch-check"), "{message}");
    assert!(message.contains("--features planted-bugs"), "{message}");
}

/// The runner's `--plant BUG`, likewise: it exits with an error naming the feature and the
/// command that builds it, before running any seed.
#[test]
#[cfg(not(feature = "planted-bugs"))]
fn the_runner_refuses_to_plant_without_the_feature() -> anyhow::Result<()> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_simulation"))
        .args(["--seed", "20", "--plant", "deposed-heartbeats"])
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.is_empty(), "a seed ran: {stdout}");
    let command = "cargo run -p simulation --release --features planted-bugs";
    assert!(stderr.contains("cannot plant deposed-heartbeats"), "{stderr}");
    assert!(stderr.contains(command), "{stderr}");
    Ok(())
}

/// The runner binary carries the planted code exactly when built with the feature: the marker
/// `cli`'s test finds nowhere in `raftrain` (`cli/tests/it/planted_bugs.rs`) is really in a
/// binary built with the planted bugs, so that test can fail.
#[test]
fn the_runner_carries_the_planted_code_only_with_the_feature() -> anyhow::Result<()> {
    let path = env!("CARGO_BIN_EXE_simulation");
    let runner = std::fs::read(path)?;
    let marker = platform::planted::COMPILED_IN_MARKER.as_bytes();
    let carried = runner.windows(marker.len()).any(|window| window == marker);
    assert_eq!(carried, cfg!(feature = "planted-bugs"), "{path}");
    Ok(())
}
