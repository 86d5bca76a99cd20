//! A leader whose disk stalls keeps leading: its AppendEntries, heartbeats included, leave at
//! once announcing only the commit its disk holds (`consensus::durable_commits`), so the
//! followers keep hearing it and elect nobody, and none of them learns a commit its leader
//! could still lose (the commit durability checker, run at every step).

use simulation::{run, SimulationConfig};

/// The leader's disk stalls 1 s into the run for 600 ms, twice the longest election timeout
/// the simulation draws (300 ms), with no other fault: the leader keeps its term, every
/// invariant holds (commit durability among them), and the jobs finish. Each row: a seed.
#[test]
fn a_leader_whose_disk_stalls_keeps_leading() -> anyhow::Result<()> {
    for seed in [1, 2, 3, 4] {
        let config = SimulationConfig::new(seed).with_leader_disk_stall(1_000, 600);
        let report = run(&config)?;
        assert_eq!(report.violation, None, "--seed {seed} with a stalled leader disk");
        let kept = report.tallies.get("leader kept its term through its disk stall").copied();
        let elections = report.tallies.get("election during the leader's disk stall").copied();
        assert_eq!((kept, elections), (Some(1), None), "--seed {seed}: {}", report.replay);
    }
    Ok(())
}
