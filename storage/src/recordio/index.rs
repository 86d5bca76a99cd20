//! The index of a RecordIO file: where each chunk starts and how many records it holds, built
//! from the headers alone so indexing a large dataset reads a few bytes per chunk.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::header::read_header;
use super::{ChunkHeader, Compressor, ErrorKind, RecordIoError, HEADER_BYTES};

/// What the index knows about one chunk: its header and where it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkMeta {
    /// Byte offset of the chunk's header in the file.
    pub offset: u64,
    /// Size of the stored payload, in bytes.
    pub compressed_size: u32,
    /// Number of records in the chunk.
    pub record_count: u32,
    /// How the payload is compressed.
    pub compressor: Compressor,
    /// CRC-32 (IEEE) of the stored payload.
    pub checksum: u32,
}

impl ChunkMeta {
    fn new(offset: u64, header: &ChunkHeader) -> Self {
        ChunkMeta {
            offset,
            compressed_size: header.compressed_size,
            record_count: header.record_count,
            compressor: header.compressor,
            checksum: header.checksum,
        }
    }

    /// The byte offset just past this chunk's payload, where the next chunk starts.
    pub fn end_offset(&self) -> u64 {
        self.offset + HEADER_BYTES as u64 + u64::from(self.compressed_size)
    }
}

/// The chunks of one RecordIO file, in file order.
///
/// Invariant: the chunks tile the file exactly, from byte 0 to `file_bytes`, and
/// `record_ends[i]` is the number of records in chunks `0..=i`.
#[derive(Clone, Debug)]
pub struct FileIndex {
    path: PathBuf,
    chunks: Vec<ChunkMeta>,
    record_ends: Vec<u64>,
    file_bytes: u64,
}

impl FileIndex {
    /// Opens the file at `path` and indexes it.
    pub fn build(path: &Path) -> Result<FileIndex, RecordIoError> {
        FileIndex::build_guarded(path, |_| Ok::<(), RecordIoError>(()))
    }

    /// Opens the file at `path` and indexes it, calling `on_chunk` with every chunk as soon as
    /// its header is read: the caller may stop a long index (a cap passed, a request gone) by
    /// returning an error, which is returned as is.
    pub fn build_guarded<E: From<RecordIoError>>(
        path: &Path,
        on_chunk: impl FnMut(&ChunkMeta) -> Result<(), E>,
    ) -> Result<FileIndex, E> {
        let mut file =
            File::open(path).map_err(|error| RecordIoError::new(path, 0, ErrorKind::Io(error)))?;
        FileIndex::from_reader_guarded(&mut file, path, on_chunk)
    }

    /// Indexes a RecordIO stream by reading only its chunk headers and seeking past payloads
    /// (`path` only names the stream in errors). A payload's CRC is not checked here: that
    /// needs its bytes, which [`super::read_chunk`] reads and checks.
    pub fn from_reader<R: Read + Seek>(
        reader: &mut R,
        path: &Path,
    ) -> Result<FileIndex, RecordIoError> {
        FileIndex::from_reader_guarded(reader, path, |_| Ok::<(), RecordIoError>(()))
    }

    /// [`FileIndex::from_reader`], calling `on_chunk` as [`FileIndex::build_guarded`] does.
    pub fn from_reader_guarded<R: Read + Seek, E: From<RecordIoError>>(
        reader: &mut R,
        path: &Path,
        mut on_chunk: impl FnMut(&ChunkMeta) -> Result<(), E>,
    ) -> Result<FileIndex, E> {
        let file_bytes = reader
            .seek(SeekFrom::End(0))
            .map_err(|error| RecordIoError::new(path, 0, ErrorKind::Io(error)))?;
        let mut chunks = Vec::new();
        let mut record_ends = Vec::new();
        let mut records = 0u64;
        let mut offset = 0u64;
        while offset < file_bytes {
            let header = read_header(reader, path, offset)?;
            let meta = ChunkMeta::new(offset, &header);
            let payload_offset = offset + HEADER_BYTES as u64;
            let available = file_bytes - payload_offset;
            if u64::from(meta.compressed_size) > available {
                let expected = u64::from(meta.compressed_size);
                let kind = ErrorKind::TruncatedPayload { expected, available };
                return Err(RecordIoError::new(path, offset, kind).into());
            }
            on_chunk(&meta)?;
            records += u64::from(meta.record_count);
            offset = meta.end_offset();
            record_ends.push(records);
            chunks.push(meta);
        }
        Ok(FileIndex { path: path.to_owned(), chunks, record_ends, file_bytes })
    }

    /// The file this index describes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The chunks, in file order.
    pub fn chunks(&self) -> &[ChunkMeta] {
        &self.chunks
    }

    /// The number of records in the file.
    pub fn record_count(&self) -> u64 {
        self.record_ends.last().copied().unwrap_or(0)
    }

    /// The total size of the stored payloads, headers excluded.
    pub fn compressed_bytes(&self) -> u64 {
        self.chunks.iter().map(|chunk| u64::from(chunk.compressed_size)).sum()
    }

    /// The size of the file, which is exactly the size of its chunks.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// The number of records in the chunks before chunk `chunk_index`: the file-wide index of
    /// that chunk's first record.
    pub fn first_record(&self, chunk_index: usize) -> u64 {
        match chunk_index.checked_sub(1) {
            None => 0,
            Some(previous) => {
                self.record_ends.get(previous).copied().unwrap_or(self.record_count())
            }
        }
    }

    /// Which chunk holds the file's record number `record`, and its number within the chunk;
    /// `None` past the last record.
    pub fn locate(&self, record: u64) -> Option<(usize, u32)> {
        // The first chunk whose cumulative end lies beyond `record`; empty chunks never match.
        let chunk_index = self.record_ends.partition_point(|&end| end <= record);
        if chunk_index == self.chunks.len() {
            return None;
        }
        let within = record - self.first_record(chunk_index);
        let within = u32::try_from(within).expect("a record within a chunk is below its u32 count");
        Some((chunk_index, within))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    /// Headers only (every payload empty) with the given record counts: the index never looks
    /// at payloads, so this is all `locate` needs.
    fn index_of(record_counts: &[u32]) -> FileIndex {
        let mut bytes = Vec::new();
        for &record_count in record_counts {
            let header = ChunkHeader {
                checksum: 0,
                compressor: Compressor::None,
                compressed_size: 0,
                record_count,
            };
            bytes.extend_from_slice(&header.encode());
        }
        FileIndex::from_reader(&mut Cursor::new(bytes), Path::new("t")).expect("valid headers")
    }

    /// `locate` maps a file-wide record number to its chunk and position, skipping chunks that
    /// hold no record, and returns `None` past the end.
    #[test]
    fn locate() {
        fn check(record_counts: &[u32], record: u64, expected: Option<(usize, u32)>) {
            let index = index_of(record_counts);
            assert_eq!(index.locate(record), expected, "{record_counts:?} record {record}");
            if let Some((chunk_index, within)) = expected {
                assert_eq!(index.first_record(chunk_index) + u64::from(within), record);
            }
        }
        check(&[], 0, None);
        check(&[2, 0, 3], 0, Some((0, 0)));
        check(&[2, 0, 3], 1, Some((0, 1)));
        check(&[2, 0, 3], 2, Some((2, 0)));
        check(&[2, 0, 3], 4, Some((2, 2)));
        check(&[2, 0, 3], 5, None);
        check(&[0, 0, 1], 0, Some((2, 0)));
        check(&[u32::MAX, u32::MAX], u64::from(u32::MAX), Some((1, 0)));
        check(&[u32::MAX, u32::MAX], 2 * u64::from(u32::MAX) - 1, Some((1, u32::MAX - 1)));
        check(&[u32::MAX, u32::MAX], u64::MAX, None);
    }
}
