//! What one attempt of a pserver call ended in, for the retry loop: which gRPC answers wait
//! for the slot table and try again (another holder, a lost lease, a connection gone, a call
//! cut off before the server could act), and which end the call with a `PServerClientError`.

use tonic::{Code, Status};

use super::error::PServerClientError;
use super::refusal::refusal_of;

/// What went wrong with one attempt, for the retry loop.
pub(super) enum Failure {
    Retry(String),
    NotInitialized,
    Fatal(PServerClientError),
}

/// Which failures wait for the table and try again, and which end the call.
pub(super) fn classify(slot: u32, idempotent: bool, status: &Status) -> Failure {
    let message = status.message().to_string();
    match (status.code(), refusal_of(status)) {
        (Code::FailedPrecondition, Some("not-initialized")) => Failure::NotInitialized,
        (_, Some("not-finite-result")) => {
            Failure::Fatal(PServerClientError::NotFiniteResult { slot, message })
        }
        (_, Some("model-restored")) => {
            Failure::Fatal(PServerClientError::ModelRestored { slot, message })
        }
        // Refused before anything was touched: another holder, this one lost its lease, or it
        // is shutting down and hands the slot on.
        (Code::FailedPrecondition, Some("wrong-generation"))
        | (_, Some("lease-lost" | "lease-unconfirmed" | "leaving")) => Failure::Retry(message),
        // Connection refused or reset: the holder is gone; its state goes with it.
        (Code::Unavailable, _) => Failure::Retry(message),
        // The server had no room for the request under its --request-bytes-in-flight budget:
        // refused before any service saw it, so nothing was applied.
        (Code::ResourceExhausted, _) => Failure::Retry(message),
        // Dropped unsent from a connection that closed, or refused by the server's GOAWAY (a
        // pserver handing its slot over, a standby handing its port over): the server acted
        // on none of it, whatever code tonic gave it.
        _ if crate::never_sent(status) => Failure::Retry(message),
        // Cut off mid-flight: the server may or may not have acted on it. That includes an
        // HTTP/2 error this side's transport met (a connection a standby handed over broke
        // off), which tonic reports as INTERNAL with the h2 error as its source; the server's
        // own INTERNAL answer carries no source.
        (Code::DeadlineExceeded | Code::Cancelled | Code::Unknown, _) if idempotent => {
            Failure::Retry(message)
        }
        (Code::Internal, _) if idempotent && std::error::Error::source(status).is_some() => {
            Failure::Retry(message)
        }
        (Code::DeadlineExceeded | Code::Cancelled | Code::Unknown, _) => {
            Failure::Fatal(PServerClientError::OutcomeUnknown { slot, message })
        }
        (Code::Internal, _) if std::error::Error::source(status).is_some() => {
            Failure::Fatal(PServerClientError::OutcomeUnknown { slot, message })
        }
        _ => Failure::Fatal(PServerClientError::Refused { slot, message }),
    }
}

pub(super) fn fatal(slot: u32, failure: Failure) -> PServerClientError {
    match failure {
        Failure::Fatal(error) => error,
        Failure::NotInitialized => {
            PServerClientError::Refused { slot, message: "not initialized".into() }
        }
        Failure::Retry(message) => PServerClientError::Refused { slot, message },
    }
}
