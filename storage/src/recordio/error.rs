//! The error every RecordIO reader returns: what is wrong, in which file, at which byte.

use std::path::PathBuf;

/// A RecordIO failure, located: `path` is the file (or the pattern, for pattern errors) and
/// `offset` the byte offset in it of the chunk, or of the header, at fault.
#[derive(Debug, thiserror::Error)]
#[error("{}: byte {offset}: {kind}", path.display())]
pub struct RecordIoError {
    /// The file that failed, or the pattern for [`ErrorKind::NoMatch`],
    /// [`ErrorKind::Directory`] and [`ErrorKind::BadPattern`].
    pub path: PathBuf,
    /// The byte offset of the failing chunk or header; 0 when the error is not about bytes.
    pub offset: u64,
    /// What went wrong.
    pub kind: ErrorKind,
}

impl RecordIoError {
    /// Locates `kind` at byte `offset` of `path`.
    pub fn new(path: impl Into<PathBuf>, offset: u64, kind: ErrorKind) -> Self {
        RecordIoError { path: path.into(), offset, kind }
    }
}

/// What went wrong; each message says what it means for the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ErrorKind {
    /// The bytes where a chunk header should start are not the RecordIO magic number.
    ///
    /// `found` is left out of the message on purpose: messages travel to clients (a master
    /// scanning a reported dataset), and these are the first bytes of a file that may not be
    /// RecordIO at all, perhaps a secret. Every later header field is printed only after its
    /// header's magic matched, so a message never carries bytes of a file that is not RecordIO.
    #[error(
        "not a RecordIO chunk header: expected the magic number 0x01020304; not a RecordIO \
         file, or the file is corrupt here"
    )]
    BadMagic { found: u32 },
    /// The payload's CRC-32 differs from the one in its header.
    #[error(
        "chunk payload has CRC-32 {computed:#010x} but its header says {stored:#010x}: the chunk \
         is corrupt; restore the file or regenerate it"
    )]
    ChecksumMismatch { stored: u32, computed: u32 },
    /// The header names a compressor this format does not define.
    #[error(
        "unknown compressor code {code} (known: 0 none, 1 snappy, 2 gzip): the header is corrupt"
    )]
    UnknownCompressor { code: u32 },
    /// The file ends inside a chunk header.
    #[error(
        "truncated chunk header: only {available} of 20 bytes present; the file was cut short, \
         perhaps by an interrupted write"
    )]
    TruncatedHeader { available: u64 },
    /// The file ends inside a chunk payload.
    #[error(
        "truncated chunk payload: the header says {expected} bytes but only {available} are \
         present; the file was cut short, perhaps by an interrupted write"
    )]
    TruncatedPayload { expected: u64, available: u64 },
    /// A record (or its 4-byte length prefix) runs past the end of the uncompressed payload.
    #[error(
        "record {record} of the chunk needs {length} bytes but only {remaining} remain in the \
         payload: the chunk is corrupt"
    )]
    RecordOverrun { record: u32, length: u32, remaining: u64 },
    /// The payload holds a different number of records than the header says.
    #[error("the chunk header says {header} records but the payload holds {found}: the chunk is corrupt")]
    RecordCountMismatch { header: u32, found: u32 },
    /// A chunk payload, compressed or uncompressed, is bigger than readers accept.
    #[error(
        "chunk payload of {size} bytes exceeds the limit of {limit} bytes: the header is \
         corrupt, or the file was written with a larger chunk size than this reader allows"
    )]
    ChunkTooLarge { size: u64, limit: u64 },
    /// The compressed payload passed its CRC but does not decompress.
    #[error("cannot decompress the chunk payload: {0}")]
    Decompress(std::io::Error),
    /// Reading or seeking the file failed.
    #[error("I/O error: {0}")]
    Io(std::io::Error),
    /// A pattern matched no file.
    #[error("no file matches {pattern:?}; check the path and the working directory")]
    NoMatch { pattern: String },
    /// A pattern named a directory: its files are not taken unless named.
    #[error("{pattern:?} is a directory: name its files (all of them: \"{pattern}/*\")")]
    Directory { pattern: String },
    /// A `**` reached a directory it is already inside: a symbolic link loop, which `**`
    /// (following links) would walk for ever. `path` is where the loop closes.
    #[error(
        "{pattern:?}: `**` reached a directory it is already inside (a symbolic link loop); \
         refused rather than walked"
    )]
    DirectoryLoop { pattern: String },
    /// A `**` went deeper than [`super::GLOB_DEPTH_MAX`] directories.
    #[error(
        "{pattern:?}: `**` went deeper than {limit} directories (GLOB_DEPTH_MAX); name a \
         directory closer to the files"
    )]
    TooDeep { pattern: String, limit: usize },
    /// A pattern is not a valid glob.
    #[error("invalid glob pattern {pattern:?}: {reason}")]
    BadPattern { pattern: String, reason: String },
    /// A record range reaches past the end of the file.
    #[error(
        "records [{start}, {start}+{count}) are out of range: the file holds {record_count} \
         records"
    )]
    RangeOutOfBounds { start: u64, count: u64, record_count: u64 },
    /// A chunk header no longer matches what the index recorded for it.
    #[error(
        "the chunk header's {field} is {found} but the index recorded {indexed}: the file \
         changed after it was indexed"
    )]
    IndexMismatch { field: &'static str, indexed: u64, found: u64 },
}
