//! Reads every record of several RecordIO files (paths or globs) in order, one chunk at a
//! time: what `raftrain recordio cat` and the tests use to read a whole dataset.

use std::path::PathBuf;

use super::{expand_patterns, RangeScanner, RecordIoError};

/// All records of the files matched by some patterns, file after file (see
/// [`expand_patterns`] for the order). After the first error the iterator ends.
#[derive(Debug)]
pub struct Scanner {
    /// Files not yet opened, in reverse order so the next one pops off the end.
    pending: Vec<PathBuf>,
    current: Option<RangeScanner>,
}

impl Scanner {
    /// Expands `patterns` now (so a pattern that matches nothing fails here); files are opened
    /// and indexed one at a time as the iteration reaches them.
    pub fn open(patterns: &[String]) -> Result<Self, RecordIoError> {
        let mut pending = expand_patterns(patterns)?;
        pending.reverse();
        Ok(Scanner { pending, current: None })
    }
}

impl Iterator for Scanner {
    type Item = Result<Vec<u8>, RecordIoError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(current) = &mut self.current {
                match current.next() {
                    Some(Ok(record)) => return Some(Ok(record)),
                    Some(Err(error)) => {
                        self.pending.clear();
                        self.current = None;
                        return Some(Err(error));
                    }
                    None => self.current = None,
                }
            }
            let path = self.pending.pop()?;
            match RangeScanner::whole_file(&path) {
                Ok(scanner) => self.current = Some(scanner),
                Err(error) => {
                    self.pending.clear();
                    return Some(Err(error));
                }
            }
        }
    }
}
