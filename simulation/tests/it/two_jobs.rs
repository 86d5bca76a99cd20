//! Two named jobs at once on one group: their task ids, trainer ids and slot generations
//! overlap, every client names its job, and the checkers keep each job's memory apart.

use simulation::checker::TasksSeen;
use simulation::{run, SimulationConfig};

/// Seeds run with two jobs keep every invariant and finish both jobs, and each job's checkers
/// saw its own tasks: every task of each job dispatched and accepted as finished, as many as
/// that job has (the second job's count is never the first's, so one job's entries counted
/// as the other's would show).
#[test]
fn two_jobs_run_clean_and_each_sees_its_own_tasks() -> anyhow::Result<()> {
    for seed in [3, 5, 22] {
        let config = SimulationConfig::new(seed).with_job_count(2);
        let report = run(&config)?;
        assert_eq!(report.violation, None, "--seed {seed} --jobs 2");
        assert_eq!(report.tallies.get("two-job run"), Some(&1), "--seed {seed}");
        let expected = config.jobs.iter().map(|job| {
            let all = job.task_count;
            (job.name.clone(), TasksSeen { dispatched: all, finished: all })
        });
        assert_eq!(report.tasks_seen, expected.collect(), "--seed {seed} --jobs 2");
    }
    Ok(())
}
