//! `recordio stat`: per-file and total counts of chunks, records and bytes, from the index.

use clap::Args;
use storage::recordio::{expand_patterns, FileIndex};

#[derive(Debug, Args)]
pub(crate) struct StatArgs {
    /// Files or glob patterns.
    #[arg(required = true)]
    files: Vec<String>,
}

#[derive(Default)]
struct Totals {
    files: u64,
    chunks: u64,
    records: u64,
    payload_bytes: u64,
    file_bytes: u64,
}

pub(crate) fn run(args: &StatArgs) -> anyhow::Result<()> {
    let mut totals = Totals::default();
    println!(
        "{:<40} {:>8} {:>12} {:>14} {:>14}",
        "file", "chunks", "records", "payload bytes", "file bytes"
    );
    for path in expand_patterns(&args.files)? {
        let index = FileIndex::build(&path)?;
        let chunks = index.chunks().len() as u64;
        println!(
            "{:<40} {:>8} {:>12} {:>14} {:>14}",
            path.display(),
            chunks,
            index.record_count(),
            index.compressed_bytes(),
            index.file_bytes()
        );
        totals.files += 1;
        totals.chunks += chunks;
        totals.records += index.record_count();
        totals.payload_bytes += index.compressed_bytes();
        totals.file_bytes += index.file_bytes();
    }
    println!(
        "{:<40} {:>8} {:>12} {:>14} {:>14}",
        format!("total ({} files)", totals.files),
        totals.chunks,
        totals.records,
        totals.payload_bytes,
        totals.file_bytes
    );
    Ok(())
}
