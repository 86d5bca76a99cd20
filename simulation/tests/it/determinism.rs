//! One seed, one schedule: two runs of a seed produce the same event trace.

use simulation::{run, SimulationConfig};

/// Running a seed twice yields the same trace hash and event count, while another seed yields
/// a different trace (so the hash does depend on the schedule). With the leader's parallel
/// flush, seed 3 ran a different schedule in most runs while its durability gate woke the
/// leader's apply and replication streams in tokio's random order, and seed 76 while two
/// pservers' heartbeats waited for one apply on openraft's metrics watch.
#[test]
fn a_seed_replays_exactly() -> anyhow::Result<()> {
    for seed in [3, 22, 41, 76] {
        let first = run(&SimulationConfig::new(seed))?;
        let second = run(&SimulationConfig::new(seed))?;
        assert_eq!(
            (first.trace_hash, first.event_count, first.simulated_ms),
            (second.trace_hash, second.event_count, second.simulated_ms),
            "--seed {seed} ran two different schedules"
        );
        let other = run(&SimulationConfig::new(seed + 1000))?;
        assert_ne!(
            first.trace_hash,
            other.trace_hash,
            "seeds {seed} and {} traced alike",
            seed + 1000
        );
    }
    Ok(())
}

/// Seed 45 stops its leader gracefully while writes are held at it: they are redirected to
/// the successor in the order they came (one search for the successor, a first-come mutex), so
/// the run replays. When each held write waited on openraft's metrics watch, which wakes its
/// waiters in an order tokio draws at random, about one run in four differed.
#[test]
fn a_leaving_leaders_held_writes_replay_in_order() -> anyhow::Result<()> {
    let first = run(&SimulationConfig::new(45))?;
    assert!(
        first.tallies.get("graceful stop").copied().unwrap_or(0) > 0,
        "seed 45 no longer stops a node gracefully: {:?}",
        first.tallies
    );
    for _ in 0..5 {
        let again = run(&SimulationConfig::new(45))?;
        assert_eq!(
            (again.trace_hash, again.event_count),
            (first.trace_hash, first.event_count),
            "--seed 45 ran two different schedules"
        );
    }
    Ok(())
}

/// A run whose job count and fault phase were overridden (as `--jobs` and `--fault-phase-ms`
/// do) reports a replay command that names them, and with planted bugs, the bugs and the
/// build that has them; the settings it names replay the same trace.
#[test]
fn the_replay_command_names_every_override() -> anyhow::Result<()> {
    let overridden = |seed| SimulationConfig {
        fault_phase_ms: 3_000,
        ..SimulationConfig::new(seed).with_job_count(2)
    };
    let report = run(&overridden(5))?;
    let replay = report.replay_command();
    assert!(replay.contains("--seed 5 --jobs 2 --fault-phase-ms 3000"), "{replay}");
    assert!(!replay.contains("--plant"), "{replay}");
    let again = run(&overridden(5))?;
    assert_eq!(again.trace_hash, report.trace_hash, "the named settings replay the run");
    let bugs =
        simulation::PlantedBugs { ack_before_durable: true, production: &["skip-epoch-check"] };
    let planted = simulation::replay_command(&SimulationConfig::new(5).with_bugs(bugs));
    assert!(planted.contains("--features planted-bugs"), "{planted}");
    assert!(planted.contains("--plant-ack-before-durable --plant skip-epoch-check"), "{planted}");
    Ok(())
}
