//! The 20-byte header in front of every chunk: its layout, encoding and validation.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use super::{Compressor, ErrorKind, RecordIoError, CHUNK_PAYLOAD_BYTES_MAX};

/// The first four bytes of every chunk, as a little-endian `u32`.
pub const MAGIC: u32 = 0x0102_0304;

/// The size of a chunk header: five little-endian `u32`s.
pub const HEADER_BYTES: usize = 20;

/// A decoded chunk header (the magic number is implied: a header that decodes had it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHeader {
    /// CRC-32 (IEEE) of the compressed payload.
    pub checksum: u32,
    /// How the payload is compressed.
    pub compressor: Compressor,
    /// Size of the payload as stored, in bytes.
    pub compressed_size: u32,
    /// Number of records in the payload.
    pub record_count: u32,
}

impl ChunkHeader {
    /// The header's bytes, in the order PaddlePaddle/recordio writes them.
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let fields =
            [MAGIC, self.checksum, self.compressor.code(), self.compressed_size, self.record_count];
        let mut bytes = [0u8; HEADER_BYTES];
        for (slot, field) in bytes.chunks_exact_mut(4).zip(fields) {
            slot.copy_from_slice(&field.to_le_bytes());
        }
        bytes
    }

    /// Decodes the header found at byte `offset` of `path`, checking the magic number, the
    /// compressor code and the payload size limit.
    pub fn decode(
        bytes: &[u8; HEADER_BYTES],
        path: &Path,
        offset: u64,
    ) -> Result<Self, RecordIoError> {
        let field = |index: usize| {
            let start = index * 4;
            u32::from_le_bytes([bytes[start], bytes[start + 1], bytes[start + 2], bytes[start + 3]])
        };
        let error = |kind| Err(RecordIoError::new(path, offset, kind));
        let magic = field(0);
        if magic != MAGIC {
            return error(ErrorKind::BadMagic { found: magic });
        }
        let code = field(2);
        let Some(compressor) = Compressor::from_code(code) else {
            return error(ErrorKind::UnknownCompressor { code });
        };
        let compressed_size = field(3);
        if compressed_size as usize > CHUNK_PAYLOAD_BYTES_MAX {
            return error(ErrorKind::ChunkTooLarge {
                size: u64::from(compressed_size),
                limit: CHUNK_PAYLOAD_BYTES_MAX as u64,
            });
        }
        Ok(ChunkHeader { checksum: field(1), compressor, compressed_size, record_count: field(4) })
    }
}

/// Seeks to `offset` and reads and decodes the chunk header there, reading exactly
/// [`HEADER_BYTES`] bytes (fewer only at the end of the file).
pub(crate) fn read_header<R: Read + Seek>(
    reader: &mut R,
    path: &Path,
    offset: u64,
) -> Result<ChunkHeader, RecordIoError> {
    let io_error = |error| RecordIoError::new(path, offset, ErrorKind::Io(error));
    reader.seek(SeekFrom::Start(offset)).map_err(io_error)?;
    let mut bytes = [0u8; HEADER_BYTES];
    let available = read_full(reader, &mut bytes).map_err(io_error)?;
    if available < HEADER_BYTES {
        let kind = ErrorKind::TruncatedHeader { available: available as u64 };
        return Err(RecordIoError::new(path, offset, kind));
    }
    ChunkHeader::decode(&bytes, path, offset)
}

/// Reads until `buffer` is full or the reader is exhausted; returns how many bytes it read.
fn read_full<R: Read>(reader: &mut R, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match reader.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(count) => filled += count,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encoding writes the five fields little-endian in Go's order, and decoding accepts exactly
    /// what encoding produced while refusing a bad magic, compressor or size.
    #[test]
    fn encode_decode() {
        fn check(bytes: [u8; HEADER_BYTES], expected: Result<ChunkHeader, &str>) {
            let decoded = ChunkHeader::decode(&bytes, Path::new("f"), 40);
            match expected {
                Ok(header) => {
                    assert_eq!(decoded.expect("valid header"), header);
                    assert_eq!(header.encode(), bytes);
                }
                Err(message) => {
                    let error = decoded.expect_err("invalid header");
                    assert_eq!(error.offset, 40);
                    assert!(error.to_string().contains(message), "{error}");
                }
            }
        }
        let header = |magic: u32, compressor: u32, size: u32| {
            let mut bytes = [0u8; HEADER_BYTES];
            let fields = [magic, 0xdead_beef, compressor, size, 7];
            for (slot, field) in bytes.chunks_exact_mut(4).zip(fields) {
                slot.copy_from_slice(&field.to_le_bytes());
            }
            bytes
        };
        let valid = |compressor, size| ChunkHeader {
            checksum: 0xdead_beef,
            compressor,
            compressed_size: size,
            record_count: 7,
        };
        check(header(MAGIC, 0, 11), Ok(valid(Compressor::None, 11)));
        check(header(MAGIC, 1, 0), Ok(valid(Compressor::Snappy, 0)));
        check(header(MAGIC, 2, 5), Ok(valid(Compressor::Gzip, 5)));
        check(header(0x0403_0201, 0, 11), Err("not a RecordIO chunk header"));
        check(header(MAGIC, 3, 11), Err("unknown compressor code 3"));
        check(header(MAGIC, 0, u32::MAX), Err("exceeds the limit"));
        // The bytes found instead of the magic never reach a message (nor a client).
        let error = ChunkHeader::decode(&header(0x746f_6f72, 0, 11), Path::new("f"), 0)
            .expect_err("not a header");
        let message = error.to_string();
        assert!(!message.contains("746f6f72") && !message.contains("root"), "{message}");
        assert_eq!(&header(MAGIC, 0, 0)[..4], &[0x04, 0x03, 0x02, 0x01]);
    }
}
