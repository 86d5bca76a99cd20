//! openraft 0.9.25 can stop a leader's Raft core in a race (a replication stream quits on a
//! higher vote, then the core sends it a snapshot: "replication channel closed"). `raftrain
//! master` then exits so its supervisor restarts it; the simulation does the same. Seed 1030
//! hits the race (66589 did until the simulated pservers ran the production slot keeper).

use simulation::dataset::SimDataset;
use simulation::{run, SimulationConfig};

/// The race happens at seed 1030 (on the one RecordIO job it was found with; the seed would
/// now draw an index-range job, and may draw two jobs), the master is restarted, and the run
/// keeps every invariant and finishes the job.
#[test]
fn a_master_whose_raft_core_stopped_is_restarted() -> anyhow::Result<()> {
    let config = SimulationConfig::new(1030).with_job_count(1).with_dataset(SimDataset::RecordIo);
    let report = run(&config)?;
    assert_eq!(report.violation, None, "--seed 1030");
    let restarts = report.tallies.get("raft core stopped, master restarted").copied();
    assert_eq!(restarts, Some(1), "the race at seed 1030 no longer happens: find another seed");
    Ok(())
}
