//! `CheckpointError`: what is wrong with a checkpoint file, and where.

use std::path::PathBuf;

/// A checkpoint that cannot be written or read; names the file and, for bad contents, the
/// byte offset.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{} at byte {offset}: {reason}", path.display())]
    Corrupt { path: PathBuf, offset: u64, reason: String },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
}

impl CheckpointError {
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| Self::Io { path: path.to_path_buf(), source }
    }
}
