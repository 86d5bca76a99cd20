//! `bench pserver`: push+pull throughput of real pserver processes (GB/s of f32 payload) by
//! model size and pserver count, repeated, next to raw loopback TCP moving the same bytes in the
//! same runs; checkpoint write and restore (warm and cold) next to a raw write+fsync and read;
//! and the time from kill -9 of a pserver to its replacement serving the restored shard.

use std::path::Path;

use anyhow::Context as _;
use clap::Args;

use super::process_logs::ProcessLogs;
use super::pserver_baseline::raw_tcp_gbps;
use super::pserver_checkpoint::checkpoint_table;
use super::pserver_cluster::{throughput, Cluster};
use super::spread::Spread;
use super::table::Table;

#[derive(Debug, Args)]
pub(crate) struct PServerBenchArgs {
    /// Model sizes in parameters (one tensor each).
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000,100000000")]
    params: Vec<u64>,
    /// Pserver counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pservers: Vec<u32>,
    /// Push+pull rounds per run (at least 1 s of work is done in any case).
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// Runs per throughput row, each against its own raw TCP baseline: the row prints their
    /// minimum, median and maximum.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    runs: u32,
    /// Checkpoint sizes in parameters (4 bytes each: 1000000000 writes and reads 4 GB, and
    /// holds the values and one read-back in memory, 8 GB).
    #[arg(long, value_delimiter = ',', default_value = "100000000")]
    checkpoint_params: Vec<u64>,
    /// Runs per checkpoint row (the row prints each measure's median; 0 skips the rows).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=100))]
    checkpoint_runs: u32,
    /// Kill -9 / replacement measurements each way, same address and new (0 skips them).
    #[arg(long, default_value_t = 3)]
    replacements: u32,
    /// The model size of the replacement measurements, in parameters (on 2 pservers; the
    /// benchmark holds the model about four times over in memory, the pservers once more).
    #[arg(long, default_value_t = 1_000_000)]
    replacement_params: u64,
    /// Where the master and pserver processes log, one subdirectory per cluster, kept after
    /// the run (default: a new directory under the system's temporary directory; either is
    /// named on standard error, which standard output's tables never mix with).
    #[arg(long)]
    log_dir: Option<std::path::PathBuf>,
}

/// The pservers' checkpoint interval in the throughput rows: their default, as a job runs them.
const THROUGHPUT_CHECKPOINT_INTERVAL_S: u64 = pserver::config::CHECKPOINT_INTERVAL_S_DEFAULT;
/// The pservers' checkpoint interval in the replacement rows: a checkpoint soon after each push.
const REPLACEMENT_CHECKPOINT_INTERVAL_S: u64 = 1;

pub(crate) fn run(args: &PServerBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.params.is_empty() && !args.pservers.is_empty(),
        "--params and --pservers need values"
    );
    let root = tempfile::tempdir().context("create a temporary directory")?;
    let mut logs = ProcessLogs::create("pserver", args.log_dir.as_deref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(bench(args, root.path(), &mut logs))
}

async fn bench(args: &PServerBenchArgs, root: &Path, logs: &mut ProcessLogs) -> anyhow::Result<()> {
    println!("{}", throughput_table(args, root, logs).await?.render());
    if args.checkpoint_runs > 0 && !args.checkpoint_params.is_empty() {
        let table = checkpoint_table(root, &args.checkpoint_params, args.checkpoint_runs)?;
        println!("{}", table.render());
    }
    if args.replacements > 0 {
        let log_dir = logs.cluster("replacements")?;
        let cluster = Cluster::start(root, 2, &log_dir, REPLACEMENT_CHECKPOINT_INTERVAL_S).await?;
        let table = cluster.replacements(args.replacements, args.replacement_params).await?;
        println!("{}", table.render());
    }
    Ok(())
}

/// Per size and pserver count, `runs` runs of push+pull rounds, each next to a raw TCP run.
async fn throughput_table(
    args: &PServerBenchArgs,
    root: &Path,
    logs: &mut ProcessLogs,
) -> anyhow::Result<Table> {
    let mut table = Table::new(&[
        "params",
        "pservers",
        "runs",
        "push+pull GB/s min / median / max",
        "raw TCP GB/s median",
        "vs raw TCP min / median / max",
    ]);
    for &params in &args.params {
        for &count in &args.pservers {
            let label = format!("params-{params}-pservers-{count}");
            let log_dir = logs.cluster(&label)?;
            let cluster =
                Cluster::start(root, count, &log_dir, THROUGHPUT_CHECKPOINT_INTERVAL_S).await?;
            let (client, layout) = cluster.model(params).await?;
            let (mut ours, mut raw, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..args.runs {
                let raw_gbps = raw_tcp_gbps(params as usize * 4)?;
                let gbps = throughput(&client, &layout, args.rounds).await?;
                ours.push(gbps);
                raw.push(raw_gbps);
                ratios.push(100.0 * gbps / raw_gbps);
            }
            table.row(vec![
                params.to_string(),
                count.to_string(),
                args.runs.to_string(),
                Spread::of(&ours).render(2),
                format!("{:.2}", Spread::of(&raw).median),
                format!("{}%", Spread::of(&ratios).render(0).replace(" / ", "% / ")),
            ]);
        }
    }
    Ok(table)
}
