//! Many seeds, each a whole schedule of faults and a liveness phase, must find no violation.

use simulation::runner::sweep;
use simulation::SimulationConfig;

/// Seeds per test function; four functions let the test harness use every core.
const SEEDS_PER_TEST: u64 = 50;

fn check_seeds(start: u64) {
    check_configured(start, SEEDS_PER_TEST, |config| config);
}

/// Seeds `start..start + count`, each configured by `configure`, find no violation.
fn check_configured(start: u64, count: u64, configure: fn(SimulationConfig) -> SimulationConfig) {
    let summary = sweep(start, count, configure, |_| {});
    let mut failures: Vec<String> = summary
        .failures
        .iter()
        .filter_map(|report| {
            let violation = report.violation.as_ref()?;
            Some(format!(
                "--seed {}: {violation}\n  replay: {}",
                report.seed,
                report.replay_command()
            ))
        })
        .collect();
    failures.extend(
        summary
            .harness_errors
            .iter()
            .map(|(seed, error)| format!("--seed {seed}: harness error: {error}")),
    );
    assert!(failures.is_empty(), "failing seeds:\n{}", failures.join("\n"));
    assert_eq!(summary.schedules, count);
}

/// Seeds 0..50 keep every safety invariant and finish the job after the faults heal.
#[test]
fn seeds_0_to_50_are_safe_and_live() {
    check_seeds(0);
}

/// Seeds 50..100 keep every safety invariant and finish the job after the faults heal.
#[test]
fn seeds_50_to_100_are_safe_and_live() {
    check_seeds(50);
}

/// Seeds 100..150 keep every safety invariant and finish the job after the faults heal.
#[test]
fn seeds_100_to_150_are_safe_and_live() {
    check_seeds(100);
}

/// Seeds 150..200 keep every safety invariant and finish the job after the faults heal.
#[test]
fn seeds_150_to_200_are_safe_and_live() {
    check_seeds(150);
}

/// Seeds 0..25 with an operator that checkpoints the last job, cancels it while a restore
/// races the cancel, and restores once more: every safety invariant holds (the cancelled job
/// never runs again), and every job finishes or stays cancelled.
#[test]
fn seeds_0_to_25_with_an_operator_are_safe_and_live() {
    check_configured(0, 25, SimulationConfig::with_operator);
}

/// Seeds 0..25 with rendezvous agents racing on one run's keys through the faults (compares
/// by versions they read, some stale; adds; sets): the rendezvous-keys checker finds every
/// answer to be its model's, and every job finishes.
#[test]
fn seeds_0_to_25_with_rendezvous_agents_are_safe_and_live() {
    check_configured(0, 25, SimulationConfig::with_rendezvous);
}

/// Seeds 0..50 with trainers that report each finished task with their next ask (one write
/// for both) keep every invariant: the checkers read such an entry as its finishes and then
/// its ask.
#[test]
fn seeds_0_to_50_with_hand_offs_are_safe_and_live() {
    check_configured(0, SEEDS_PER_TEST, SimulationConfig::with_hand_offs);
}
