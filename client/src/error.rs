//! What a `MasterClient` call can end in besides success, split so a caller can act on it.

use std::time::Duration;

/// Metadata key naming which FAILED_PRECONDITION a refusal is.
pub const REFUSAL_METADATA_KEY: &str = "x-raftrain-refusal";
/// The client already moved past this sequence number.
pub const REFUSAL_STALE_REQUEST: &str = "stale-request";
/// The slot is not held under the generation the request carries.
pub const REFUSAL_NOT_HOLDER: &str = "not-holder";
/// The stamp (client id and sequence number) already answered a request with another body.
pub const REFUSAL_STAMP_REUSED: &str = "stamp-reused";
/// The strangers' session pool is full for now (RESOURCE_EXHAUSTED): nothing changed, and the
/// same request may succeed later.
pub const REFUSAL_TRY_AGAIN_LATER: &str = "try-again-later";
/// No job has the name the request gave (NOT_FOUND): never submitted, or removed.
pub const REFUSAL_NO_SUCH_JOB: &str = "no-such-job";
/// The job was cancelled (FAILED_PRECONDITION): its members stop and exit 0.
pub const REFUSAL_JOB_CANCELLED: &str = "job-cancelled";
/// Refusal of a snapshot save while this master serves another (RESOURCE_EXHAUSTED): one save
/// at a time per master; try again once it ends.
pub const REFUSAL_SAVE_BUSY: &str = "save-busy";
/// The group cannot take finished receipts with an ask yet (FAILED_PRECONDITION: its feature
/// level is below the hand-off's): nothing was applied; report them and ask on their own.
pub const REFUSAL_HAND_OFF_UNSUPPORTED: &str = "hand-off-unsupported";
/// Metadata key of a `try-again-later` refusal: in how many milliseconds a place frees up.
pub const RETRY_AFTER_MS_METADATA_KEY: &str = "x-raftrain-retry-after-ms";

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no master addresses given (--masters is empty)")]
    NoMasters,
    #[error("master address {addr:?} is not valid: {reason}")]
    BadAddress { addr: String, reason: String },
    /// The request is wrong (INVALID_ARGUMENT): fix it; retrying changes nothing.
    #[error("{call}: the master refused the request: {message}")]
    InvalidArgument { call: &'static str, message: String },
    /// A slot generation that is not current (FAILED_PRECONDITION from a slot call): another
    /// pserver holds the slot now, or it was released. A pserver must stop serving it.
    #[error("{call}: not the slot's holder: {message}")]
    NotHolder { call: &'static str, message: String },
    /// The master does not know the trainer (NOT_FOUND): register again.
    #[error("{call}: unknown trainer; register again")]
    UnknownTrainer { call: &'static str },
    /// This client already moved past the request (a bug in the caller's use of the client).
    #[error("{call}: {message}")]
    StaleRequest { call: &'static str, message: String },
    /// The stamp already answered another request (FAILED_PRECONDITION, `stamp-reused`): a
    /// caller that reused a sequence number for a new request, or a forgery. Nothing changed.
    #[error("{call}: {message}")]
    StampReused { call: &'static str, message: String },
    /// Every session for clients the masters do not know as a trainer or pserver is in use
    /// (RESOURCE_EXHAUSTED, `try-again-later`), and the call's deadline came before a place
    /// did. Nothing changed; the same call may succeed later.
    #[error("{call}: {message}")]
    TryAgainLater { call: &'static str, message: String },
    /// No job has the name the call gave (NOT_FOUND, `no-such-job`): never submitted, or
    /// ended and removed.
    #[error("{call}: {message}")]
    NoSuchJob { call: &'static str, message: String },
    /// The job was cancelled (FAILED_PRECONDITION, `job-cancelled`): its trainers and
    /// pservers stop and exit 0.
    #[error("{call}: the job was cancelled")]
    JobCancelled { call: &'static str },
    /// The group cannot take finished receipts with an ask yet (FAILED_PRECONDITION,
    /// `hand-off-unsupported`): nothing was applied. `finished_then_get_task` reports them
    /// on their own then.
    #[error("{call}: {message}")]
    HandOffUnsupported { call: &'static str, message: String },
    /// The connection failed below gRPC (no status came from a master): most often TLS or
    /// the token configured differently here and there.
    #[error("{call}: the connection to the master failed: {message} ({hint})")]
    Connection { call: &'static str, message: String, hint: &'static str },
    /// Any other answer that retrying will not fix.
    #[error("{call} rejected by the master: {message} ({code:?})")]
    Rejected { call: &'static str, code: tonic::Code, message: String },
    /// The master answered something this client cannot read (a different version, a bug).
    #[error("{call}: malformed answer from the master: {reason}")]
    Malformed { call: &'static str, reason: String },
    /// No leader answered within the call's deadline. A write may or may not have been
    /// applied: callers must treat the outcome as unknown.
    #[error("{call}: no master leader answered within {deadline:?} ({attempts} attempts; last error: {last_error})")]
    Deadline { call: &'static str, deadline: Duration, attempts: u32, last_error: String },
}

impl ClientError {
    /// The error for a status that retrying will not fix.
    pub(crate) fn from_status(call: &'static str, status: &tonic::Status) -> Self {
        let message = without_call(call, status.message());
        if let Some(source) = std::error::Error::source(status) {
            return Self::Connection { call, message, hint: connection_hint(source) };
        }
        let refusal = status.metadata().get(REFUSAL_METADATA_KEY).and_then(|v| v.to_str().ok());
        match (status.code(), refusal) {
            (tonic::Code::InvalidArgument, _) => Self::InvalidArgument { call, message },
            (tonic::Code::NotFound, Some(REFUSAL_NO_SUCH_JOB)) => Self::NoSuchJob { call, message },
            (tonic::Code::NotFound, _) => Self::UnknownTrainer { call },
            (tonic::Code::FailedPrecondition, Some(REFUSAL_JOB_CANCELLED)) => {
                Self::JobCancelled { call }
            }
            (tonic::Code::FailedPrecondition, Some(REFUSAL_STALE_REQUEST)) => {
                Self::StaleRequest { call, message }
            }
            (tonic::Code::FailedPrecondition, Some(REFUSAL_STAMP_REUSED)) => {
                Self::StampReused { call, message }
            }
            (tonic::Code::FailedPrecondition, Some(REFUSAL_HAND_OFF_UNSUPPORTED)) => {
                Self::HandOffUnsupported { call, message }
            }
            (tonic::Code::FailedPrecondition, Some(REFUSAL_NOT_HOLDER)) => {
                Self::NotHolder { call, message }
            }
            (tonic::Code::ResourceExhausted, Some(REFUSAL_SAVE_BUSY)) => {
                Self::TryAgainLater { call, message }
            }
            (tonic::Code::ResourceExhausted, Some(REFUSAL_TRY_AGAIN_LATER)) => {
                Self::TryAgainLater { call, message }
            }
            (code, _) => Self::Rejected { call, code, message },
        }
    }
}

/// The master's message without the call's name in front, which the masters' refusals begin
/// with and every variant above names already (`RestoreJob: RestoreJob: ...` otherwise).
fn without_call(call: &str, message: &str) -> String {
    let named = message.strip_prefix(call).and_then(|rest| rest.strip_prefix(": "));
    named.unwrap_or(message).to_string()
}

/// What to check after a connection-level failure whose cause is `source`.
fn connection_hint(source: &(dyn std::error::Error + 'static)) -> &'static str {
    let mut cause = Some(source);
    while let Some(error) = cause {
        if error.to_string().contains("tcp connect error") {
            return "is a master running at this address?";
        }
        cause = error.source();
    }
    "check that this client's --tls-ca, --tls-cert, --tls-key and --token-file match the \
     masters': a TLS server closes plain connections, and a server that demands a client \
     certificate closes connections without one"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: tonic::Code, message: &str, refusal: &'static str) -> tonic::Status {
        let mut status = tonic::Status::new(code, message);
        status.metadata_mut().insert(REFUSAL_METADATA_KEY, refusal.parse().expect("ascii"));
        status
    }

    /// The masters begin a refusal with the call's name, which the error names already: said
    /// once, not twice.
    #[test]
    fn a_refusal_names_its_call_once() {
        let status =
            refused(tonic::Code::NotFound, "RestoreJob: no job named \"a\"", REFUSAL_NO_SUCH_JOB);
        let error = ClientError::from_status("RestoreJob", &status);
        assert_eq!(error.to_string(), "RestoreJob: no job named \"a\"");
        let status = refused(tonic::Code::FailedPrecondition, "slot held", REFUSAL_NOT_HOLDER);
        let error = ClientError::from_status("SlotHeartbeat", &status);
        assert_eq!(error.to_string(), "SlotHeartbeat: not the slot's holder: slot held");
    }
}
