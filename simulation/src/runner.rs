//! Runs many seeds and reports the failing ones: what the `simulation` binary and the seed
//! sweep test share.

use std::time::Instant;

use crate::config::SimulationConfig;
use crate::simulation::{run, SimulationReport};

/// The result of a sweep.
#[derive(Debug, Default)]
pub struct SweepSummary {
    pub schedules: u64,
    /// Reports of the seeds that violated an invariant (or could not run).
    pub failures: Vec<SimulationReport>,
    /// Seeds the harness itself could not run, with why.
    pub harness_errors: Vec<(u64, String)>,
    pub wall_seconds: f64,
    /// How often each kind of fault and rare event happened, over all seeds.
    pub tallies: std::collections::BTreeMap<&'static str, u64>,
}

impl SweepSummary {
    /// Schedules per minute of wall-clock time.
    pub fn schedules_per_minute(&self) -> f64 {
        if self.wall_seconds <= 0.0 {
            return 0.0;
        }
        self.schedules as f64 * 60.0 / self.wall_seconds
    }
}

/// Runs seeds `start..start + count`, each seed's configuration passed through `configure`,
/// calling `on_failure` for each failing one as it is found.
pub fn sweep(
    start: u64,
    count: u64,
    configure: impl Fn(SimulationConfig) -> SimulationConfig,
    mut on_failure: impl FnMut(&SimulationReport),
) -> SweepSummary {
    let began = Instant::now();
    let mut summary = SweepSummary::default();
    for seed in start..start.saturating_add(count) {
        let config = configure(SimulationConfig::new(seed));
        let result = run(&config);
        if let Ok(report) = &result {
            for (kind, count) in &report.tallies {
                *summary.tallies.entry(kind).or_default() += count;
            }
        }
        match result {
            Ok(report) if report.violation.is_some() => {
                on_failure(&report);
                summary.failures.push(report);
            }
            Ok(_) => {}
            Err(error) => summary.harness_errors.push((seed, format!("{error:#}"))),
        }
        summary.schedules += 1;
    }
    summary.wall_seconds = began.elapsed().as_secs_f64();
    summary
}
