//! Every Rust error the extension meets becomes one Python exception of `raftrain.errors`,
//! chosen by its gRPC status name and carrying the message (the server's, for an answer from a
//! master or pserver). `guarded` is the boundary every Python-facing function goes through: a
//! panic becomes `raftrain.Internal`, never an unwind into Python.

use std::panic::{catch_unwind, AssertUnwindSafe};

use client::pserver::PServerClientError;
use client::ClientError;
use pyo3::prelude::*;
use storage::recordio::RecordIoError;

/// An error on its way to Python: a gRPC status name (`raftrain.errors.CODES` picks the
/// class) and the message.
#[derive(Debug, Clone)]
pub struct Failure {
    code: &'static str,
    message: String,
    /// Whose fault unusable data is (`content`, `local`): set on `DATA_LOSS` only.
    fault: Option<&'static str>,
}

impl Failure {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), fault: None }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new("INVALID_ARGUMENT", message)
    }

    /// Unusable data (RecordIO, a record that is no `Example`), and whose fault it is.
    pub fn data(message: impl Into<String>, fault: client::Fault) -> Self {
        let fault = match fault {
            client::Fault::Content => "content",
            client::Fault::Local => "local",
        };
        Self { code: "DATA_LOSS", message: message.into(), fault: Some(fault) }
    }
}

impl From<Failure> for PyErr {
    fn from(failure: Failure) -> PyErr {
        Python::attach(|py| {
            let made = py
                .import("raftrain.errors")
                .and_then(|errors| errors.getattr("from_native"))
                .and_then(|make| make.call1((failure.code, &failure.message, failure.fault)));
            match made {
                Ok(exception) => PyErr::from_value(exception),
                Err(error) => error,
            }
        })
    }
}

impl From<ClientError> for Failure {
    fn from(error: ClientError) -> Self {
        let code = match &error {
            ClientError::NoMasters
            | ClientError::BadAddress { .. }
            | ClientError::InvalidArgument { .. } => "INVALID_ARGUMENT",
            ClientError::NotHolder { .. }
            | ClientError::StaleRequest { .. }
            | ClientError::StampReused { .. }
            | ClientError::HandOffUnsupported { .. }
            | ClientError::JobCancelled { .. } => "FAILED_PRECONDITION",
            ClientError::UnknownTrainer { .. } | ClientError::NoSuchJob { .. } => "NOT_FOUND",
            ClientError::TryAgainLater { .. } => "RESOURCE_EXHAUSTED",
            ClientError::Connection { .. } => "UNAVAILABLE",
            ClientError::Rejected { code, .. } => code_name(*code),
            ClientError::Malformed { .. } => "INTERNAL",
            ClientError::Deadline { .. } => "DEADLINE_EXCEEDED",
        };
        Self::new(code, error.to_string())
    }
}

impl From<PServerClientError> for Failure {
    fn from(error: PServerClientError) -> Self {
        let code = match &error {
            PServerClientError::Master(inner) => return Self::from_client(inner, &error),
            PServerClientError::Refused { .. } | PServerClientError::NotInLayout { .. } => {
                "INVALID_ARGUMENT"
            }
            PServerClientError::NotFiniteResult { .. }
            | PServerClientError::ModelRestored { .. }
            | PServerClientError::LayoutMismatch(_)
            | PServerClientError::NothingToReinit { .. }
            | PServerClientError::NotServing { .. } => "FAILED_PRECONDITION",
            PServerClientError::Unavailable { .. } | PServerClientError::SlotsNotHeld { .. } => {
                "UNAVAILABLE"
            }
            PServerClientError::OutcomeUnknown { .. } => "DEADLINE_EXCEEDED",
            PServerClientError::NoSuchJob { .. } => "NOT_FOUND",
        };
        Self::new(code, error.to_string())
    }
}

impl Failure {
    /// A master's error inside another error: the master's code, the outer message.
    fn from_client(inner: &ClientError, outer: &PServerClientError) -> Self {
        let code = match inner {
            ClientError::Rejected { code, .. } => code_name(*code),
            ClientError::Deadline { .. } => "DEADLINE_EXCEEDED",
            ClientError::Connection { .. } => "UNAVAILABLE",
            ClientError::InvalidArgument { .. } | ClientError::BadAddress { .. } => {
                "INVALID_ARGUMENT"
            }
            _ => "FAILED_PRECONDITION",
        };
        Self::new(code, outer.to_string())
    }
}

impl From<RecordIoError> for Failure {
    fn from(error: RecordIoError) -> Self {
        Self::data(error.to_string(), client::chunk_fault(&error))
    }
}

impl From<platform::security::SecurityError> for Failure {
    fn from(error: platform::security::SecurityError) -> Self {
        Self::invalid(error.to_string())
    }
}

/// The status name gRPC gives `code` (what `raftrain.errors.CODES` is keyed by).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Runs `body`, turning a panic into `raftrain.Internal` naming `call`.
pub fn guarded<T>(call: &'static str, body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result,
        Err(panic) => {
            let reason = panic
                .downcast_ref::<&str>()
                .map(|reason| reason.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_string());
            Err(Failure::new(
                "INTERNAL",
                format!("{call}: a bug in raftrain's extension: {reason}"),
            )
            .into())
        }
    }
}
