//! The refusal kinds a pserver puts on a status for clients to act on: the metadata entry
//! `x-raftrain-refusal` (`wrong-generation`, `lease-lost`, `lease-unconfirmed`, `leaving`,
//! `not-initialized`, `not-initializer`, `not-finite-result`, `model-restored`), so clients
//! match on it rather than on message text. The pserver's `status_mapping.rs` sets them.

use tonic::Status;

/// The metadata key naming why a request was refused.
pub const REFUSAL_KEY: &str = "x-raftrain-refusal";

/// The refusal kind a status carries, if any.
pub fn refusal_of(status: &Status) -> Option<&str> {
    status.metadata().get(REFUSAL_KEY).and_then(|value| value.to_str().ok())
}
