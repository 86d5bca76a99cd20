//! A master whose Raft core stopped on a fatal error exits so its supervisor restarts it
//! (`raftrain master`); the simulation does the same. What stops a core here is a disk that
//! fails a flush (an fsync returning EIO): the writes it covered may not be on the disk, so the
//! node must not go on as if they were. (openraft 0.9.25 can also stop a leader's core in a
//! race, a replication stream quitting on a higher vote before the core sends it a snapshot;
//! seeds used to hit it, but schedules move with every change, so the test plants its own
//! fault instead of depending on one.)

use simulation::{run, SimulationConfig};

/// The leader's disk fails one flush 1.5 s into the fault phase: its core stops, the master
/// is restarted, and the run keeps every invariant (nothing acknowledged is lost) and
/// finishes its jobs.
#[test]
fn a_master_whose_disk_failed_a_flush_is_restarted() -> anyhow::Result<()> {
    // Seeds with a leader 1.5 s into their fault phase (seed 1 has none until its faults heal).
    for seed in [2, 3, 4] {
        let config = SimulationConfig::new(seed).with_flush_failure_at(1_500);
        let report = run(&config)?;
        assert_eq!(report.violation, None, "--seed {seed} with a failed flush");
        assert_eq!(report.tallies.get("failed flush").copied(), Some(1), "--seed {seed}");
        let restarts = report.tallies.get("raft core stopped, master restarted").copied();
        assert!(restarts >= Some(1), "--seed {seed}: the failed flush stopped no core");
    }
    Ok(())
}
