//! Why an entry of the Raft log will never be durable on this node ([`DurabilityError`]), and
//! the failed flush behind it ([`FlushFailure`]).

use std::io;

/// A flush of the log failed: nothing more becomes durable, and the node must stop.
/// `io::Error` is neither `Clone` nor `PartialEq`, and every waiter gets its own copy, so its
/// kind and text are kept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FlushFailure {
    /// What the flush or the fsync failed with.
    pub kind: io::ErrorKind,
    /// The error's own text.
    pub message: String,
}

impl From<&io::Error> for FlushFailure {
    fn from(error: &io::Error) -> Self {
        Self { kind: error.kind(), message: error.to_string() }
    }
}

/// Why a waiter of the durable log will never see its entry durable (see `durable_log`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurabilityError {
    /// A flush failed.
    #[error("the log cannot be made durable: {0}")]
    FlushFailed(FlushFailure),
    /// Every writer is gone (the store closed) before the entry was flushed.
    #[error("the log store is closed")]
    Closed,
}
