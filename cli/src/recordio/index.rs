//! `recordio index`: the chunk table of each file, built from chunk headers alone.

use clap::Args;
use std::path::Path;
use storage::recordio::{expand_patterns, FileIndex};

#[derive(Debug, Args)]
pub(crate) struct IndexArgs {
    /// Files or glob patterns.
    #[arg(required = true)]
    files: Vec<String>,
}

pub(crate) fn run(args: &IndexArgs) -> anyhow::Result<()> {
    println!(
        "{:<40} {:>6} {:>14} {:>14} {:>10} {:>10}",
        "file", "chunk", "offset", "bytes", "records", "compressor"
    );
    for path in expand_patterns(&args.files)? {
        print_table(&path, &FileIndex::build(&path)?);
    }
    Ok(())
}

fn print_table(path: &Path, index: &FileIndex) {
    for (chunk_index, chunk) in index.chunks().iter().enumerate() {
        println!(
            "{:<40} {:>6} {:>14} {:>14} {:>10} {:>10}",
            path.display(),
            chunk_index,
            chunk.offset,
            chunk.compressed_size,
            chunk.record_count,
            chunk.compressor
        );
    }
}
