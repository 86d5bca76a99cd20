//! `cargo run -p jepsen-tests --release -- --time 600 --nemesis all --seed S`: one harness
//! run against the `raftrain` binary; prints the summary, writes the report, and exits 1 on
//! any violation (the seed to replay it is in the summary).

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use jepsen_tests::checker::CheckOptions;
use jepsen_tests::nemesis::{Fault, Schedule};
use jepsen_tests::run::{run, RunOptions, Workload};

#[derive(Debug, Parser)]
#[command(about = "Run raftrain under faults and check that nothing is lost")]
struct Args {
    /// Seconds of faults (the run adds a start, a quiet window and the final reads).
    #[arg(long, default_value_t = 120)]
    time: u64,
    /// Faults to draw from: `all`, `smoke` (the fixed smoke schedule), or a comma-separated
    /// list of kill-leader, kill-follower, kill-all, pause-leader, pause-follower,
    /// isolate-leader, split-one-two, bridge, clog, kill-pserver, pause-pserver,
    /// restart-leader, restart-follower, rolling-restart, majority-outage (60 s), half-open,
    /// membership (a voter removed, wiped and rejoined with --join) (and, with --workload
    /// training, kill-trainer, pause-trainer, break-trainer-data: root and unshare only).
    #[arg(long, default_value = "all")]
    nemesis: String,
    /// The schedule's seed; the same seed replays the same faults at the same times.
    #[arg(long)]
    seed: Option<u64>,
    /// What runs under the faults: task-queue clients; a whole training job (which adds
    /// kill-trainer, pause-trainer and break-trainer-data to `all`, and ends when the job
    /// does); or `rendezvous`: the task-queue clients and three clients racing on a torchrun
    /// rendezvous run's keys.
    #[arg(long, value_enum, default_value = "task-queue")]
    workload: Workload,
    /// Concurrent task-queue clients.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// With --workload training: jobs trained at once on the one master group, each with its
    /// own data, pservers and trainers, each checked against one process on its data.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4))]
    jobs: u64,
    /// Where the processes' data, logs and the report go (default: a new directory, kept).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Test the debug build instead of the release build (ignored with RAFTRAIN_BIN).
    #[arg(long)]
    debug: bool,
    /// Give each master its own network namespace and cut links with routes and `tc netem`
    /// instead of the TCP proxies (needs root and iproute2).
    #[arg(long)]
    netns: bool,
    /// Masters snapshot every N entries (their --snapshot-logs-since-last; default theirs), so
    /// a master left behind by a pause or partition catches up by snapshot install.
    #[arg(long, value_name = "N")]
    snapshot_every: Option<u64>,
    /// Start nothing: check the history an earlier run kept in DIR (its history.json and
    /// report.json) again, and print the summary.
    #[arg(long, value_name = "DIR")]
    check: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Some(dir) = &args.check {
        return check_again(dir);
    }
    let seed = args.seed.unwrap_or_else(rand::random);
    let schedule = match args.nemesis.as_str() {
        "smoke" => Schedule::smoke(seed),
        kinds => Schedule::generate(seed, &parse_faults(kinds, args.workload)?, args.time * 1000),
    };
    let dir = match args.out {
        Some(dir) => dir,
        None => tempfile::Builder::new().prefix("raftrain-jepsen-").tempdir()?.keep(),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    eprintln!("jepsen: seed {seed}, {} faults, directory {}", schedule.steps.len(), dir.display());
    let binary = jepsen_tests::binary::raftrain_binary(!args.debug)?;
    let options = RunOptions {
        binary,
        dir: dir.clone(),
        schedule,
        workload: args.workload,
        netns: args.netns,
        snapshot_every: args.snapshot_every,
        jobs: usize::try_from(args.jobs).unwrap_or(1),
        clients: args.clients,
        check: CheckOptions::default(),
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let report = runtime.block_on(run(&options))?;
    print!("{}", report.summary());
    println!(
        "report: {}/report.json, chart: {}/latency.svg, logs: {}/logs",
        dir.display(),
        dir.display(),
        dir.display()
    );
    if !report.valid() {
        std::process::exit(1);
    }
    Ok(())
}

/// The faults `text` names (or `all` of the workload's), less those this machine cannot
/// inject: each of those is named once on standard output and scheduled never.
fn parse_faults(text: &str, workload: Workload) -> anyhow::Result<Vec<Fault>> {
    let named: Vec<Fault> = if text == "all" {
        let trainers: &[Fault] = if workload == Workload::Training { &Fault::TRAINER } else { &[] };
        Fault::ALL.iter().chain(trainers).copied().collect()
    } else {
        text.split(',')
            .map(|name| {
                Fault::ALL
                    .iter()
                    .chain(&Fault::TRAINER)
                    .copied()
                    .find(|fault| fault.name() == name.trim())
                    .with_context(|| format!("--nemesis: unknown fault {name:?}"))
            })
            .collect::<anyhow::Result<_>>()?
    };
    let mut skipped = Vec::new();
    let mut faults = Vec::new();
    for fault in named {
        match fault.unavailable() {
            Some(reason) if !skipped.contains(&fault) => {
                println!("skipped {}: {reason}", fault.name());
                skipped.push(fault);
            }
            Some(_) => {}
            None => faults.push(fault),
        }
    }
    Ok(faults)
}

/// Checks a kept run's history again (after a checker changed, or to read it once more).
fn check_again(dir: &std::path::Path) -> anyhow::Result<()> {
    let read = |name: &str| -> anyhow::Result<Vec<u8>> {
        let path = dir.join(name);
        std::fs::read(&path).with_context(|| format!("read {}", path.display()))
    };
    let ops: Vec<jepsen_tests::history::Op> =
        serde_json::from_slice(&read("history.json")?).context("history.json")?;
    let earlier: jepsen_tests::report::Report =
        serde_json::from_slice(&read("report.json")?).context("report.json")?;
    let mut report =
        jepsen_tests::checker::check_all(&ops, &earlier.schedule, &CheckOptions::default());
    for training in earlier.training {
        report = report.with_training(training);
    }
    print!("{}", report.summary());
    if !report.valid() {
        std::process::exit(1);
    }
    Ok(())
}
