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

/// A seed with membership changes runs one schedule, also when several runs share a loaded
/// machine: the nemesis draws from its own stream, its changes run as tasks of the one
/// current-thread runtime, and nothing reads the wall clock. (Clients refreshed the members
/// they learned by `std`'s clock: runs slowed by other runs refreshed at other moments, and
/// hardly two of eighteen runs of seed 4 in six threads agreed.)
#[test]
fn a_membership_seed_replays_exactly_in_parallel_runs() -> anyhow::Result<()> {
    let config = SimulationConfig::new(4).with_membership();
    let runs: Vec<std::thread::JoinHandle<Traces>> = (0..THREADS)
        .map(|_| {
            let config = config.clone();
            std::thread::spawn(move || {
                let mut traces = Vec::new();
                for _ in 0..RUNS_PER_THREAD {
                    let report = run(&config)?;
                    traces.push((report.trace_hash, report.event_count));
                }
                Ok(traces)
            })
        })
        .collect();
    let mut traces = Vec::new();
    for handle in runs {
        let joined = handle.join().map_err(|_| anyhow::anyhow!("a run panicked"))?;
        traces.extend(joined?);
    }
    let first = traces[0];
    assert!(
        traces.iter().all(|trace| *trace == first),
        "{} ran different schedules: {traces:x?}",
        simulation::replay_command(&config)
    );
    Ok(())
}

/// Each run's trace hash and event count, from one thread.
type Traces = anyhow::Result<Vec<(u64, u64)>>;

/// Runs at once, and runs of each, for the replay test: enough to load two cores.
const THREADS: usize = 4;
const RUNS_PER_THREAD: usize = 2;
