//! The membership RPCs (`raftrain member`): `Members` lists the group as the leader sees it;
//! `ChangeMember` adds a learner (after asking it who it is and what it decodes: a master
//! answering as another id, holding a log already (another group's, or a backup's), or
//! decoding less than the group's feature level, is refused before the group changes),
//! promotes one that caught up, or removes a member.

use std::time::Duration;

use consensus::{Members, MembershipError};
use proto::master as pb;
use proto::raft as pb_raft;
use tonic::Status;

use super::{MasterRpc, Reply};
use crate::service::status_mapping::{not_leader, write_error};

/// How long a promotion waits for its learner to catch up (a snapshot of the largest state
/// takes seconds to send); the client's attempt allows more (`client::MEMBER_CHANGE_RPC_MS`).
const PROMOTE_CATCH_UP_MS: u64 = 60_000;
/// How long a leader asked to remove itself may take to hand off first.
const HAND_OFF_MS: u64 = 3_000;

const _: () = assert!(PROMOTE_CATCH_UP_MS + 10_000 < client::MEMBER_CHANGE_RPC_MS);

pub(super) async fn members(
    rpc: &MasterRpc,
    _request: tonic::Request<pb::MembersRequest>,
) -> Reply<pb::MembersReply> {
    let members = rpc.node.members().map_err(write_error)?;
    Ok(tonic::Response::new(members_reply(&members)))
}

pub(super) async fn change_member(
    rpc: &MasterRpc,
    request: tonic::Request<pb::ChangeMemberRequest>,
) -> Reply<pb::MembersReply> {
    let request = request.into_inner();
    let node = &rpc.node;
    let changed = match pb::MemberAction::try_from(request.action) {
        Ok(pb::MemberAction::Add) => {
            if request.id == 0 {
                return Err(membership_status(MembershipError::ZeroId));
            }
            let bytes_max = consensus::MEMBER_ADDR_BYTES_MAX;
            if request.addr.len() > bytes_max {
                return Err(Status::invalid_argument(format!(
                    "the member address is {} bytes; at most {bytes_max} are allowed",
                    request.addr.len()
                )));
            }
            client::check_master_addr(&request.addr).map_err(|error| {
                Status::invalid_argument(format!("member address {:?} {error}", request.addr))
            })?;
            rpc.require_leader()?;
            check_newcomer(rpc, request.id, &request.addr).await?;
            node.add_learner(request.id, &request.addr).await
        }
        Ok(pb::MemberAction::Promote) => {
            node.promote(request.id, Duration::from_millis(PROMOTE_CATCH_UP_MS)).await
        }
        Ok(pb::MemberAction::Remove) => {
            let handoff = node.grpc_handoff();
            node.remove_member(request.id, &handoff, Duration::from_millis(HAND_OFF_MS)).await
        }
        Ok(pb::MemberAction::Unspecified) | Err(_) => {
            return Err(Status::invalid_argument(format!(
                "action {} is not a membership change: give ADD, PROMOTE or REMOVE",
                request.action
            )));
        }
    };
    let members = changed.map_err(membership_status)?;
    Ok(tonic::Response::new(members_reply(&members)))
}

/// Asks the master at `addr` who it is and what it decodes before it joins: it must answer as
/// `id`, hold no log of another group, and decode at least the group's feature level (else it
/// would stop at the first entry of a newer kind it receives).
async fn check_newcomer(rpc: &MasterRpc, id: u64, addr: &str) -> Result<(), Status> {
    let ours = rpc.node.cluster_info();
    if ours.members.iter().any(|member| member.id == id || member.addr == addr) {
        // The same member again (a restarted joiner), or an id or address taken:
        // `add_learner` tells which.
        return Ok(());
    }
    let info = rpc.node.grpc_member_levels().cluster_info(id, addr).await.map_err(|reason| {
        Status::failed_precondition(format!(
            "no master answers at {addr} ({reason}): start member {id} there first \
             (`raftrain master --id {id} --join ...` asks the group itself)"
        ))
    })?;
    if info.node_id != id {
        return Err(Status::failed_precondition(format!(
            "the master at {addr} is member {}, not {id}",
            info.node_id
        )));
    }
    if let Some(foreign) = foreign_log(&ours, &info) {
        return Err(Status::failed_precondition(format!(
            "the master at {addr} holds a log of another group ({foreign}): it was founded \
             on its own or seeded from a backup; a new member starts with an empty \
             --data-dir (`raftrain master --id {id} --join ...`)"
        )));
    }
    let group_level = rpc.node.read(|state| state.state().feature_level());
    let level = client::answered_feature_level(info.feature_level);
    if level < group_level {
        return Err(Status::failed_precondition(format!(
            "the master at {addr} decodes feature level {level} but the group runs at \
             {group_level}: upgrade it before it joins"
        )));
    }
    Ok(())
}

/// Why the log of the newcomer that answered `newcomer` is not an older copy of this group's
/// (`ours`), or `None`: it holds none, or one whose term is not above ours and whose members
/// include one of ours at the same address (a member that left and comes back on its old
/// directory). Another group's log would meet ours at the same indexes with other entries: a
/// group seeded from a backup runs terms far above, and one founded on its own knows none of
/// our members.
fn foreign_log(
    ours: &consensus::ClusterInfo,
    newcomer: &pb_raft::ClusterInfoReply,
) -> Option<String> {
    if newcomer.last_log_index == 0 && newcomer.last_applied_index == 0 {
        return None;
    }
    if newcomer.term > ours.term {
        return Some(format!("its term {} is above the group's {}", newcomer.term, ours.term));
    }
    let known = |member: &pb_raft::Member| {
        member.id != newcomer.node_id
            && ours.members.iter().any(|our| our.id == member.id && our.addr == member.addr)
    };
    if !newcomer.members.iter().any(known) {
        let theirs: Vec<String> = newcomer
            .members
            .iter()
            .map(|member| format!("{}={}", member.id, member.addr))
            .collect();
        return Some(format!("its members {} are none of the group's", theirs.join(",")));
    }
    None
}

fn membership_status(error: MembershipError) -> Status {
    let message = error.to_string();
    match error {
        MembershipError::Write(error) => write_error(error),
        MembershipError::ZeroId | MembershipError::AddrTooLong { .. } => {
            Status::invalid_argument(message)
        }
        MembershipError::InProgress { .. } | MembershipError::HandOffFailed { .. } => {
            Status::unavailable(message)
        }
        MembershipError::HandedOff { addr, .. } => not_leader(addr.as_deref()),
        MembershipError::IdTaken { .. }
        | MembershipError::AddrTaken { .. }
        | MembershipError::PeerAddrs { .. }
        | MembershipError::TooMany { .. }
        | MembershipError::NotMember { .. }
        | MembershipError::LastVoter { .. }
        | MembershipError::NotCaughtUp { .. }
        | MembershipError::Refused { .. } => Status::failed_precondition(message),
    }
}

fn members_reply(members: &Members) -> pb::MembersReply {
    let rows = members
        .members
        .iter()
        .map(|member| pb::MemberRow {
            id: member.id,
            addr: member.addr.clone(),
            voter: member.voter,
            matched_known: member.matched.is_some(),
            matched: member.matched.unwrap_or(0),
            lag: member.lag.unwrap_or(0),
        })
        .collect();
    pb::MembersReply {
        leader_id: members.leader_id,
        term: members.term,
        last_log_index: members.last_log_index,
        membership_index: members.membership_index,
        joint: members.joint,
        members: rows,
    }
}
