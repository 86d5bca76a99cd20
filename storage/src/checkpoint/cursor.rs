//! `Cursor`: bounds-checked little-endian reads over a checked body, errors carrying the
//! file offset.

use std::path::Path;

use super::error::CheckpointError;

pub(crate) struct Cursor<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    /// The body's offset in the file (after the magic).
    base: u64,
    position: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(path: &'a Path, bytes: &'a [u8], base: u64) -> Self {
        Self { path, bytes, base, position: 0 }
    }

    pub(crate) fn offset(&self) -> u64 {
        self.base + self.position as u64
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    pub(crate) fn corrupt(&self, reason: impl Into<String>) -> CheckpointError {
        CheckpointError::Corrupt {
            path: self.path.to_path_buf(),
            offset: self.offset(),
            reason: reason.into(),
        }
    }

    pub(crate) fn take(&mut self, length: usize, what: &str) -> Result<&'a [u8], CheckpointError> {
        if length > self.remaining() {
            return Err(
                self.corrupt(format!("{what} needs {length} bytes, {} remain", self.remaining()))
            );
        }
        let bytes = &self.bytes[self.position..self.position + length];
        self.position += length;
        Ok(bytes)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, CheckpointError> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, CheckpointError> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_le_bytes(bytes.try_into().expect("4 bytes")))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, CheckpointError> {
        let bytes = self.take(8, what)?;
        Ok(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
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
        String::from_utf8(bytes.to_vec()).map_err(|_| CheckpointError::Corrupt {
            path: self.path.to_path_buf(),
            offset: start,
            reason: "a name is not UTF-8".into(),
        })
    }

    pub(crate) fn floats(&mut self, count: usize, what: &str) -> Result<Vec<f32>, CheckpointError> {
        let bytes = self.take(count * 4, what)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
            .collect())
    }
}
