//! RecordIO: the chunked record file format of PaddlePaddle/recordio (Go), read and written
//! byte for byte compatibly.
//!
//! A file is chunks back to back, with no file header. Each chunk is a 20-byte header of
//! little-endian `u32`s (`magic | CRC-32 IEEE of the compressed payload | compressor |
//! compressed size | record count`) followed by the payload. The uncompressed payload is, for
//! each record, a `u32` little-endian length and the record's bytes.
//!
//! Architecture Invariant: nothing here panics on what it reads from disk. Every defect in a
//! file is a [`RecordIoError`] naming the file and the byte offset of the chunk (or header) at
//! fault, so an operator can find it with `xxd -s`.
//!
//! Architecture Invariant: the payload layout is encoded and decoded in exactly one place
//! (`payload.rs`), and compression in one place (`compressor.rs`), shared by the writer and
//! every reader.

mod chunk;
mod chunk_scanner;
mod compressor;
mod decoded_chunk;
mod error;
mod header;
mod index;
mod patterns;
mod payload;
mod range_scanner;
mod scanner;
mod writer;

pub use chunk::{read_chunk, read_chunk_at, read_chunk_into, read_expected_chunk};
pub use chunk_scanner::ChunkScanner;
pub use compressor::{Compressor, ParseCompressorError};
pub use decoded_chunk::DecodedChunk;
pub use error::{ErrorKind, RecordIoError};
pub use header::{ChunkHeader, HEADER_BYTES, MAGIC};
pub use index::{ChunkMeta, FileIndex};
pub use patterns::{expand_pattern_guarded, expand_patterns, ExpandGuard, GLOB_DEPTH_MAX};
pub use range_scanner::RangeScanner;
pub use scanner::Scanner;
pub use writer::{Writer, WriterOptions, DEFAULT_MAX_CHUNK_BYTES};

/// The largest uncompressed chunk payload a reader accepts and a writer produces.
///
/// Readers decompress through a limit of this size so a hostile chunk (a "decompression bomb")
/// costs at most this much memory and then fails, instead of exhausting memory. It is 256
/// times [`DEFAULT_MAX_CHUNK_BYTES`], room for any sensible dataset, while one chunk in flight
/// (compressed copy, uncompressed copy, split records) stays under a gigabyte.
pub const CHUNK_UNCOMPRESSED_BYTES_MAX: usize = 256 << 20;

/// The largest compressed chunk payload a reader accepts, as stored in the header.
///
/// Slightly above [`CHUNK_UNCOMPRESSED_BYTES_MAX`]: gzip and the snappy framing format can
/// expand incompressible input by a small fraction (well under 1/64), and a chunk the writer
/// produced must always be readable.
pub const CHUNK_PAYLOAD_BYTES_MAX: usize =
    CHUNK_UNCOMPRESSED_BYTES_MAX + CHUNK_UNCOMPRESSED_BYTES_MAX / 64;
