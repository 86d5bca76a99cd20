//! The one mapping from pserver errors to gRPC statuses. Refusals a client acts on carry the
//! metadata entry `x-raftrain-refusal` (`wrong-generation`, `lease-lost`, `lease-unconfirmed`, `leaving`,
//! `not-initialized`, `not-initializer`, `model-restored`), so clients match on it rather than on message text
//! (the key and its reader are the client's: `client::pserver::refusal`).

use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

use crate::held_slot::FenceError;
use crate::shard_error::ShardError;

pub use client::pserver::refusal::{refusal_of, REFUSAL_KEY};

impl From<FenceError> for Status {
    fn from(error: FenceError) -> Self {
        match error {
            FenceError::WrongGeneration { .. } => {
                refusal(Code::FailedPrecondition, "wrong-generation", &error)
            }
            FenceError::LeaseLost { .. } => refusal(Code::Unavailable, "lease-lost", &error),
            FenceError::LeaseUnconfirmed { .. } => {
                refusal(Code::Unavailable, "lease-unconfirmed", &error)
            }
            FenceError::Leaving { .. } => refusal(Code::Unavailable, "leaving", &error),
        }
    }
}

impl From<ShardError> for Status {
    fn from(error: ShardError) -> Self {
        match error {
            ShardError::NotReady => refusal(Code::FailedPrecondition, "not-initialized", &error),
            ShardError::NotFiniteResult { .. } => {
                refusal(Code::InvalidArgument, "not-finite-result", &error)
            }
            ShardError::NotInitializer { .. } => {
                refusal(Code::FailedPrecondition, "not-initializer", &error)
            }
            ShardError::ModelRestored { .. } => {
                refusal(Code::FailedPrecondition, "model-restored", &error)
            }
            _ => Status::invalid_argument(error.to_string()),
        }
    }
}

fn refusal(code: Code, kind: &'static str, error: &dyn std::fmt::Display) -> Status {
    let mut status = Status::new(code, error.to_string());
    status.metadata_mut().insert(REFUSAL_KEY, MetadataValue::from_static(kind));
    status
}
