//! The simulation runner: `cargo run -p simulation --release -- --seeds 10000 [--start-seed S]
//! [--forever]` runs schedules and prints each failing seed as `--seed N`; `--seed N` replays
//! one schedule and prints its trace tail and what each job did; `--jobs 1|2` overrides how
//! many jobs the seeds draw; `--operator` and `--rendezvous` add clients no seed runs
//! otherwise, `--membership` membership changes. `--plant BUG` needs `--features planted-bugs`.

use clap::Parser;
use simulation::{run, PlantedBugs, SimulationConfig};

/// Deterministic simulation of the raftrain master group.
#[derive(Parser, Debug)]
struct Args {
    /// Replay one seed and print its outcome and the end of its trace.
    #[arg(long)]
    seed: Option<u64>,
    /// How many seeds to run.
    #[arg(long, default_value_t = 1000)]
    seeds: u64,
    /// The first seed to run.
    #[arg(long, default_value_t = 0)]
    start_seed: u64,
    /// Keep running batches of `--seeds` seeds until interrupted.
    #[arg(long)]
    forever: bool,
    /// Plant the bug that acknowledges appends before they are durable (to see it caught).
    #[arg(long)]
    plant_ack_before_durable: bool,
    /// Plant a bug of the production code by name (to see it caught); repeatable. One of
    /// `jammed-batcher`, `skip-epoch-check`, `answer-before-commit`, `deposed-heartbeats`,
    /// `leases-across-terms`, `restore-revives-ended`, `claim-another-incarnation`,
    /// `push-across-restore`, `rendezvous-stale-version`, `membership-ack-before-commit`. Only
    /// in a build with `--features
    /// planted-bugs`.
    #[arg(long = "plant", value_name = "BUG", value_parser = clap::builder::PossibleValuesParser::new(simulation::config::PRODUCTION_BUGS))]
    plant: Vec<String>,
    /// With --seed: trace every applied command and its answer.
    #[arg(long)]
    verbose: bool,
    /// With --seed: how many of the trace's last lines to print.
    #[arg(long, default_value_t = simulation::trace::TAIL_LINES_DEFAULT)]
    trace_lines: usize,
    /// How long faults are injected in each schedule (simulated milliseconds).
    /// (Default: drawn per seed.)
    #[arg(long)]
    fault_phase_ms: Option<u64>,
    /// How many jobs each schedule runs at once, 1 or 2 (to replay a seed with one job, as
    /// seeds found before runs had two did). (Default: drawn per seed.)
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=2))]
    jobs: Option<u8>,
    /// Make the leader's disk fail one flush (an I/O error) this far into the fault phase
    /// (simulated milliseconds; the first moment there is a leader from then on).
    #[arg(long, value_name = "MS")]
    flush_failure_at_ms: Option<u64>,
    /// Stall the leader's disk (every flush waits) this far into the fault phase, for
    /// --leader-disk-stall-ms, with no other fault (simulated milliseconds; the first moment
    /// there is a leader from then on).
    #[arg(long, value_name = "MS", requires = "leader_disk_stall_ms")]
    leader_disk_stall_at_ms: Option<u64>,
    /// How long the leader's disk stalls (see --leader-disk-stall-at-ms).
    #[arg(long, value_name = "MS", requires = "leader_disk_stall_at_ms")]
    leader_disk_stall_ms: Option<u64>,
    /// An operator checkpoints, cancels and then tries to restore each schedule's last job
    /// (a cancelled job must never run again).
    #[arg(long)]
    operator: bool,
    /// Rendezvous agents race on one run's keys through the fault phase (sets, adds, and
    /// compares by a version they read, some stale), judged by the rendezvous-keys checker.
    #[arg(long)]
    rendezvous: bool,
    /// The membership nemesis changes the group through the fault phase: removes a voter
    /// (the leader too) and adds it back on a wiped disk, grows the group to 4 or 5 and
    /// shrinks it back, removes a dead member.
    #[arg(long)]
    membership: bool,
    /// Trainers report each finished task with their next ask, in one write.
    #[arg(long)]
    hand_offs: bool,
}

impl Args {
    /// `config` with the flags that override what a seed draws.
    fn configure(&self, config: SimulationConfig) -> SimulationConfig {
        let config = match self.jobs {
            Some(count) => config.with_job_count(usize::from(count)),
            None => config,
        };
        let config = match (self.leader_disk_stall_at_ms, self.leader_disk_stall_ms) {
            (Some(at_ms), Some(for_ms)) => config.with_leader_disk_stall(at_ms, for_ms),
            _ => config,
        };
        let config = if self.operator { config.with_operator() } else { config };
        let config = if self.rendezvous { config.with_rendezvous() } else { config };
        let config = if self.membership { config.with_membership() } else { config };
        let config = if self.hand_offs { config.with_hand_offs() } else { config };
        SimulationConfig {
            fault_phase_ms: self.fault_phase_ms.unwrap_or(config.fault_phase_ms),
            flush_failure_at_ms: self.flush_failure_at_ms.or(config.flush_failure_at_ms),
            ..config
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // RUST_LOG=warn (or finer) shows what the production code logs during a replayed seed.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let bugs = PlantedBugs {
        ack_before_durable: args.plant_ack_before_durable,
        // The run's bugs live as long as the process.
        production: Vec::leak(args.plant.iter().map(|bug| &*String::leak(bug.clone())).collect()),
    };
    simulation::planted::check_available(bugs.production)?;
    match args.seed {
        Some(seed) => replay(&args, seed, bugs),
        None => sweep(&args, bugs),
    }
}

/// Runs one seed, printing its trace tail, the tasks each job saw and its verdict.
fn replay(args: &Args, seed: u64, bugs: PlantedBugs) -> anyhow::Result<()> {
    let config = SimulationConfig {
        verbose: args.verbose,
        trace_lines: args.trace_lines,
        ..args.configure(SimulationConfig::new(seed))
    };
    let report = run(&config.with_bugs(bugs))?;
    report.trace_tail.iter().for_each(|line| println!("{line}"));
    for (job, seen) in &report.tasks_seen {
        println!(
            "seed {seed}: job {job}: {} tasks dispatched, {} finished",
            seen.dispatched, seen.finished
        );
    }
    println!(
        "seed {seed}: trace hash {:016x}, {} events, {} simulated ms",
        report.trace_hash, report.event_count, report.simulated_ms
    );
    match report.violation {
        None => println!("seed {seed}: ok"),
        Some(violation) => anyhow::bail!("--seed {seed}: {violation}"),
    }
    Ok(())
}

/// Runs `--seeds` seeds from `--start-seed` (again and again with `--forever`), printing each
/// violation with its replay command and a summary per sweep.
fn sweep(args: &Args, bugs: PlantedBugs) -> anyhow::Result<()> {
    let mut start = args.start_seed;
    loop {
        let configure = |config: SimulationConfig| args.configure(config).with_bugs(bugs);
        let summary = simulation::runner::sweep(start, args.seeds, configure, |report| {
            if let Some(violation) = &report.violation {
                println!(
                    "--seed {}: {violation} (replay: {})",
                    report.seed,
                    report.replay_command()
                );
            }
        });
        for (seed, error) in &summary.harness_errors {
            println!("--seed {seed}: harness error: {error}");
        }
        let tallies: Vec<String> =
            summary.tallies.iter().map(|(kind, count)| format!("{kind} {count}")).collect();
        println!("faults and rare events: {}", tallies.join(", "));
        println!(
            "seeds {start}..{}: {} schedules, {} failed, {} harness errors, {:.0} schedules/minute",
            start + args.seeds,
            summary.schedules,
            summary.failures.len(),
            summary.harness_errors.len(),
            summary.schedules_per_minute()
        );
        if !args.forever {
            anyhow::ensure!(
                summary.failures.is_empty() && summary.harness_errors.is_empty(),
                "some seeds failed"
            );
            return Ok(());
        }
        start += args.seeds;
    }
}
