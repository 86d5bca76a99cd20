//! `recordio cat`: prints every record of the given files (paths or globs, in order), one per
//! line: raw bytes, lowercase hex, or a decoded `Example` as a JSON object.

use super::{example_format, hex};
use anyhow::Context as _;
use clap::Args;
use std::io::{BufWriter, Write};
use storage::recordio::ChunkScanner;

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
    let mut chunks = ChunkScanner::open(&args.files)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut record_index = 0u64;
    while let Some(chunk) = chunks.next_chunk() {
        for record in chunk?.records() {
            if let Err(error) = print_record(args, &mut out, record, record_index)? {
                // A closed pipe (`raftrain recordio cat f | head`) is a normal way to stop.
                if error.kind() == std::io::ErrorKind::BrokenPipe {
                    return Ok(());
                }
                return Err(error).context("write to standard output");
            }
            record_index += 1;
        }
    }
    out.flush().or_else(ignore_broken_pipe).context("write to standard output")
}

/// Prints one record; the outer error is a record that cannot be shown, the inner one a
/// failed write.
fn print_record(
    args: &CatArgs,
    out: &mut impl Write,
    record: &[u8],
    record_index: u64,
) -> anyhow::Result<std::io::Result<()>> {
    if args.hex {
        return Ok(writeln!(out, "{}", hex::encode(record)));
    }
    if args.example {
        let line = example_format::to_json_line(record)
            .with_context(|| format!("record {record_index}"))?;
        return Ok(writeln!(out, "{line}"));
    }
    Ok(out.write_all(record).and_then(|()| out.write_all(b"\n")))
}

fn ignore_broken_pipe(error: std::io::Error) -> std::io::Result<()> {
    match error.kind() {
        std::io::ErrorKind::BrokenPipe => Ok(()),
        _ => Err(error),
    }
}
