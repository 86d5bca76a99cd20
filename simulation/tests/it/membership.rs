//! Membership changes among the faults (`--membership`): voters removed (the leader too) and
//! added back on wiped disks, the group grown to four or five and shrunk back, dead voters
//! removed, while the workload and every other fault run; every invariant holds, the
//! membership checkers' included, and a membership seed replays exactly.

use std::collections::BTreeMap;

use simulation::{run, SimulationConfig};

/// Ten seeds with the membership nemesis keep every invariant and finish their jobs, and
/// between them they make every kind of change: removals (some of the leader, which hands
/// off first), wiped members added back and promoted, new members, dead voters removed.
#[test]
fn ten_seeds_with_membership_changes_run_clean() -> anyhow::Result<()> {
    let mut tallies: BTreeMap<&'static str, u64> = BTreeMap::new();
    for seed in 0..10 {
        let report = run(&SimulationConfig::new(seed).with_membership())?;
        assert_eq!(report.violation, None, "{}", report.replay_command());
        for (kind, count) in report.tallies {
            *tallies.entry(kind).or_default() += count;
        }
    }
    for kind in [
        "member removed",
        "member added as a learner",
        "learner promoted",
        "wiped and rejoined",
        "new member joined",
        "leader handed off before its removal",
        "membership plan: replace a voter",
        "membership plan: grow and shrink",
        "membership plan: remove a dead voter",
    ] {
        assert!(tallies.get(kind).copied().unwrap_or(0) > 0, "no {kind:?} in {tallies:?}");
    }
    Ok(())
}

/// A seed with membership changes runs one schedule: the nemesis draws from its own stream
/// and its changes run as tasks of the one current-thread runtime.
#[test]
fn a_membership_seed_replays_exactly() -> anyhow::Result<()> {
    let config = SimulationConfig::new(4).with_membership();
    let first = run(&config)?;
    let second = run(&config)?;
    assert_eq!(
        (first.trace_hash, first.event_count),
        (second.trace_hash, second.event_count),
        "{} ran two different schedules",
        first.replay_command()
    );
    Ok(())
}
