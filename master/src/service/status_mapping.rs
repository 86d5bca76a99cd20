//! The one mapping from master outcomes to gRPC statuses. "Not the leader" is `UNAVAILABLE`
//! with the leader's address in `x-raftrain-leader`, which `MasterClient` follows.

use crate::state::Response;
use client::{
    LEADER_METADATA_KEY, REFUSAL_JOB_CANCELLED, REFUSAL_METADATA_KEY, REFUSAL_NOT_HOLDER,
    REFUSAL_NO_SUCH_JOB, REFUSAL_STALE_REQUEST, REFUSAL_STAMP_REUSED, REFUSAL_TRY_AGAIN_LATER,
    RETRY_AFTER_MS_METADATA_KEY,
};
use consensus::WriteError;
use tonic::metadata::MetadataValue;
use tonic::Status;

/// A write or linearizable read that did not happen on this node.
pub(crate) fn write_error(error: WriteError) -> Status {
    match &error {
        WriteError::ForwardToLeader { leader_addr, .. } => not_leader(leader_addr.as_deref()),
        WriteError::CommandTooLarge { .. } => Status::invalid_argument(error.to_string()),
        // The outcome is unknown or no quorum is reachable: the client retries (with the same
        // stamp, so a write that did commit is not applied twice).
        WriteError::Timeout { .. } | WriteError::NoQuorum { .. } | WriteError::Stopped { .. } => {
            Status::unavailable(error.to_string())
        }
    }
}

/// `UNAVAILABLE`, with the leader's address when one is known.
pub(crate) fn not_leader(leader_addr: Option<&str>) -> Status {
    let message = match leader_addr {
        Some(addr) => format!("this master is not the leader; the leader is {addr}"),
        None => "this master is not the leader and no leader is known yet".to_string(),
    };
    let mut status = Status::unavailable(message);
    if let Some(value) = leader_addr.and_then(|addr| MetadataValue::try_from(addr).ok()) {
        status.metadata_mut().insert(LEADER_METADATA_KEY, value);
    }
    status
}

/// A response that is not what the call can answer with: a person-actionable rejection, a
/// retry from the past, or (a bug) a response of another command.
pub(crate) fn unexpected(call: &'static str, response: Response) -> Status {
    match response {
        Response::Rejected { reason } => Status::invalid_argument(reason),
        Response::StaleRequest { last_seq } => refusal(
            Status::failed_precondition(format!(
                "{call}: this client already moved past the request (its last sequence number is {last_seq})"
            )),
            REFUSAL_STALE_REQUEST,
        ),
        Response::StampReused { seq } => refusal(
            Status::failed_precondition(format!(
                "{call}: this client's sequence number {seq} already answered a different \
                 request; a retry must repeat its request exactly and a new request needs a \
                 new sequence number"
            )),
            REFUSAL_STAMP_REUSED,
        ),
        Response::UnknownTrainer => {
            Status::not_found(format!("{call}: unknown trainer; register again"))
        }
        Response::SlotNotHeld => refusal(Status::failed_precondition(format!(
            "{call}: the slot is not held under this generation (another pserver holds it now, \
             or it was released); stop serving it"
        )), REFUSAL_NOT_HOLDER),
        Response::NoDataset => {
            Status::failed_precondition(format!("{call}: no dataset was reported yet"))
        }
        Response::TryAgainLater { retry_after_ms } => try_again_later(call, retry_after_ms),
        Response::NoSuchJob { job } => refusal(
            Status::not_found(format!(
                "{call}: no job named {job:?} (it was never submitted, or it ended and was \
                 removed); `raftrain job list` shows the group's jobs"
            )),
            REFUSAL_NO_SUCH_JOB,
        ),
        Response::JobCancelled => refusal(
            Status::failed_precondition(format!("{call}: the job was cancelled")),
            REFUSAL_JOB_CANCELLED,
        ),
        other => Status::internal(format!("{call}: unexpected answer from the state machine: {other:?}")),
    }
}

/// A slot call whose secret is not the one the slot's claim carried (or whose slot is not held
/// under its generation at all): the caller is not the holder, and nothing changed.
pub(crate) fn wrong_secret(call: &'static str) -> Status {
    refusal(
        Status::failed_precondition(format!(
            "{call}: the slot is not held under this generation with this secret (only the \
             pserver that claimed it knows the secret); nothing changed"
        )),
        REFUSAL_NOT_HOLDER,
    )
}

/// RESOURCE_EXHAUSTED, refusal `try-again-later`, with when a place frees up.
fn try_again_later(call: &'static str, retry_after_ms: u64) -> Status {
    let status = Status::resource_exhausted(format!(
        "{call}: too many clients: every session for clients that are neither a registered \
         trainer nor a pserver is in use by a client that may still retry; nothing changed, \
         try again in {} s",
        retry_after_ms.div_ceil(1000)
    ));
    let mut status = refusal(status, REFUSAL_TRY_AGAIN_LATER);
    status.metadata_mut().insert(RETRY_AFTER_MS_METADATA_KEY, MetadataValue::from(retry_after_ms));
    status
}

/// Marks a refusal (FAILED_PRECONDITION, RESOURCE_EXHAUSTED) with which one it is, for `MasterClient` to tell apart.
fn refusal(mut status: Status, kind: &'static str) -> Status {
    status.metadata_mut().insert(REFUSAL_METADATA_KEY, MetadataValue::from_static(kind));
    status
}
