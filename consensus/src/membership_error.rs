//! `MembershipError`: why a membership change did not happen, each reason naming the member,
//! the address or the bound involved.

use std::time::Duration;

use crate::WriteError;

/// A membership change refused or not finished.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    /// Not the leader, no quorum, a timeout, or a stopped core (see [`WriteError`]).
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("member id 0 is not allowed: give an id of 1 or more")]
    ZeroId,
    #[error(
        "member {id} is already in the group at {addr}: remove it first to give it another address"
    )]
    IdTaken { id: u64, addr: String },
    #[error("address {addr} is already member {id}'s: two members cannot share an address")]
    AddrTaken { addr: String, id: u64 },
    #[error(
        "this group dials its members at their --peer-addrs entry, and member {id} has none: \
         list it in every master's --peer-addrs first (or run the group without --peer-listen)"
    )]
    PeerAddrs { id: u64 },
    #[error("the member address is {bytes} bytes; at most {bytes_max} are allowed")]
    AddrTooLong { bytes: usize, bytes_max: usize },
    #[error("the group has {members_max} members, as many as it may: remove one first")]
    TooMany { members_max: usize },
    #[error("{id} is not a member of the group")]
    NotMember { id: u64 },
    #[error("member {id} is the last voter: a group needs one")]
    LastVoter { id: u64 },
    #[error(
        "learner {id} did not catch up within {bound:?}: it holds the log to {matched:?}, the \
         leader's was at {index} when asked; try again (or look at its logs)"
    )]
    NotCaughtUp { id: u64, matched: Option<u64>, index: u64, bound: Duration },
    #[error("another membership change is under way ({reason}); try again once it ends")]
    InProgress { reason: String },
    #[error("the membership change was refused: {reason}")]
    Refused { reason: String },
    /// A leader asked to remove itself handed leadership to `to`: ask it.
    #[error("this leader handed leadership to member {to} before its removal: ask it to remove this one")]
    HandedOff { to: u64, addr: Option<String> },
    #[error("this leader could not hand leadership off before its removal: {reason}")]
    HandOffFailed { reason: String },
}
