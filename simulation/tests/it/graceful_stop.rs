//! Graceful stops (SIGTERM) of masters, the leader among them: with every drawn crash made a
//! graceful stop (crashes of every node and mid-snapshot crashes stay), leaders hand leadership off through the simulated network and every
//! invariant holds while the job finishes.

use simulation::{run, SimulationConfig};

/// Seeds 0..10 with graceful stops only: each run is safe and live, and across them
/// leadership was handed off (a stop of the leader, not only of followers).
#[test]
fn graceful_stops_hand_leadership_off_safely() -> anyhow::Result<()> {
    let mut handed_off = 0;
    for seed in 0..10 {
        let config = SimulationConfig { graceful_stop_percent: 100, ..SimulationConfig::new(seed) };
        let report = run(&config)?;
        assert_eq!(report.violation, None, "--seed {seed} with graceful stops only");
        handed_off += report.tallies.get("leadership handed off").copied().unwrap_or(0);
    }
    assert!(handed_off > 0, "no leader handed off in ten seeds");
    Ok(())
}
