//! Why a leadership handoff ended without another member leading ([`HandoffFailure`]); the
//! followers then elect one on their own.

use std::time::Duration;

use crate::timeout_now_error::TimeoutNowError;

/// Why a handoff failed; `Display` is the sentence the master logs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HandoffFailure {
    /// Writes proposed before the node began leaving did not reach the log within the bound.
    #[error("writes still in flight after {bound:?}")]
    WritesInFlight { bound: Duration },
    /// No follower had the whole log within the bound.
    #[error("no follower caught up within {bound:?}: {waited}")]
    NoFollowerCaughtUp { bound: Duration, waited: WaitEnded },
    /// The caught-up follower has no address in the membership to send `TimeoutNow` to.
    #[error("member {member} has no address in the membership")]
    NoAddress { member: u64 },
    /// The follower refused `TimeoutNow`, or it did not reach it.
    #[error("member {member} refused: {error}")]
    Refused { member: u64, error: TimeoutNowError },
    /// The follower did not answer within what was left of the bound.
    #[error("member {member} did not answer within {bound:?}")]
    NoAnswer { member: u64, bound: Duration },
    /// The follower was asked, but no other member led within the bound.
    #[error("no new leader within {bound:?}: {waited}")]
    NoNewLeader { bound: Duration, waited: WaitEnded },
}

/// Why a wait on the Raft metrics ended before its condition held: openraft's `WaitError`,
/// which is neither `Clone` nor `PartialEq`, in its own words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WaitEnded {
    /// The condition did not hold within `waited`.
    #[error("timeout after {waited:?} when {condition}")]
    Timeout { waited: Duration, condition: String },
    /// The Raft core is stopping.
    #[error("raft is shutting down")]
    ShuttingDown,
}

impl From<openraft::metrics::WaitError> for WaitEnded {
    fn from(error: openraft::metrics::WaitError) -> Self {
        match error {
            openraft::metrics::WaitError::Timeout(waited, condition) => {
                Self::Timeout { waited, condition }
            }
            openraft::metrics::WaitError::ShuttingDown => Self::ShuttingDown,
        }
    }
}
