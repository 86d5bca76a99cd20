//! Who leads, in which term, and who the members are, as one node sees it; and its protobuf
//! form. The only place where this crate converts to or from protobuf types.

use std::fmt;

use openraft::ServerState;
use proto::raft::{ClusterInfoReply, Member as MemberReply};

use crate::Metrics;

/// One node's view of the group, from its Raft metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The answering node.
    pub node_id: u64,
    pub leader_id: Option<u64>,
    pub leader_addr: Option<String>,
    pub term: u64,
    /// Every member of the current membership, by id.
    pub members: Vec<Member>,
    pub last_log_index: Option<u64>,
    pub last_applied_index: Option<u64>,
    /// The answering node's feature level (`NodeConfig::feature_level`; 0: none given).
    pub feature_level: u32,
    /// The log index of the entry that set `members`.
    pub membership_index: u64,
}

/// A member and its role as the answering node believes it to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    pub addr: String,
    pub role: Role,
}

/// A member's role; only the answering node knows its own for certain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
    Candidate,
    Learner,
    Unknown,
}

impl Role {
    /// The wire spelling, as in `raft.proto`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Leader => "leader",
            Role::Follower => "follower",
            Role::Candidate => "candidate",
            Role::Learner => "learner",
            Role::Unknown => "unknown",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "leader" => Role::Leader,
            "follower" => Role::Follower,
            "candidate" => Role::Candidate,
            "learner" => Role::Learner,
            _ => Role::Unknown,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl ClusterInfo {
    /// What `metrics` says about the group.
    pub fn from_metrics(metrics: &Metrics) -> Self {
        let membership = metrics.membership_config.membership();
        let voters: Vec<u64> = membership.voter_ids().collect();
        let members = membership
            .nodes()
            .map(|(id, node)| {
                let role = member_role(metrics, *id, voters.contains(id));
                Member { id: *id, addr: node.addr.clone(), role }
            })
            .collect();
        let leader_id = metrics.current_leader;
        let leader_addr =
            leader_id.and_then(|leader| membership.get_node(&leader)).map(|node| node.addr.clone());
        ClusterInfo {
            node_id: metrics.id,
            leader_id,
            leader_addr,
            term: metrics.current_term,
            members,
            last_log_index: metrics.last_log_index,
            last_applied_index: metrics.last_applied.map(|log_id| log_id.index),
            feature_level: 0,
            membership_index: membership_index(metrics),
        }
    }
}

/// The log index of the entry that set the membership `metrics` shows.
pub(crate) fn membership_index(metrics: &Metrics) -> u64 {
    metrics.membership_config.log_id().map_or(0, |log_id| log_id.index)
}

fn member_role(metrics: &Metrics, id: u64, is_voter: bool) -> Role {
    if id == metrics.id {
        return match metrics.state {
            ServerState::Leader => Role::Leader,
            ServerState::Follower => Role::Follower,
            ServerState::Candidate => Role::Candidate,
            ServerState::Learner => Role::Learner,
            ServerState::Shutdown => Role::Unknown,
        };
    }
    match (metrics.current_leader, is_voter) {
        (Some(leader), _) if leader == id => Role::Leader,
        (_, false) => Role::Learner,
        (Some(_), true) => Role::Follower,
        (None, true) => Role::Unknown,
    }
}

/// The protobuf reply for `info`.
pub fn cluster_info_reply(info: &ClusterInfo) -> ClusterInfoReply {
    ClusterInfoReply::from(info)
}

impl From<&ClusterInfo> for ClusterInfoReply {
    fn from(info: &ClusterInfo) -> Self {
        let members = info
            .members
            .iter()
            .map(|member| MemberReply {
                id: member.id,
                addr: member.addr.clone(),
                role: member.role.as_str().to_string(),
            })
            .collect();
        ClusterInfoReply {
            node_id: info.node_id,
            leader_id: info.leader_id.unwrap_or(0),
            leader_addr: info.leader_addr.clone().unwrap_or_default(),
            term: info.term,
            members,
            // Indexes start at 0, so "none yet" and "index 0" share the wire value 0.
            last_log_index: info.last_log_index.unwrap_or(0),
            last_applied_index: info.last_applied_index.unwrap_or(0),
            // The application fills these when asked (the master service does).
            state_digest: 0,
            digest_applied_index: 0,
            feature_level: info.feature_level,
            // The application fills it (the master service does).
            group_feature_level: 0,
            membership_index: info.membership_index,
        }
    }
}

impl From<&ClusterInfoReply> for ClusterInfo {
    fn from(reply: &ClusterInfoReply) -> Self {
        let members = reply
            .members
            .iter()
            .map(|member| Member {
                id: member.id,
                addr: member.addr.clone(),
                role: Role::parse(&member.role),
            })
            .collect();
        let known = |value: &str| (!value.is_empty()).then(|| value.to_string());
        ClusterInfo {
            node_id: reply.node_id,
            leader_id: (reply.leader_id != 0).then_some(reply.leader_id),
            leader_addr: known(&reply.leader_addr),
            term: reply.term,
            members,
            last_log_index: Some(reply.last_log_index),
            last_applied_index: Some(reply.last_applied_index),
            feature_level: reply.feature_level,
            membership_index: reply.membership_index,
        }
    }
}
