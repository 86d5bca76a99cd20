//! Reads a range of records from one RecordIO file, one chunk at a time: what a trainer uses
//! to read the records of a task.

use std::fs::File;
use std::path::Path;

use super::{read_chunk, ErrorKind, FileIndex, RecordIoError};

/// The records `[start, start + count)` of one file, in order.
///
/// Opening indexes the file (headers only); iteration then seeks straight to the first chunk
/// of the range and holds at most one decoded chunk in memory. After the first error the
/// iterator ends.
#[derive(Debug)]
pub struct RangeScanner {
    file: File,
    index: FileIndex,
    /// The next chunk to read.
    next_chunk: usize,
    /// Records of the first chunk that precede the range and must be skipped.
    skip: u32,
    /// Records still to yield.
    remaining: u64,
    /// The rest of the chunk being yielded.
    records: std::vec::IntoIter<Vec<u8>>,
}

impl RangeScanner {
    /// Opens `path` to read `count` records starting at record number `start`; a range reaching
    /// past the last record is an error.
    pub fn open(path: &Path, start: u64, count: u64) -> Result<Self, RecordIoError> {
        let (file, index) = open_indexed(path)?;
        let record_count = index.record_count();
        if start.checked_add(count).is_none_or(|end| end > record_count) {
            let kind = ErrorKind::RangeOutOfBounds { start, count, record_count };
            return Err(RecordIoError::new(path, 0, kind));
        }
        let (next_chunk, skip) = index.locate(start).unwrap_or((index.chunks().len(), 0));
        Ok(RangeScanner {
            file,
            index,
            next_chunk,
            skip,
            remaining: count,
            records: Vec::new().into_iter(),
        })
    }

    /// Opens `path` to read all of its records.
    pub fn whole_file(path: &Path) -> Result<Self, RecordIoError> {
        let (file, index) = open_indexed(path)?;
        let count = index.record_count();
        Ok(RangeScanner {
            file,
            index,
            next_chunk: 0,
            skip: 0,
            remaining: count,
            records: Vec::new().into_iter(),
        })
    }

    /// The index of the file being read.
    pub fn index(&self) -> &FileIndex {
        &self.index
    }

    /// Reads the next chunk into `records`, dropping the records before the range.
    fn load_next_chunk(&mut self) -> Result<(), RecordIoError> {
        let Some(meta) = self.index.chunks().get(self.next_chunk) else {
            // The index promised more records than its chunks hold. This cannot happen, as
            // `read_chunk` checks every chunk's record count against its index entry, but an
            // error is kinder than a panic if it ever does.
            let kind = ErrorKind::RangeOutOfBounds {
                start: self.index.record_count(),
                count: self.remaining,
                record_count: self.index.record_count(),
            };
            return Err(RecordIoError::new(self.index.path(), self.index.file_bytes(), kind));
        };
        let mut records = read_chunk(&mut self.file, self.index.path(), meta)?.into_iter();
        if self.skip > 0 {
            records.nth(self.skip as usize - 1);
            self.skip = 0;
        }
        self.next_chunk += 1;
        self.records = records;
        Ok(())
    }
}

impl Iterator for RangeScanner {
    type Item = Result<Vec<u8>, RecordIoError>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.remaining > 0 {
            if let Some(record) = self.records.next() {
                self.remaining -= 1;
                return Some(Ok(record));
            }
            if let Err(error) = self.load_next_chunk() {
                self.remaining = 0;
                return Some(Err(error));
            }
        }
        None
    }
}

/// Opens a file and indexes it.
fn open_indexed(path: &Path) -> Result<(File, FileIndex), RecordIoError> {
    let mut file =
        File::open(path).map_err(|error| RecordIoError::new(path, 0, ErrorKind::Io(error)))?;
    let index = FileIndex::from_reader(&mut file, path)?;
    Ok((file, index))
}
