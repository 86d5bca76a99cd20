//! What a `MasterClient` call can end in besides success.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no master addresses given (--masters is empty)")]
    NoMasters,
    #[error("master address {addr:?} is not valid: {reason}")]
    BadAddress { addr: String, reason: String },
    /// The master answered with an error that retrying will not fix.
    #[error("{call} rejected by the master: {message} ({code:?})")]
    Rejected { call: &'static str, code: tonic::Code, message: String },
    /// No leader answered within the call's deadline. The write may or may not have been
    /// applied: callers must treat the outcome as unknown.
    #[error("{call}: no master leader answered within {deadline:?} ({attempts} attempts; last error: {last_error})")]
    Deadline { call: &'static str, deadline: Duration, attempts: u32, last_error: String },
}
