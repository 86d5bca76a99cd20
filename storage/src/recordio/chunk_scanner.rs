//! `ChunkScanner`: whole chunks of several RecordIO files (paths or globs) in order, decoded
//! into one reused `DecodedChunk`. The fast path for full scans: no allocation per record, and
//! none per chunk once the buffers have grown to the largest chunk.

use std::fs::File;
use std::path::PathBuf;

use super::decoded_chunk::DecodedChunk;
use super::{expand_patterns, read_chunk_into, ErrorKind, FileIndex, RecordIoError};

#[derive(Debug)]
pub struct ChunkScanner {
    /// Files not yet opened, in reverse order so the next one pops off the end.
    pending: Vec<PathBuf>,
    current: Option<OpenFile>,
    chunk: DecodedChunk,
}

#[derive(Debug)]
struct OpenFile {
    file: File,
    index: FileIndex,
    next_chunk: usize,
}

impl ChunkScanner {
    /// Expands `patterns` now (a pattern that matches nothing fails here); files are opened and
    /// indexed one at a time as the scan reaches them.
    pub fn open(patterns: &[String]) -> Result<Self, RecordIoError> {
        let mut pending = expand_patterns(patterns)?;
        pending.reverse();
        Ok(Self { pending, current: None, chunk: DecodedChunk::default() })
    }

    /// The chunk the last successful `next_chunk` returned (empty before the first and after
    /// an error).
    pub fn current(&self) -> &DecodedChunk {
        &self.chunk
    }

    /// Decodes the next chunk; `None` after the last one. After an error the scan ends.
    pub fn next_chunk(&mut self) -> Option<Result<&DecodedChunk, RecordIoError>> {
        loop {
            let open = match &mut self.current {
                Some(open) => open,
                None => {
                    let path = self.pending.pop()?;
                    match open_indexed(path) {
                        Ok(open) => self.current.insert(open),
                        Err(error) => return Some(Err(self.fail(error))),
                    }
                }
            };
            let Some(meta) = open.index.chunks().get(open.next_chunk).cloned() else {
                self.current = None;
                continue;
            };
            open.next_chunk += 1;
            let path = open.index.path().to_path_buf();
            return match read_chunk_into(&mut open.file, &path, &meta, &mut self.chunk) {
                Ok(()) => Some(Ok(&self.chunk)),
                Err(error) => Some(Err(self.fail(error))),
            };
        }
    }

    /// Ends the scan: no further chunks, and no records of a half-decoded one.
    fn fail(&mut self, error: RecordIoError) -> RecordIoError {
        self.pending.clear();
        self.current = None;
        self.chunk.spans.clear();
        error
    }
}

fn open_indexed(path: PathBuf) -> Result<OpenFile, RecordIoError> {
    let mut file =
        File::open(&path).map_err(|error| RecordIoError::new(&path, 0, ErrorKind::Io(error)))?;
    let index = FileIndex::from_reader(&mut file, &path)?;
    Ok(OpenFile { file, index, next_chunk: 0 })
}
