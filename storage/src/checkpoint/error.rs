//! `CheckpointError`: what is wrong with a checkpoint file, and where.

use std::path::PathBuf;

/// A checkpoint that cannot be written or read; names the file and, for bad contents, the
/// byte offset.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The I/O error is shown in the message, not chained as a source, so a report of the
    /// whole chain (`{:#}`) does not print it twice.
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{} at byte {offset}: {reason}", path.display())]
    Corrupt { path: PathBuf, offset: u64, reason: String },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    /// A checkpoint of this slot, step and generation is already on disk: checkpoint files
    /// are never replaced (a master may have recorded it, with its crc), so the writer must
    /// move to a step of its own.
    #[error("{}: a checkpoint with this name already exists; it is never replaced", path.display())]
    Exists { path: PathBuf },
}

impl CheckpointError {
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |error| Self::Io { path: path.to_path_buf(), error }
    }
}
