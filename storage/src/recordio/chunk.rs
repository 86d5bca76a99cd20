//! One chunk as a whole: encoding a payload into header and stored bytes for the writer, and
//! reading, validating and decoding one chunk for every reader.

use std::fs::File;
use std::io::{Read, Seek};
use std::path::Path;

use super::compressor::Decompressed;
use super::decoded_chunk::DecodedChunk;
use super::header::read_header;
use super::{payload, ChunkHeader, ChunkMeta, Compressor, ErrorKind, RecordIoError};
use super::{CHUNK_PAYLOAD_BYTES_MAX, CHUNK_UNCOMPRESSED_BYTES_MAX};

/// The most payload bytes reserved up front; larger payloads grow as bytes actually arrive,
/// so a header that lies about its size cannot make a reader allocate what the file lacks.
const PAYLOAD_RESERVE_BYTES_MAX: u64 = 1 << 20;

/// How much of an uncompressed payload is read, checksummed and parsed at a time: small enough
/// to stay in the CPU cache between those three steps.
const READ_PIECE_BYTES: usize = 256 << 10;

/// Compresses an uncompressed payload of `record_count` records into a chunk's header and
/// stored payload. Fails (`InvalidInput`) if the result would be unreadable: too large for a
/// `u32` size or for [`CHUNK_PAYLOAD_BYTES_MAX`].
pub(crate) fn encode_chunk(
    compressor: Compressor,
    uncompressed: &[u8],
    record_count: u32,
) -> std::io::Result<(ChunkHeader, Vec<u8>)> {
    let compressed = compressor.compress(uncompressed)?;
    let compressed_size = u32::try_from(compressed.len())
        .ok()
        .filter(|&size| size as usize <= CHUNK_PAYLOAD_BYTES_MAX)
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "compressed chunk of {} bytes exceeds the {CHUNK_PAYLOAD_BYTES_MAX}-byte limit",
                    compressed.len()
                ),
            )
        })?;
    let checksum = crc32fast::hash(&compressed);
    Ok((ChunkHeader { checksum, compressor, compressed_size, record_count }, compressed))
}

/// Reads the chunk an index described: seeks to `meta.offset`, re-reads and validates the
/// header (it must still match `meta`), reads the payload, checks its CRC, decompresses it and
/// splits it into exactly `meta.record_count` records.
pub fn read_chunk<R: Read + Seek>(
    reader: &mut R,
    path: &Path,
    meta: &ChunkMeta,
) -> Result<Vec<Vec<u8>>, RecordIoError> {
    let mut chunk = DecodedChunk::default();
    read_chunk_into(reader, path, meta, &mut chunk)?;
    Ok(chunk.to_records())
}

/// As [`read_chunk`], decoding into `chunk` and reusing its buffers: the fast path for scans.
pub fn read_chunk_into<R: Read + Seek>(
    reader: &mut R,
    path: &Path,
    meta: &ChunkMeta,
    chunk: &mut DecodedChunk,
) -> Result<(), RecordIoError> {
    let header = read_header(reader, path, meta.offset)?;
    check_matches_index(&header, meta)
        .map_err(|kind| RecordIoError::new(path, meta.offset, kind))?;
    decode_payload(reader, path, meta.offset, &header, chunk)
}

/// Reads the chunk whose header starts at byte `offset` of the file at `path`: what a trainer
/// calls for the chunk a task names.
pub fn read_chunk_at(path: &Path, offset: u64) -> Result<Vec<Vec<u8>>, RecordIoError> {
    let mut file =
        File::open(path).map_err(|error| RecordIoError::new(path, offset, ErrorKind::Io(error)))?;
    let header = read_header(&mut file, path, offset)?;
    let mut chunk = DecodedChunk::default();
    decode_payload(&mut file, path, offset, &header, &mut chunk)?;
    Ok(chunk.to_records())
}

/// Reads the chunk a task names into `chunk`, checking its header against what the task says
/// (payload size and record count) before reading the payload, then the payload's CRC: a
/// file changed since the master indexed it is an `IndexMismatch` naming the field.
pub fn read_expected_chunk(
    path: &Path,
    offset: u64,
    compressed_size: u32,
    record_count: u32,
    chunk: &mut DecodedChunk,
) -> Result<(), RecordIoError> {
    let mut file =
        File::open(path).map_err(|error| RecordIoError::new(path, offset, ErrorKind::Io(error)))?;
    let header = read_header(&mut file, path, offset)?;
    let fields = [
        ("compressed size", compressed_size, header.compressed_size),
        ("record count", record_count, header.record_count),
    ];
    for (field, indexed, found) in fields {
        if indexed != found {
            let kind = ErrorKind::IndexMismatch {
                field,
                indexed: u64::from(indexed),
                found: u64::from(found),
            };
            return Err(RecordIoError::new(path, offset, kind));
        }
    }
    decode_payload(&mut file, path, offset, &header, chunk)
}

/// Compares a freshly read header with the index entry that led to it.
fn check_matches_index(header: &ChunkHeader, meta: &ChunkMeta) -> Result<(), ErrorKind> {
    let fields = [
        ("checksum", meta.checksum, header.checksum),
        ("compressor", meta.compressor.code(), header.compressor.code()),
        ("compressed size", meta.compressed_size, header.compressed_size),
        ("record count", meta.record_count, header.record_count),
    ];
    for (field, indexed, found) in fields {
        if indexed != found {
            let (indexed, found) = (u64::from(indexed), u64::from(found));
            return Err(ErrorKind::IndexMismatch { field, indexed, found });
        }
    }
    Ok(())
}

/// Reads and decodes the payload that follows `header` into `chunk`; the reader is
/// positioned just after the header.
fn decode_payload<R: Read>(
    reader: &mut R,
    path: &Path,
    offset: u64,
    header: &ChunkHeader,
    chunk: &mut DecodedChunk,
) -> Result<(), RecordIoError> {
    let error = |kind| RecordIoError::new(path, offset, kind);
    if header.compressor == Compressor::None {
        return decode_stored_payload(reader, header, chunk).map_err(error);
    }
    let expected = u64::from(header.compressed_size);
    let compressed = &mut chunk.compressed;
    compressed.clear();
    compressed.reserve(expected.min(PAYLOAD_RESERVE_BYTES_MAX) as usize);
    reader
        .take(expected)
        .read_to_end(compressed)
        .map_err(|io_error| error(ErrorKind::Io(io_error)))?;
    let available = compressed.len() as u64;
    if available < expected {
        return Err(error(ErrorKind::TruncatedPayload { expected, available }));
    }
    let computed = crc32fast::hash(compressed);
    if computed != header.checksum {
        return Err(error(ErrorKind::ChecksumMismatch { stored: header.checksum, computed }));
    }
    let limit = CHUNK_UNCOMPRESSED_BYTES_MAX;
    let outcome = header
        .compressor
        .decompress_into(&chunk.compressed, &mut chunk.payload, limit)
        .map_err(|io_error| error(ErrorKind::Decompress(io_error)))?;
    if let Decompressed::TooLarge { size_at_least } = outcome {
        let limit = limit as u64;
        return Err(error(ErrorKind::ChunkTooLarge { size: size_at_least, limit }));
    }
    payload::record_spans(&chunk.payload, header.record_count, &mut chunk.spans).map_err(error)
}

/// An uncompressed payload, read piece by piece: each piece is checksummed and parsed into
/// records while it is still in the CPU cache, so the payload crosses memory once (three
/// passes over a 32 MiB buffer ran at a quarter of raw `read()` speed).
fn decode_stored_payload<R: Read>(
    reader: &mut R,
    header: &ChunkHeader,
    chunk: &mut DecodedChunk,
) -> Result<(), ErrorKind> {
    let expected = header.compressed_size as usize;
    let (payload, spans) = (&mut chunk.payload, &mut chunk.spans);
    payload.clear();
    spans.clear();
    let mut hasher = crc32fast::Hasher::new();
    let mut parsed = 0;
    while payload.len() < expected {
        let start = payload.len();
        let piece = (expected - start).min(READ_PIECE_BYTES);
        payload.reserve(piece.min(PAYLOAD_RESERVE_BYTES_MAX as usize));
        let got = reader.take(piece as u64).read_to_end(payload).map_err(ErrorKind::Io)?;
        if got == 0 {
            let (expected, available) = (expected as u64, start as u64);
            return Err(ErrorKind::TruncatedPayload { expected, available });
        }
        hasher.update(&payload[start..]);
        parsed = payload::parse_complete_records(payload, parsed, spans);
    }
    let computed = hasher.finalize();
    if computed != header.checksum {
        return Err(ErrorKind::ChecksumMismatch { stored: header.checksum, computed });
    }
    payload::finish_spans(payload, parsed, header.record_count, spans)
}
