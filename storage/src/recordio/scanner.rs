//! Reads every record of several RecordIO files (paths or globs) in order, one chunk at a
//! time: what `raftrain recordio cat` and the tests use to read a whole dataset.

use super::{ChunkScanner, RecordIoError};

/// All records of the files matched by some patterns, file after file (see
/// [`super::expand_patterns`] for the order), each as an owned vector. After the first error
/// the iterator ends. [`ChunkScanner`] reads the same records without copying them.
#[derive(Debug)]
pub struct Scanner {
    chunks: ChunkScanner,
    /// The next record to yield from the current chunk.
    next_record: usize,
}

impl Scanner {
    /// Expands `patterns` now (so a pattern that matches nothing fails here); files are opened
    /// and indexed one at a time as the iteration reaches them.
    pub fn open(patterns: &[String]) -> Result<Self, RecordIoError> {
        Ok(Scanner { chunks: ChunkScanner::open(patterns)?, next_record: 0 })
    }
}

impl Iterator for Scanner {
    type Item = Result<Vec<u8>, RecordIoError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(record) = self.chunks.current().record(self.next_record) {
                self.next_record += 1;
                return Some(Ok(record.to_vec()));
            }
            match self.chunks.next_chunk()? {
                Ok(_) => self.next_record = 0,
                Err(error) => return Some(Err(error)),
            }
        }
    }
}
