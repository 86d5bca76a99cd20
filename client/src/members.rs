//! `MasterClient::members` and `change_member`: the wire contract of `raftrain member`, the
//! group's membership as its leader sees it and one change of it at a time.

use std::time::Duration;

use proto::master as pb;

use crate::master_client::timed;
use crate::{ClientError, MasterClient};

/// One attempt of a membership change: a promotion waits for its learner to catch up.
pub const MEMBER_CHANGE_RPC_MS: u64 = 90_000;

/// One member as the leader sees it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MemberRow {
    pub id: u64,
    pub addr: String,
    /// A voter counts in quorums; a learner only receives the log.
    pub voter: bool,
    /// The last log index the leader knows it holds (`None`: not known yet).
    pub matched: Option<u64>,
    /// How many entries of the leader's log it lacks.
    pub lag: Option<u64>,
}

/// The group's membership, from its leader.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Membership {
    pub leader_id: u64,
    pub term: u64,
    pub last_log_index: u64,
    /// The index of the entry that set this membership.
    pub membership_index: u64,
    /// A change is half done (old and new voters both decide).
    pub joint: bool,
    pub members: Vec<MemberRow>,
}

/// One membership change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberChange {
    /// Member `id` at `addr` joins as a learner.
    Add { id: u64, addr: String },
    /// Learner `id` becomes a voter once it caught up.
    Promote { id: u64 },
    /// Member `id` leaves.
    Remove { id: u64 },
}

impl MasterClient {
    /// The members, their roles and how far each has the log.
    pub async fn members(&self) -> Result<Membership, ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .call("Members", |mut service| async move {
                service.members(timed(pb::MembersRequest {}, timeout)).await
            })
            .await?;
        Ok(membership(reply))
    }

    /// Makes one membership change at the leader and returns the membership after it.
    pub async fn change_member(&self, change: &MemberChange) -> Result<Membership, ClientError> {
        let request = match change {
            MemberChange::Add { id, addr } => (pb::MemberAction::Add, *id, addr.clone()),
            MemberChange::Promote { id } => (pb::MemberAction::Promote, *id, String::new()),
            MemberChange::Remove { id } => (pb::MemberAction::Remove, *id, String::new()),
        };
        let (action, id, addr) = request;
        let timeout = Duration::from_millis(MEMBER_CHANGE_RPC_MS);
        let reply = self
            .call("ChangeMember", |mut service| {
                let request =
                    pb::ChangeMemberRequest { action: action.into(), id, addr: addr.clone() };
                async move { service.change_member(timed(request, timeout)).await }
            })
            .await?;
        Ok(membership(reply))
    }
}

fn membership(reply: pb::MembersReply) -> Membership {
    let members = reply
        .members
        .into_iter()
        .map(|row| MemberRow {
            id: row.id,
            addr: row.addr,
            voter: row.voter,
            matched: row.matched_known.then_some(row.matched),
            lag: row.matched_known.then_some(row.lag),
        })
        .collect();
    Membership {
        leader_id: reply.leader_id,
        term: reply.term,
        last_log_index: reply.last_log_index,
        membership_index: reply.membership_index,
        joint: reply.joint,
        members,
    }
}
