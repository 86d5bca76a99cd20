//! Why a `TimeoutNow` of a leadership handoff started no election: the follower's refusal
//! ([`TimeoutNowRefusal`]) and, on the leader's side, why the request failed however it
//! travelled ([`TimeoutNowError`]).

use openraft::ServerState;

/// Why a follower refuses a `TimeoutNow` (see `handoff::TimeoutNowGate`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimeoutNowRefusal {
    /// Only a follower campaigns on a leader's word.
    #[error("this member is {state:?}, not a follower")]
    NotFollower { state: ServerState },
    /// The request's term is not the one this member is in.
    #[error("term {request_term} is not this member's term {own_term}")]
    WrongTerm { request_term: u64, own_term: u64 },
    /// The sender is not the leader this member follows.
    #[error("member {sender} is not the leader this member follows ({followed:?})")]
    NotFollowedLeader { sender: u64, followed: Option<u64> },
    /// One handoff per term: this member already campaigned after one in `term`.
    #[error("already campaigned after a handoff in term {term}")]
    AlreadyCampaigned { term: u64 },
    /// The Raft core stopped, so it cannot campaign.
    #[error("the Raft core stopped: {fatal}")]
    CoreStopped { fatal: String },
}

/// Why a `TimeoutNow` sent to a follower did not start its campaign.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimeoutNowError {
    /// The follower answered with a refusal. Over gRPC it arrives as the refusal's text: the
    /// wire carries a result whose error is a string, which every version of the Raft service
    /// understands.
    #[error("{reason}")]
    Refused { reason: String },
    /// The request could not be encoded or dialled.
    #[error("{reason}")]
    NotSent { reason: String },
    /// The follower cannot be reached (cut off, paused, gone).
    #[error("{reason}")]
    Unreachable { reason: String },
    /// No answer within the RPC's own deadline.
    #[error("no answer from {addr} in {timeout_ms} ms")]
    NoAnswer { addr: String, timeout_ms: u64 },
    /// The Raft service answered with an error status.
    #[error("{addr} answered {status}")]
    Status { addr: String, status: String },
    /// The answer arrived but does not decode as the wire's result (an error as a string).
    #[error("the answer of {addr} does not decode: {error}")]
    Undecodable { addr: String, error: String },
}

impl From<TimeoutNowRefusal> for TimeoutNowError {
    fn from(refusal: TimeoutNowRefusal) -> Self {
        Self::Refused { reason: refusal.to_string() }
    }
}
