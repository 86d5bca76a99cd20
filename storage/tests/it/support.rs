//! Helpers shared by the integration tests: writing records to bytes and files, and
//! hand-building chunks.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use storage::recordio::{Compressor, Writer, WriterOptions, MAGIC};

pub const COMPRESSORS: [Compressor; 3] = [Compressor::None, Compressor::Snappy, Compressor::Gzip];

/// The bytes a `Writer` produces for `records`.
pub fn write_records(records: &[Vec<u8>], options: WriterOptions) -> Vec<u8> {
    let mut writer = Writer::new(Vec::new(), options);
    for record in records {
        writer.write_record(record).expect("write to memory");
    }
    writer.finish().expect("finish in memory")
}

/// A temporary directory holding one file `data.recordio` with `bytes`; keep the directory
/// alive as long as the path is used.
pub fn temp_file(bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let directory = tempfile::tempdir().expect("create a temporary directory");
    let path = directory.path().join("data.recordio");
    std::fs::write(&path, bytes).expect("write the test file");
    (directory, path)
}

/// Owned records from string literals.
pub fn records(literals: &[&str]) -> Vec<Vec<u8>> {
    literals.iter().map(|literal| literal.as_bytes().to_vec()).collect()
}

/// A chunk built by hand: a header with the given fields (the CRC computed over `stored`)
/// followed by `stored`.
pub fn hand_chunk(compressor: u32, record_count: u32, stored: &[u8]) -> Vec<u8> {
    let size = u32::try_from(stored.len()).expect("small test payload");
    let fields = [MAGIC, crc32fast::hash(stored), compressor, size, record_count];
    let mut chunk: Vec<u8> = fields.iter().flat_map(|field| field.to_le_bytes()).collect();
    chunk.extend_from_slice(stored);
    chunk
}

/// A reader that counts the bytes read through it, to prove what a reader does not read.
pub struct CountingReader<R> {
    pub inner: R,
    pub bytes_read: u64,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let count = self.inner.read(buffer)?;
        self.bytes_read += count as u64;
        Ok(count)
    }
}

impl<R: Seek> Seek for CountingReader<R> {
    fn seek(&mut self, position: SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(position)
    }
}
