//! `raftrain recordio`: Unix-style tools over RecordIO files. Each subcommand lives in its own
//! file; this one only routes.

mod cat;
mod class_names;
mod convert;
mod csv_input;
mod example_format;
mod hex;
mod index;
mod output_file;
mod stat;
mod synth;
mod write;

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub(crate) struct RecordioArgs {
    #[command(subcommand)]
    command: RecordioCommand,
}

#[derive(Debug, Subcommand)]
enum RecordioCommand {
    /// Write records read from standard input, one per line, into a new RecordIO file.
    Write(write::WriteArgs),
    /// Print the records of one or more files (paths or globs), one per line.
    Cat(cat::CatArgs),
    /// Print the chunk table of each file: offset, compressed size, record count, compressor.
    Index(index::IndexArgs),
    /// Convert CSV or LibSVM text into RecordIO of `raftrain.example.v1.Example` records.
    Convert(convert::ConvertArgs),
    /// Print record, chunk and byte counts of one or more files.
    Stat(stat::StatArgs),
    /// Write a synthetic dataset with a known answer (Gaussian blobs or linear regression):
    /// `train.recordio`, `eval.recordio` and `truth.json`, deterministic by seed.
    Synth(synth::SynthArgs),
}

pub(crate) fn run(args: RecordioArgs) -> anyhow::Result<()> {
    match args.command {
        RecordioCommand::Write(args) => write::run(&args),
        RecordioCommand::Cat(args) => cat::run(&args),
        RecordioCommand::Index(args) => index::run(&args),
        RecordioCommand::Convert(args) => convert::run(&args),
        RecordioCommand::Stat(args) => stat::run(&args),
        RecordioCommand::Synth(args) => synth::run(&args),
    }
}
