//! `Cursor`: bounds-checked little-endian reads streamed from a checkpoint's body, hashing every
//! byte as it passes, errors carrying the file offset. Nothing is allocated beyond what remains
//! of the body, whose length the trailer gave.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::error::CheckpointError;

/// Bytes of floats read per call, straight into their place and hashed there while in cache.
const READ_BYTES: usize = 256 << 10;
/// The buffer for the small fields between blocks: reads of floats longer than it bypass it.
const FIELD_BUFFER_BYTES: usize = 8 << 10;

pub(crate) struct Cursor<'a> {
    path: &'a Path,
    source: BufReader<File>,
    crc: crc32fast::Hasher,
    /// The body's offset in the file (after the magic).
    base: u64,
    length: u64,
    position: u64,
    chunk: Vec<u8>,
}

impl<'a> Cursor<'a> {
    /// Reads the `length` bytes at file offset `base` from `file`, positioned there.
    pub(crate) fn new(path: &'a Path, file: File, base: u64, length: u64) -> Self {
        let source = BufReader::with_capacity(FIELD_BUFFER_BYTES, file);
        let crc = crc32fast::Hasher::new();
        Self { path, source, crc, base, length, position: 0, chunk: Vec::new() }
    }

    /// Ends its range `length` bytes after its start (no earlier than where it is).
    pub(crate) fn limit(&mut self, length: u64) {
        self.length = length.max(self.position);
    }

    /// How far into its range it has read.
    pub(crate) fn position(&self) -> u64 {
        self.position
    }

    pub(crate) fn offset(&self) -> u64 {
        self.base + self.position
    }

    pub(crate) fn remaining(&self) -> u64 {
        self.length - self.position
    }

    pub(crate) fn corrupt(&self, reason: impl Into<String>) -> CheckpointError {
        CheckpointError::Corrupt {
            path: self.path.to_path_buf(),
            offset: self.offset(),
            reason: reason.into(),
        }
    }

    /// Reads (and hashes) what is left of its range; the hash of the whole range.
    pub(crate) fn finish(mut self) -> Result<crc32fast::Hasher, CheckpointError> {
        while self.remaining() > 0 {
            let part = self.remaining().min(READ_BYTES as u64) as usize;
            self.fill_chunk(part, "the body")?;
        }
        Ok(self.crc)
    }

    /// Reads the next `length` bytes into `self.chunk`, hashing them.
    fn fill_chunk(&mut self, length: usize, what: &str) -> Result<(), CheckpointError> {
        let mut chunk = std::mem::take(&mut self.chunk);
        chunk.resize(length, 0);
        let read = self.read_into(&mut chunk, what);
        self.chunk = chunk;
        read
    }

    /// Fills `into` with the next bytes of the body, hashing them.
    fn read_into(&mut self, into: &mut [u8], what: &str) -> Result<(), CheckpointError> {
        let length = into.len();
        if length as u64 > self.remaining() {
            return Err(
                self.corrupt(format!("{what} needs {length} bytes, {} remain", self.remaining()))
            );
        }
        if let Err(error) = self.source.read_exact(into) {
            return Err(match error.kind() {
                std::io::ErrorKind::UnexpectedEof => self.corrupt("the file shrank while read"),
                _ => CheckpointError::Io { path: self.path.to_path_buf(), error },
            });
        }
        self.crc.update(into);
        self.position += length as u64;
        Ok(())
    }

    pub(crate) fn take(&mut self, length: usize, what: &str) -> Result<Vec<u8>, CheckpointError> {
        self.fill_chunk(length, what)?;
        Ok(self.chunk.clone())
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], CheckpointError> {
        self.fill_chunk(N, what)?;
        let mut bytes = [0; N];
        bytes.copy_from_slice(&self.chunk);
        Ok(bytes)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, CheckpointError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, CheckpointError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, CheckpointError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A u32 length checked against `max` before anything is allocated.
    pub(crate) fn length(&mut self, what: &str, max: usize) -> Result<usize, CheckpointError> {
        let start = self.offset();
        let length = self.u32(what)? as usize;
        if length > max {
            let reason = format!("{what} {length} is over the limit {max}");
            return Err(CheckpointError::Corrupt {
                path: self.path.to_path_buf(),
                offset: start,
                reason,
            });
        }
        Ok(length)
    }

    pub(crate) fn name(&mut self, max: usize) -> Result<String, CheckpointError> {
        let length = self.length("name length", max)?;
        let start = self.offset();
        let bytes = self.take(length, "name")?;
        String::from_utf8(bytes).map_err(|_| CheckpointError::Corrupt {
            path: self.path.to_path_buf(),
            offset: start,
            reason: "a name is not UTF-8".into(),
        })
    }

    /// `count` floats, allocated only once the body is known to hold them, read straight into
    /// their place (one copy from the page cache, as a plain read makes) and hashed there part
    /// by part while the part is in cache.
    pub(crate) fn floats(&mut self, count: usize, what: &str) -> Result<Vec<f32>, CheckpointError> {
        let bytes = count as u64 * 4;
        if bytes > self.remaining() {
            return Err(
                self.corrupt(format!("{what} needs {bytes} bytes, {} remain", self.remaining()))
            );
        }
        let mut values = vec![0_f32; count];
        for part in bytemuck::cast_slice_mut::<f32, u8>(&mut values).chunks_mut(READ_BYTES) {
            self.read_into(part, what)?;
        }
        if cfg!(target_endian = "big") {
            for value in &mut values {
                *value = f32::from_bits(u32::from_le(value.to_bits()));
            }
        }
        Ok(values)
    }
}
