//! The RecordIO writer: buffers records into a chunk and writes each full chunk, compressed,
//! behind its header.

use std::io::Write;

use super::chunk::encode_chunk;
use super::payload::{append_record, encoded_bytes};
use super::{Compressor, CHUNK_UNCOMPRESSED_BYTES_MAX};

/// The default limit on a chunk's uncompressed payload: 1 MiB, a few thousand dense examples.
/// A chunk is a task by default (`--chunks-per-task 1`), and a task should take seconds to
/// train on, so that the masters spread a file over many trainers and a lost task costs
/// little: PaddlePaddle's 32 MiB made a 1 MB file a single task.
pub const DEFAULT_MAX_CHUNK_BYTES: usize = 1 << 20;

/// How a [`Writer`] lays out chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterOptions {
    /// How every chunk's payload is compressed.
    pub compressor: Compressor,
    /// A new chunk starts when the next record would push the uncompressed payload (length
    /// prefixes included) past this many bytes. A bigger record gets a chunk of its own. Values
    /// above [`CHUNK_UNCOMPRESSED_BYTES_MAX`] act as that limit, so readers accept every chunk.
    pub max_chunk_bytes: usize,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions { compressor: Compressor::None, max_chunk_bytes: DEFAULT_MAX_CHUNK_BYTES }
    }
}

/// Writes records to a RecordIO stream. Call [`Writer::finish`] at the end: records still
/// buffered when the writer is dropped are lost.
#[derive(Debug)]
pub struct Writer<W: Write> {
    inner: W,
    compressor: Compressor,
    max_chunk_bytes: usize,
    /// The uncompressed payload of the chunk being filled.
    payload: Vec<u8>,
    /// Records in `payload`.
    payload_records: u32,
    records_written: u64,
    chunks_written: u64,
}

impl<W: Write> Writer<W> {
    /// A writer that appends chunks to `inner` (which should be buffered if it is a file).
    pub fn new(inner: W, options: WriterOptions) -> Self {
        Writer {
            inner,
            compressor: options.compressor,
            max_chunk_bytes: options.max_chunk_bytes.min(CHUNK_UNCOMPRESSED_BYTES_MAX),
            payload: Vec::new(),
            payload_records: 0,
            records_written: 0,
            chunks_written: 0,
        }
    }

    /// Adds one record, first writing out the current chunk if the record would overfill it.
    ///
    /// A record whose encoding alone exceeds [`CHUNK_UNCOMPRESSED_BYTES_MAX`] (so in particular
    /// any record over `u32::MAX` bytes) is refused with `InvalidInput`: no reader would accept
    /// the chunk.
    pub fn write_record(&mut self, record: &[u8]) -> std::io::Result<()> {
        let record_bytes = encoded_bytes(record.len());
        if u32::try_from(record.len()).is_err() || record_bytes > CHUNK_UNCOMPRESSED_BYTES_MAX {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "record of {} bytes exceeds the {CHUNK_UNCOMPRESSED_BYTES_MAX}-byte chunk limit",
                    record.len()
                ),
            ));
        }
        let overfills = self.payload.len() + record_bytes > self.max_chunk_bytes;
        if overfills || self.payload_records == u32::MAX {
            self.write_chunk()?;
        }
        append_record(&mut self.payload, record);
        self.payload_records += 1;
        self.records_written += 1;
        Ok(())
    }

    /// Writes the last chunk (if it holds any record), flushes, and returns the inner writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.write_chunk()?;
        self.inner.flush()?;
        Ok(self.inner)
    }

    /// Records accepted so far, including those still buffered.
    pub fn records_written(&self) -> u64 {
        self.records_written
    }

    /// Chunks written out so far.
    pub fn chunks_written(&self) -> u64 {
        self.chunks_written
    }

    /// Writes the buffered chunk, unless it is empty: like the Go writer, never an empty chunk.
    fn write_chunk(&mut self) -> std::io::Result<()> {
        if self.payload_records == 0 {
            return Ok(());
        }
        let (header, compressed) =
            encode_chunk(self.compressor, &self.payload, self.payload_records)?;
        self.inner.write_all(&header.encode())?;
        self.inner.write_all(&compressed)?;
        self.payload.clear();
        self.payload_records = 0;
        self.chunks_written += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::path::Path;

    use super::*;
    use crate::recordio::FileIndex;

    /// Chunks are cut where the next record would push the payload (4-byte length prefixes
    /// included) past `max_chunk_bytes`; an oversized record gets a chunk of its own.
    #[test]
    fn chunk_boundaries() {
        fn check(max_chunk_bytes: usize, record_sizes: &[usize], expected_counts: &[u32]) {
            let options = WriterOptions { compressor: Compressor::None, max_chunk_bytes };
            let mut writer = Writer::new(Vec::new(), options);
            for &size in record_sizes {
                writer.write_record(&vec![7u8; size]).expect("write to memory");
            }
            assert_eq!(writer.records_written(), record_sizes.len() as u64);
            let bytes = writer.finish().expect("finish");
            let index = FileIndex::from_reader(&mut Cursor::new(bytes), Path::new("t"))
                .expect("the writer's output indexes");
            let counts: Vec<u32> = index.chunks().iter().map(|chunk| chunk.record_count).collect();
            assert_eq!(counts, expected_counts, "max {max_chunk_bytes}, sizes {record_sizes:?}");
        }
        check(100, &[], &[]);
        check(10, &[6, 0], &[1, 1]); // 4 + 6 fills 10; an empty record still adds a 4-byte prefix.
        check(10, &[6], &[1]);
        check(14, &[6, 0], &[2]);
        check(14, &[6, 1], &[1, 1]);
        check(0, &[0, 0, 0], &[1, 1, 1]);
        check(8, &[100, 0, 0, 100], &[1, 2, 1]);
        check(DEFAULT_MAX_CHUNK_BYTES, &[1000; 5], &[5]);
    }
}
