//! A run's jobs, drawn from the seed: one, or for some seeds two running at once on the group,
//! each with its own name, dataset, task count, passes, trainers and pservers. The same task
//! ids, trainer ids and slot generations then occur in both jobs, which is what the checkers'
//! per-job state must keep apart.

use std::ops::Range;

use crate::dataset::{SimDataset, SIMULATED_JOB};
use crate::rng::SimRng;

/// The name of a two-job run's second job.
pub const SECOND_JOB: &str = "simulated-2";
/// Seeds that run two jobs instead of one.
pub const TWO_JOBS_PERCENT: u64 = 40;
/// The run's trainers and pservers, shared out between its jobs.
const TRAINER_COUNT: u64 = 3;
const PSERVER_COUNT: u64 = 3;
/// A two-job run has one trainer more, two per job: a job of one trainer never has two
/// trainers race for a task (a late report of a task handed to another), which the fencing
/// checkers are there to judge.
const TWO_JOB_TRAINER_COUNT: u64 = 4;
/// The first job's size, as every run had before runs had two jobs.
const TASK_COUNT: u64 = 20;
const PASSES: u32 = 2;
/// The second job's task count and passes are drawn in these ranges (end excluded). Its task
/// count is below the first's, so that an answer of one job given to the other shows; its
/// size is kept small enough for its trainers to finish within the liveness bound after the
/// heal (a single trainer did not always finish 32 tasks in 3 passes in 30 s).
const SECOND_TASK_COUNT: (u64, u64) = (5, 17);
const SECOND_PASSES: (u64, u64) = (1, 3);
const _: () = assert!(SECOND_TASK_COUNT.1 <= TASK_COUNT, "the second job is the smaller");
/// The seed streams that draw the job count and the second job: streams no component draws
/// from (1 to 6 are the cluster's, the network's, the nemesis's, the tempo's, the graceful
/// stops' and the first dataset's; 10 and above the trainers', pservers' and nodes').
const JOBS_STREAM: u64 = 7;
const SECOND_DATASET_STREAM: u64 = 8;

/// One job of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimJob {
    pub name: String,
    /// What it trains on.
    pub dataset: SimDataset,
    /// One chunk per task, or one shard per task.
    pub task_count: u64,
    pub passes: u32,
    /// Its trainers and pservers, as numbers among the run's (each number picks the
    /// component's random streams, so a one-job run draws as runs did before).
    pub trainers: Range<u64>,
    pub pservers: Range<u64>,
    /// The slots its pservers compete for: one fewer than its pservers (a standby), at least
    /// one.
    pub pserver_slots: u32,
    /// The seed its tasks are shuffled with (`None`: handed out by id). Derived from the run's
    /// seed without a draw, so the random streams stay as they were: the first job is shuffled
    /// in runs of odd seeds, the second in runs of even seeds.
    pub shuffle_seed: Option<u64>,
}

/// The shuffle seed of job number `index` of `seed`'s run, if that job is shuffled.
fn shuffle_seed(seed: u64, index: u64) -> Option<u64> {
    (seed % 2 != index).then(|| client::shuffle::mix(seed ^ 0x5ff1_e000 ^ index))
}

impl SimJob {
    /// How many jobs `seed`'s run has.
    pub fn drawn_count(seed: u64) -> usize {
        match SimRng::derive(seed, JOBS_STREAM).percent(TWO_JOBS_PERCENT) {
            true => 2,
            false => 1,
        }
    }

    /// The `count` (one or two) jobs of `seed`'s run: the first as every run had it, the
    /// second drawn; the trainers and pservers shared out, the first job taking the larger
    /// part.
    pub fn draw_all(seed: u64, count: usize) -> Vec<SimJob> {
        assert!((1..=2).contains(&count), "a run has one or two jobs, not {count}");
        let count = count as u64;
        let trainer_count = if count == 2 { TWO_JOB_TRAINER_COUNT } else { TRAINER_COUNT };
        let mut jobs = vec![SimJob {
            name: SIMULATED_JOB.to_string(),
            dataset: SimDataset::draw(seed, TASK_COUNT),
            task_count: TASK_COUNT,
            passes: PASSES,
            trainers: share(trainer_count, count, 0),
            pservers: share(PSERVER_COUNT, count, 0),
            pserver_slots: 0,
            shuffle_seed: shuffle_seed(seed, 0),
        }];
        if count == 2 {
            let mut rng = SimRng::derive(seed, JOBS_STREAM);
            // The first draw decided the count.
            rng.next_u64();
            let task_count = rng.range(SECOND_TASK_COUNT.0, SECOND_TASK_COUNT.1);
            let passes = rng.range(SECOND_PASSES.0, SECOND_PASSES.1) as u32;
            let mut dataset_rng = SimRng::derive(seed, SECOND_DATASET_STREAM);
            jobs.push(SimJob {
                name: SECOND_JOB.to_string(),
                dataset: SimDataset::draw_from(&mut dataset_rng, task_count),
                task_count,
                passes,
                trainers: share(trainer_count, count, 1),
                pservers: share(PSERVER_COUNT, count, 1),
                pserver_slots: 0,
                shuffle_seed: shuffle_seed(seed, 1),
            });
        }
        for job in &mut jobs {
            let pservers = job.pservers.end - job.pservers.start;
            job.pserver_slots =
                u32::try_from(pservers.saturating_sub(1).max(1)).expect("a handful of pservers");
        }
        jobs
    }
}

/// Part `part` of `total` components shared out among `parts` jobs, as numbers: consecutive,
/// the earlier parts one larger when they do not divide evenly.
fn share(total: u64, parts: u64, part: u64) -> Range<u64> {
    let (size, larger) = (total / parts, total % parts);
    let start = part * size + part.min(larger);
    start..start + size + u64::from(part < larger)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-job run is the run of before (3 trainers and 3 pservers, two slots, 20 tasks in
    /// 2 passes); some seeds draw two jobs, which share 4 trainers and the pservers without
    /// overlap, each with two trainers and a standby pserver or one slot, the second of
    /// another size.
    #[test]
    fn seeds_draw_one_or_two_jobs_that_share_the_run() {
        let one = SimJob::draw_all(5, 1);
        assert_eq!(one.len(), 1);
        assert_eq!((one[0].trainers.clone(), one[0].pservers.clone()), (0..3, 0..3));
        assert_eq!((one[0].pserver_slots, one[0].task_count, one[0].passes), (2, 20, 2));
        let counts: Vec<usize> = (0..100).map(SimJob::drawn_count).collect();
        let two = counts.iter().filter(|count| **count == 2).count();
        assert!((20..60).contains(&two), "{two} of 100 seeds run two jobs");
        for seed in 0..100 {
            let jobs = SimJob::draw_all(seed, 2);
            assert_eq!((jobs[0].trainers.clone(), jobs[1].trainers.clone()), (0..2, 2..4));
            assert_eq!((jobs[0].pservers.clone(), jobs[1].pservers.clone()), (0..2, 2..3));
            assert_eq!((jobs[0].pserver_slots, jobs[1].pserver_slots), (1, 1));
            assert_ne!(jobs[0].name, jobs[1].name);
            let second = &jobs[1];
            assert!((5..17).contains(&second.task_count) && (1..3).contains(&second.passes));
            assert_ne!(second.task_count, jobs[0].task_count, "--seed {seed}");
            assert_eq!(jobs[0].dataset, SimJob::draw_all(seed, 1)[0].dataset, "--seed {seed}");
        }
    }

    /// Shares cover the whole, in order, without overlap.
    #[test]
    fn shares_cover_the_whole() {
        for (total, parts) in [(3, 1), (3, 2), (5, 2), (4, 3)] {
            let shares: Vec<Range<u64>> =
                (0..parts).map(|part| share(total, parts, part)).collect();
            assert_eq!(shares.first().map(|range| range.start), Some(0));
            assert_eq!(shares.last().map(|range| range.end), Some(total));
            assert!(shares.windows(2).all(|pair| pair[0].end == pair[1].start), "{shares:?}");
        }
    }
}
