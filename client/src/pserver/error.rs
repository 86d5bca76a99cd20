//! What a `PServerClient` call can end in besides success.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum PServerClientError {
    /// The request is wrong (a bad block, a layout the pservers refuse): retrying changes
    /// nothing.
    #[error("pserver slot {slot} refused the request: {message}")]
    Refused { slot: u32, message: String },
    /// The push would have left a parameter that is not finite (its gradients, though finite,
    /// overflow it): refused whole by that slot. The model diverges.
    #[error("pserver slot {slot} refused a push that would overflow a parameter: {message}")]
    NotFiniteResult { slot: u32, message: String },
    /// The push was computed on values a restore with the model has replaced since (pulled
    /// before the slot reloaded): refused, never applied. Pull, and push what is computed on
    /// the restored model.
    #[error("pserver slot {slot} refused a gradient of a model a restore replaced: {message}")]
    ModelRestored { slot: u32, message: String },
    /// No holder of the slot answered within the wait.
    #[error(
        "pserver slot {slot}: no holder answered within {waited:?} (last error: {last_error})"
    )]
    Unavailable { slot: u32, waited: Duration, last_error: String },
    /// The masters know no job by this client's job name (never submitted, or ended and
    /// removed) at the end of the wait.
    #[error("job `{job}` does not exist: the masters know no job by that name after {waited:?} (submit it with `raftrain job submit`, or check --job)")]
    NoSuchJob { job: String, waited: Duration },
    /// Not every pserver slot of the job was held within the wait.
    #[error("only {held} of {desired} pserver slots are held after {waited:?}: start the missing pservers (raftrain pserver --num-pservers {desired})")]
    SlotsNotHeld { held: usize, desired: u32, waited: Duration },
    /// A push that may or may not have been applied (the pserver did not answer in time but
    /// may have applied it). Never retried: a gradient is applied at most once.
    #[error("pserver slot {slot}: the push's outcome is unknown: {message}")]
    OutcomeUnknown { slot: u32, message: String },
    /// The tensors given do not fit the job's layout (a name it does not have, another
    /// element count): nothing was sent.
    #[error("the tensors do not fit the job's layout: {message}")]
    NotInLayout { message: String },
    /// Every slot is held but none serves a model yet: no trainer initialized the pservers
    /// within the wait.
    #[error("the job's pservers serve no model after {waited:?}: a trainer initializes them (init(params)) first")]
    NotServing { waited: Duration },
    /// The pservers were initialized with another layout than this trainer's.
    #[error("the pservers serve a different layout: {0}")]
    LayoutMismatch(String),
    /// A replaced pserver without a checkpoint needs initial values this client never had.
    #[error("pserver slot {slot} lost its shard and this client holds no values to re-initialize it: pull or init first")]
    NothingToReinit { slot: u32 },
    #[error(transparent)]
    Master(#[from] crate::ClientError),
}
