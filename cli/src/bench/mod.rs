//! `raftrain bench`: benchmark programs. Each runs a fixed workload, measures a baseline in the
//! same run, and prints a table; none asserts a time.

mod master;
mod master_dataset;
mod master_load;
mod master_snapshot;
mod process_group;
mod recordio;
mod table;

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// RecordIO write, scan and index throughput per compressor against raw sequential reads.
    Recordio(recordio::RecordioBenchArgs),
    /// Master group: task transitions/s by dataset size and clients, snapshot cost, failover.
    Master(master::MasterBenchArgs),
}

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Recordio(args) => recordio::run(&args),
        BenchCommand::Master(args) => master::run(&args),
    }
}
