//! `raftrain bench`: benchmark programs. Each runs a fixed workload, measures a baseline in the
//! same run, and prints a table; none asserts a time.

mod consensus;
mod consensus_node;
mod etcd;
mod etcd_failover;
mod kv;
mod master;
mod master_dataset;
mod master_load;
mod master_snapshot;
mod page_cache;
mod process_logs;
mod pserver;
mod pserver_baseline;
mod pserver_checkpoint;
mod pserver_cluster;
mod raw_sync;
mod read_file;
mod recordio;
mod spread;
mod table;
mod trainer;

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
    /// Consensus group of 3 processes with fsync: writes/s and commit latency by client count.
    Consensus(consensus::ConsensusBenchArgs),
    /// One node of the consensus benchmark (started by `bench consensus`, not by hand).
    #[command(hide = true)]
    ConsensusNode(consensus_node::ConsensusNodeArgs),
    /// Master group: task transitions/s by dataset size and clients, snapshot cost, failover.
    Master(master::MasterBenchArgs),
    /// Pservers: push+pull GB/s by model size and pserver count against raw loopback TCP,
    /// checkpoint write/restore against raw write+fsync/read, kill -9 to replacement serving.
    Pserver(pserver::PServerBenchArgs),
    /// Reads one file as a restore or raw, in a fresh process (started by `bench pserver`, not
    /// by hand).
    #[command(hide = true)]
    ReadFile(read_file::ReadFileArgs),
    /// Trainers: examples/s of 1, 2 and 4 trainer processes against a single-process loop on
    /// the same model and data (softmax on 100 features, and the MLP).
    Trainer(trainer::TrainerBenchArgs),
}

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Recordio(args) => recordio::run(&args),
        BenchCommand::Consensus(args) => consensus::run(&args),
        BenchCommand::ConsensusNode(args) => consensus_node::run(&args),
        BenchCommand::Master(args) => master::run(&args),
        BenchCommand::Pserver(args) => pserver::run(&args),
        BenchCommand::ReadFile(args) => read_file::run(&args),
        BenchCommand::Trainer(args) => trainer::run(&args),
    }
}
