//! `raftrain bench`: benchmark programs. Each runs a fixed workload, measures a baseline in the
//! same run, and prints a table; none asserts a time.

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
}

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Recordio(args) => recordio::run(&args),
    }
}
