//! `recordio cat`: prints every record of the given files (paths or globs, in order), one per
//! line: raw bytes, lowercase hex, or a decoded `Example` as a JSON object.

use super::{example_format, hex};
use anyhow::Context as _;
use clap::Args;
use std::io::{BufWriter, Write};
use storage::recordio::Scanner;

#[derive(Debug, Args)]
pub(crate) struct CatArgs {
    /// Files or glob patterns, read in the order given (each glob in sorted order).
    #[arg(required = true)]
    files: Vec<String>,
    /// Print each record as lowercase hex (the input format of `recordio write`).
    #[arg(long, conflicts_with = "example")]
    hex: bool,
    /// Decode each record as a `raftrain.example.v1.Example` and print it as JSON.
    #[arg(long)]
    example: bool,
}

pub(crate) fn run(args: &CatArgs) -> anyhow::Result<()> {
    let scanner = Scanner::open(&args.files)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    for (record_index, record) in scanner.enumerate() {
        let record = record?;
        let written = if args.hex {
            writeln!(out, "{}", hex::encode(&record))
        } else if args.example {
            let line = example_format::to_json_line(&record)
                .with_context(|| format!("record {record_index}"))?;
            writeln!(out, "{line}")
        } else {
            out.write_all(&record).and_then(|()| out.write_all(b"\n"))
        };
        if let Err(error) = written {
            // A closed pipe (`raftrain recordio cat f | head`) is a normal way to stop.
            if error.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(());
            }
            return Err(error).context("write to standard output");
        }
    }
    out.flush().or_else(ignore_broken_pipe).context("write to standard output")
}

fn ignore_broken_pipe(error: std::io::Error) -> std::io::Result<()> {
    match error.kind() {
        std::io::ErrorKind::BrokenPipe => Ok(()),
        _ => Err(error),
    }
}
