//! Membership changes through openraft's joint consensus: list the members with how far each
//! has the log, add a learner, promote a learner that caught up to voter, remove a member. A
//! leader asked to remove itself first hands leadership to a caught-up follower and sends the
//! caller there (the new leader removes it), so the group is never left to wait for an
//! election. Every change is bounded in time and its refusals name what is wrong.
//!
//! A change is two commits: the joint configuration (old and new voters both decide), then
//! the new one alone. openraft proposes the second from the caller's future, so a leader that
//! dies between the two (or a caller that gives up, dropping the future) leaves the group in
//! the joint configuration for good: every later commit then needs a majority of the old
//! voters too, and a member being removed still counts. [`ConsensusNode::half_done_change`]
//! finds such a configuration and [`ConsensusNode::finish_change`] completes it; a promotion
//! asked again completes it as well.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers};

use crate::batcher::forward_to_leader;
use crate::handoff::{Handoff, HandoffTransport};
use crate::membership_error::MembershipError;
use crate::{ConsensusNode, StateMachine, WriteError};

/// Members (voters and learners) a group holds at most: etcd advises at most seven voters;
/// a few more leave room for learners catching up while members are replaced.
pub const MEMBERS_MAX: usize = 9;
/// The longest member address: a DNS name (253 bytes), a colon and a port.
pub const MEMBER_ADDR_BYTES_MAX: usize = 260;
/// How often a promotion looks whether its learner caught up. A timer, not a wait on
/// openraft's metrics watch: a watch wakes its waiters in an order tokio draws at random, and
/// the simulation replays a seed only while no such order matters.
const CATCH_UP_POLL_MS: u64 = 10;

/// One member as the leader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberStatus {
    pub id: u64,
    /// Its membership address.
    pub addr: String,
    /// A voter counts in quorums; a learner only receives the log.
    pub voter: bool,
    /// The last log index the leader knows it holds (`None`: nothing matched yet).
    pub matched: Option<u64>,
    /// Entries it lacks of the leader's log (`None` while nothing is matched).
    pub lag: Option<u64>,
}

/// The group's members as its leader sees them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Members {
    pub leader_id: u64,
    pub term: u64,
    /// The leader's last log index.
    pub last_log_index: u64,
    /// The index of the entry that set this membership.
    pub membership_index: u64,
    /// Whether a change is half done (the joint configuration of old and new voters).
    pub joint: bool,
    pub members: Vec<MemberStatus>,
}

impl<S: StateMachine> ConsensusNode<S> {
    /// The members, their roles and how far each has the log; only a leader knows the last.
    pub fn members(&self) -> Result<Members, WriteError> {
        self.leader_or_redirect()?;
        let metrics = self.inner.raft.metrics().borrow().clone();
        let index = crate::cluster_info::membership_index(&metrics);
        Ok(members_of(&metrics, metrics.membership_config.membership(), index))
    }
    /// The last membership this node applied (committed, so never undone): the index of the
    /// entry that set it and the ids of its members, voters and learners.
    pub fn applied_membership(&self) -> (u64, BTreeSet<u64>) {
        let stored = self.inner.state_machine.applied_membership();
        let index = stored.log_id().map_or(0, |log_id| log_id.index);
        (index, stored.membership().nodes().map(|(id, _)| *id).collect())
    }

    /// The index of the last membership this node applied that listed it (voter or learner),
    /// since it started (its snapshot's membership included); `None` when none did.
    pub fn last_listed(&self) -> Option<u64> {
        self.inner.state_machine.last_listed(self.id())
    }

    /// Adds member `id` at `addr` as a learner (the leader starts sending it the log at once).
    /// The same id at the same address again changes nothing (answered once the membership
    /// that lists it is committed); another member's id or address is refused.
    pub async fn add_learner(&self, id: u64, addr: &str) -> Result<Members, MembershipError> {
        let members = self.members()?;
        if id == 0 {
            return Err(MembershipError::ZeroId);
        }
        if addr.len() > MEMBER_ADDR_BYTES_MAX {
            let bytes = addr.len();
            return Err(MembershipError::AddrTooLong { bytes, bytes_max: MEMBER_ADDR_BYTES_MAX });
        }
        let raft_addrs = &self.inner.config.raft_addrs;
        if !raft_addrs.is_empty() && !raft_addrs.contains_key(&id) {
            return Err(MembershipError::PeerAddrs { id });
        }
        for member in &members.members {
            match (member.id == id, member.addr == addr) {
                (true, true) => return self.committed(members),
                (true, false) => {
                    return Err(MembershipError::IdTaken { id, addr: member.addr.clone() });
                }
                (false, true) => {
                    return Err(MembershipError::AddrTaken {
                        addr: addr.to_string(),
                        id: member.id,
                    });
                }
                (false, false) => {}
            }
        }
        if members.members.len() >= MEMBERS_MAX {
            return Err(MembershipError::TooMany { members_max: MEMBERS_MAX });
        }
        let nodes = BTreeMap::from([(id, BasicNode::new(addr))]);
        self.change(ChangeMembers::AddNodes(nodes)).await
    }

    /// Makes learner `id` a voter once it holds the log up to where the leader's was when
    /// asked (within `bound`): a voter that lags would hold back every commit. A voter already
    /// is answered once its membership is committed; a joint configuration that makes it one
    /// (left by a leader that stopped halfway) is ended first.
    pub async fn promote(&self, id: u64, bound: Duration) -> Result<Members, MembershipError> {
        let members = self.members()?;
        let Some(member) = members.members.iter().find(|member| member.id == id) else {
            return Err(MembershipError::NotMember { id });
        };
        if member.voter && !members.joint {
            return self.committed(members);
        }
        // A voter of a joint configuration is one of its new voters (or of both): adding it
        // again completes the change instead of leaving it half done.
        self.caught_up(id, members.last_log_index, bound).await?;
        self.change(ChangeMembers::AddVoterIds(BTreeSet::from([id]))).await
    }

    /// Removes member `id`, voter or learner. The last voter cannot be removed. A leader asked
    /// to remove itself hands leadership off and answers [`MembershipError::HandedOff`].
    pub async fn remove_member(
        &self,
        id: u64,
        transport: &dyn HandoffTransport,
        bound: Duration,
    ) -> Result<Members, MembershipError> {
        let members = self.members()?;
        let Some(member) = members.members.iter().find(|member| member.id == id) else {
            return Err(MembershipError::NotMember { id });
        };
        let voters = members.members.iter().filter(|member| member.voter).count();
        if member.voter && voters == 1 {
            return Err(MembershipError::LastVoter { id });
        }
        if id == self.id() {
            return Err(self.hand_off_to_be_removed(transport, bound).await);
        }
        let change = match member.voter {
            true => ChangeMembers::RemoveVoters(BTreeSet::from([id])),
            false => ChangeMembers::RemoveNodes(BTreeSet::from([id])),
        };
        self.change(change).await
    }

    /// `members` once the entry that set them is committed (this leader applied it); until
    /// then the change is under way: answered done, it could still be lost with the entry.
    fn committed(&self, members: Members) -> Result<Members, MembershipError> {
        let (applied_index, _) = self.applied_membership();
        match applied_index >= members.membership_index {
            true => Ok(members),
            false => Err(MembershipError::InProgress {
                reason: format!(
                    "the membership set at index {} is not committed yet (applied: {applied_index})",
                    members.membership_index
                ),
            }),
        }
    }

    /// Hands leadership to a caught-up follower and then acts as a follower again (it stays a
    /// member until the new leader removes it): what the caller is told to do next.
    async fn hand_off_to_be_removed(
        &self,
        transport: &dyn HandoffTransport,
        bound: Duration,
    ) -> MembershipError {
        let handed = self.hand_off_leadership(transport, bound).await;
        self.inner.leaving.store(false, Ordering::SeqCst);
        self.inner.successor.forget().await;
        let elections = self.inner.elections.load(Ordering::SeqCst);
        self.inner.raft.runtime_config().elect(elections);
        match handed {
            Handoff::Done { to, .. } => {
                let addr = self.cluster_info().leader_addr;
                MembershipError::HandedOff { to, addr }
            }
            Handoff::NotLeader => MembershipError::Write(self.not_leader()),
            Handoff::Alone => MembershipError::HandOffFailed {
                reason: "this node is the only voter: no other member could lead".to_string(),
            },
            Handoff::Failed { reason } => {
                MembershipError::HandOffFailed { reason: reason.to_string() }
            }
        }
    }

    /// When this node leads and its membership is a joint configuration: the index of the
    /// entry that set it. Seen twice (apart by more than a change's two commits take), it was
    /// left half done: [`ConsensusNode::finish_change`] completes it.
    pub fn half_done_change(&self) -> Option<u64> {
        if !self.is_leader() {
            return None;
        }
        let metrics = self.inner.raft.metrics().borrow().clone();
        let joint = metrics.membership_config.membership().get_joint_config().len() > 1;
        joint.then(|| crate::cluster_info::membership_index(&metrics))
    }

    /// Completes the joint configuration set by the entry at `index`, if it is still this
    /// leader's membership: its new voters alone decide from then on (members that were only
    /// old voters leave, as the change's own second commit would have had them).
    pub async fn finish_change(&self, index: u64) -> Result<Members, MembershipError> {
        let members = self.members()?;
        if !members.joint || members.membership_index != index {
            return Ok(members);
        }
        let new_voters: BTreeSet<u64> = {
            let metrics = self.inner.raft.metrics().borrow().clone();
            let configs = metrics.membership_config.membership().get_joint_config().clone();
            configs.last().cloned().unwrap_or_default()
        };
        if new_voters.is_empty() {
            return Err(MembershipError::Refused {
                reason: "a joint configuration with no new voters".into(),
            });
        }
        tracing::warn!(index, ?new_voters, "finishing a membership change left half done");
        self.change(ChangeMembers::ReplaceAllVoters(new_voters)).await
    }

    /// Waits until member `id` holds the log up to `index`, looking every
    /// [`CATCH_UP_POLL_MS`]; a member removed meanwhile (by another change) is no longer
    /// waited for.
    async fn caught_up(&self, id: u64, index: u64, bound: Duration) -> Result<(), MembershipError> {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let (matched, listed) = {
                let metrics = self.inner.raft.metrics().borrow().clone();
                let listed = metrics.membership_config.membership().get_node(&id).is_some();
                (matched(&metrics, id), listed)
            };
            if !listed {
                return Err(MembershipError::NotMember { id });
            }
            if matched >= Some(index) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(MembershipError::NotCaughtUp { id, matched, index, bound });
            }
            tokio::time::sleep(Duration::from_millis(CATCH_UP_POLL_MS)).await;
        }
    }

    /// One membership change, joint consensus and all, within twice the write timeout: the
    /// membership it committed (not whatever this leader's is by the time the answer is read,
    /// which may already hold the next change, uncommitted).
    async fn change(
        &self,
        change: ChangeMembers<u64, BasicNode>,
    ) -> Result<Members, MembershipError> {
        let timeout_ms = 2 * self.inner.config.write_timeout_ms;
        let changed = self.inner.raft.change_membership(change, false);
        if crate::planted::active("membership-ack-before-commit") {
            // The change is sent to the core at the first poll; the answer does not wait.
            let proposed = tokio::time::timeout(Duration::from_millis(1), changed).await;
            tracing::info!(done = proposed.is_ok(), "membership change answered as proposed");
            return Ok(self.members()?);
        }
        let result = match tokio::time::timeout(Duration::from_millis(timeout_ms), changed).await {
            Err(_elapsed) => return Err(WriteError::Timeout { timeout_ms }.into()),
            Ok(result) => result,
        };
        match result {
            Ok(response) => {
                let index = response.log_id.index;
                tracing::info!(index, "membership changed");
                let metrics = self.inner.raft.metrics().borrow().clone();
                Ok(match &response.membership {
                    Some(membership) => members_of(&metrics, membership, index),
                    None => self.members()?,
                })
            }
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward))) => {
                Err(forward_to_leader(&self.inner.raft, forward).into())
            }
            Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(error))) => {
                Err(match error {
                    ChangeMembershipError::InProgress(error) => {
                        MembershipError::InProgress { reason: error.to_string() }
                    }
                    other => MembershipError::Refused { reason: other.to_string() },
                })
            }
            Err(RaftError::Fatal(fatal)) => {
                Err(WriteError::Stopped { reason: fatal.to_string() }.into())
            }
        }
    }

    /// `Ok` if this node leads; otherwise where the caller should go.
    fn leader_or_redirect(&self) -> Result<(), WriteError> {
        match self.is_leader() {
            true => Ok(()),
            false => Err(self.not_leader()),
        }
    }

    fn not_leader(&self) -> WriteError {
        let info = self.cluster_info();
        let leader_id = info.leader_id.filter(|leader| *leader != self.id());
        let leader_addr = info.leader_addr.filter(|_| leader_id.is_some());
        WriteError::ForwardToLeader { leader_id, leader_addr }
    }
}

/// `membership`, set by the entry at `membership_index`, with how far each member has the log
/// as this node's `metrics` say (a leader's).
fn members_of(
    metrics: &crate::Metrics,
    membership: &openraft::Membership<u64, BasicNode>,
    membership_index: u64,
) -> Members {
    let voters: BTreeSet<u64> = membership.voter_ids().collect();
    let last = metrics.last_log_index.unwrap_or(0);
    let replication = metrics.replication.clone().unwrap_or_default();
    let members = membership
        .nodes()
        .map(|(id, node)| {
            let matched = if *id == metrics.id {
                metrics.last_log_index
            } else {
                replication.get(id).copied().flatten().map(|log_id| log_id.index)
            };
            let lag = matched.map(|matched| last.saturating_sub(matched));
            let voter = voters.contains(id);
            MemberStatus { id: *id, addr: node.addr.clone(), voter, matched, lag }
        })
        .collect();
    Members {
        leader_id: metrics.id,
        term: metrics.current_term,
        last_log_index: last,
        membership_index,
        joint: membership.get_joint_config().len() > 1,
        members,
    }
}

/// The last index the leader knows member `id` holds.
fn matched(metrics: &crate::Metrics, id: u64) -> Option<u64> {
    let replication = metrics.replication.as_ref()?;
    replication.get(&id).copied().flatten().map(|log_id| log_id.index)
}
