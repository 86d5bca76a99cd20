//! `chunk_fault`: whose fault a chunk that cannot be read is, as a trainer reports it with
//! `TaskFailed`. The master scanned every chunk header when it accepted the dataset, so bytes
//! a trainer cannot reach (an I/O error, a file now shorter than the recorded chunk, a header
//! that no longer matches the scan) are that trainer's view of the data: another trainer may
//! read them. Bytes that are there but wrong (a CRC, a payload that does not decompress, a
//! record that overruns its chunk) would fail any trainer: the data's fault. The Rust trainer
//! and the Python package classify alike through this one function.

use storage::recordio::{ErrorKind, RecordIoError};

use crate::Fault;

/// The fault of a chunk read that failed with `error`.
pub fn chunk_fault(error: &RecordIoError) -> Fault {
    match error.kind {
        ErrorKind::Io(_)
        | ErrorKind::TruncatedHeader { .. }
        | ErrorKind::TruncatedPayload { .. }
        | ErrorKind::IndexMismatch { .. }
        | ErrorKind::NoMatch { .. }
        | ErrorKind::Directory { .. }
        | ErrorKind::DirectoryLoop { .. }
        | ErrorKind::TooDeep { .. }
        | ErrorKind::RangeOutOfBounds { .. } => Fault::Local,
        ErrorKind::BadMagic { .. }
        | ErrorKind::ChecksumMismatch { .. }
        | ErrorKind::UnknownCompressor { .. }
        | ErrorKind::RecordOverrun { .. }
        | ErrorKind::RecordCountMismatch { .. }
        | ErrorKind::ChunkTooLarge { .. }
        | ErrorKind::Decompress(_)
        | ErrorKind::BadPattern { .. } => Fault::Content,
    }
}
