//! The leader's scan of a reported dataset: expand the patterns, index every file from its
//! chunk headers, and list the chunks in order. Runs before anything is proposed, so a missing
//! or corrupt file is refused with its name and offset and the replicated state is untouched.

use crate::state::{ChunkRef, ReportedFile};
use storage::recordio::{expand_patterns, FileIndex, RecordIoError};

/// The chunks of a dataset, in pattern order, then file order, then offset order.
#[derive(Debug, PartialEq)]
pub(crate) struct ScannedDataset {
    pub(crate) chunks: Vec<ChunkRef>,
    pub(crate) record_count: u64,
}

/// Scans synchronously; callers on the async runtime use `spawn_blocking`.
pub(crate) fn scan_dataset(patterns: &[String]) -> Result<ScannedDataset, RecordIoError> {
    let mut chunks = Vec::new();
    let mut record_count = 0;
    for path in expand_patterns(patterns)? {
        let index = FileIndex::build(&path)?;
        record_count += index.record_count();
        let path_text = path.display().to_string();
        chunks.extend(index.chunks().iter().map(|chunk| ChunkRef {
            path: path_text.clone(),
            offset: chunk.offset,
            compressed_size: chunk.compressed_size,
            record_count: chunk.record_count,
        }));
    }
    Ok(ScannedDataset { chunks, record_count })
}

/// The files `patterns` name, in scan order, with their sizes: what a repeated report is
/// compared on before any header is read. `None` if a pattern or a file cannot be read (the
/// full scan then reports why).
pub(crate) fn reported_files(patterns: &[String]) -> Option<Vec<ReportedFile>> {
    let paths = expand_patterns(patterns).ok()?;
    let file = |path: std::path::PathBuf| {
        let bytes = std::fs::metadata(&path).ok()?.len();
        Some(ReportedFile { path: path.display().to_string(), bytes })
    };
    paths.into_iter().map(file).collect()
}
