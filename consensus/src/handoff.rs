//! Handing leadership off before a planned stop (the Raft thesis, section 3.10).
//!
//! A leader that simply stops leaves the group without a leader until a follower's timer runs
//! out: in openraft 0.9 that is the leader lease (`election_timeout_max_ms`) plus a random
//! election timeout after the last heartbeat, and every follower refuses votes for the lease.
//! So a leader asked to stop first *leaves*: it refuses new writes, confirmations and
//! linearizable reads (the node's `leaving` flag), waits until the most up-to-date follower has
//! every entry of its log, and sends that follower `TimeoutNow`. The follower campaigns at
//! once, in the next term; the old leader grants it the vote (its own vote is not renewed by
//! heartbeats, so after a lease of leading it no longer holds a lease against candidates), and
//! the follower leads with the old leader's vote while the third member still honours its
//! lease. Nothing here affects safety: it only changes *when* an election starts, and the
//! candidate's log is complete.
//!
//! A follower honours `TimeoutNow` only from the leader it follows, in the term it follows it
//! in, and once per term: a forged request can at most start one election.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use openraft::error::ForwardToLeader;
use openraft::ServerState;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::batcher::forward_to_leader;
use crate::handoff_failure::HandoffFailure;
use crate::timeout_now_error::{TimeoutNowError, TimeoutNowRefusal};
use crate::{Raft, WriteError};

/// What a leader about to stop sends the follower it hands leadership to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeoutNow {
    /// The term the sender leads in.
    pub term: u64,
    /// The sender's id: the leader the receiver must be following.
    pub leader_id: u64,
}

/// A boxed future, so the transport can be a trait object.
pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Result<(), TimeoutNowError>> + Send + 'a>>;

/// How a leader reaches the follower it hands off to: gRPC in production
/// (`network::GrpcHandoff`), in memory in the simulation.
pub trait HandoffTransport: Send + Sync {
    /// Delivers `request` to member `target` (at `addr`, its membership address) and returns
    /// its answer: `Err` says why it refused or could not be reached.
    fn timeout_now<'a>(&'a self, target: u64, addr: &'a str, request: TimeoutNow)
        -> SendFuture<'a>;
}

/// How a handoff ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handoff {
    /// This node did not lead: nothing to hand off.
    NotLeader,
    /// `to` leads now (it may be another member than the one asked, if an election raced).
    Done { to: u64, elapsed: Duration },
    /// No other member leads within the bound; the followers will elect one on their own.
    Failed { reason: HandoffFailure },
    /// This node is the group's only voter: nobody could lead after it.
    Alone,
}

/// Hands leadership off from `raft`, which must already refuse new writes; gives up after
/// `bound`. `leading_since` is when this node began leading: a leader grants no vote within
/// `lease` of its own election (openraft dates its vote then), so the follower is asked only
/// once that has passed.
pub(crate) async fn hand_off(
    raft: &Raft,
    transport: &dyn HandoffTransport,
    bound: Duration,
    lease: Duration,
    leading_since: Option<Instant>,
) -> Handoff {
    let started = Instant::now();
    let (id, term) = {
        let metrics = raft.metrics();
        let metrics = metrics.borrow();
        if metrics.state != ServerState::Leader {
            return Handoff::NotLeader;
        }
        let mut voters = metrics.membership_config.membership().voter_ids();
        if voters.all(|voter| voter == metrics.id) {
            return Handoff::Alone;
        }
        (metrics.id, metrics.current_term)
    };
    let target = match caught_up_follower(raft, bound).await {
        Ok(target) => target,
        Err(reason) => return Handoff::Failed { reason },
    };
    if let Some(since) = leading_since {
        tokio::time::sleep_until(since + lease).await;
    }
    let request = TimeoutNow { term, leader_id: id };
    // Bounded here whatever the transport does: a paused member never answers.
    let asked = transport.timeout_now(target.0, &target.1, request);
    match tokio::time::timeout(bound.saturating_sub(started.elapsed()), asked).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            return Handoff::Failed { reason: HandoffFailure::Refused { member: target.0, error } };
        }
        Err(_elapsed) => {
            let reason = HandoffFailure::NoAnswer { member: target.0, bound };
            return Handoff::Failed { reason };
        }
    }
    let remaining = bound.saturating_sub(started.elapsed());
    match another_leads(raft, id, remaining).await {
        Ok(metrics) => {
            let to = metrics.current_leader.unwrap_or(target.0);
            Handoff::Done { to, elapsed: started.elapsed() }
        }
        Err(error) => {
            Handoff::Failed { reason: HandoffFailure::NoNewLeader { bound, waited: error.into() } }
        }
    }
}

/// Where a caller of a leaving node goes: the member that leads once one other than this node
/// does (it learns so from the new leader's first AppendEntries), or, if none does within a
/// lease and an election timeout (by then the followers have elected one even if the handoff
/// failed), nobody known (the caller rediscovers). Holding callers until then, instead of
/// refusing them at once with no leader named, lets a client follow the redirect without a
/// backoff pause, and lands it on a leader that can already serve it.
///
/// The successor is looked for once, and the held callers are answered in the order they came:
/// a tokio mutex queues them first come, first served. Each waiting on openraft's metrics
/// itself would wake them in the watch's order, which tokio draws at random, and the
/// simulation could not replay the redirects' order.
#[derive(Debug, Default)]
pub(crate) struct Successor {
    /// `None` until looked for; then the member that leads, or `None` if none did in time.
    found: tokio::sync::Mutex<Option<Option<u64>>>,
}

impl Successor {
    /// Forgets the member found: a node that handed off and stays (a leader handing off before
    /// it is removed) looks again at its next handoff.
    pub(crate) async fn forget(&self) {
        *self.found.lock().await = None;
    }

    /// Holds the caller until another member leads (or the bound ends), then redirects it.
    pub(crate) async fn redirect(&self, raft: &Raft) -> WriteError {
        let mut found = self.found.lock().await;
        let leader = match *found {
            Some(leader) => leader,
            None => *found.insert(successor(raft).await),
        };
        drop(found);
        match leader {
            Some(leader_id) => {
                let forward = ForwardToLeader { leader_id: Some(leader_id), leader_node: None };
                forward_to_leader(raft, forward)
            }
            None => WriteError::ForwardToLeader { leader_id: None, leader_addr: None },
        }
    }
}

/// The member that leads once another than this one does, within a lease and an election
/// timeout.
async fn successor(raft: &Raft) -> Option<u64> {
    let bound = Duration::from_millis(2 * raft.config().election_timeout_max);
    let id = raft.metrics().borrow().id;
    another_leads(raft, id, bound).await.ok().and_then(|metrics| metrics.current_leader)
}

/// The voter (not this node) with the most of the log once one has all of it: its id and
/// membership address.
async fn caught_up_follower(raft: &Raft, bound: Duration) -> Result<(u64, String), HandoffFailure> {
    let found = raft
        .wait(Some(bound))
        .metrics(|metrics| caught_up(metrics).is_some(), "a follower has the whole log")
        .await
        .map_err(|error| HandoffFailure::NoFollowerCaughtUp { bound, waited: error.into() })?;
    let target = caught_up(&found).expect("the wait returned once a follower caught up");
    let addr = found
        .membership_config
        .membership()
        .get_node(&target)
        .map(|node| node.addr.clone())
        .ok_or(HandoffFailure::NoAddress { member: target })?;
    Ok((target, addr))
}

/// A voter other than the leader whose matched log reaches the leader's last entry.
fn caught_up(metrics: &crate::Metrics) -> Option<u64> {
    let replication = metrics.replication.as_ref()?;
    let last = metrics.last_log_index;
    let voters: Vec<u64> = metrics.membership_config.membership().voter_ids().collect();
    voters.into_iter().filter(|voter| *voter != metrics.id).find(|voter| {
        let matched = replication.get(voter).and_then(|log_id| log_id.map(|log_id| log_id.index));
        matched.is_some() && matched >= last
    })
}

/// The receiving side: at most one honoured `TimeoutNow` per term.
#[derive(Debug, Default)]
pub(crate) struct TimeoutNowGate {
    honoured_term: Mutex<u64>,
}

impl TimeoutNowGate {
    /// Campaigns now if `request` comes from the leader this follower follows, in its term,
    /// for the first time in that term; otherwise says why not.
    pub(crate) async fn receive(
        &self,
        raft: &Raft,
        request: TimeoutNow,
    ) -> Result<(), TimeoutNowRefusal> {
        {
            let metrics = raft.metrics();
            let metrics = metrics.borrow();
            check(&metrics, &request)?;
            let mut honoured =
                self.honoured_term.lock().unwrap_or_else(|poison| poison.into_inner());
            if *honoured >= request.term {
                return Err(TimeoutNowRefusal::AlreadyCampaigned { term: *honoured });
            }
            *honoured = request.term;
        }
        tracing::info!(
            term = request.term,
            from = request.leader_id,
            "leader hands off; campaigning"
        );
        raft.trigger()
            .elect()
            .await
            .map_err(|fatal| TimeoutNowRefusal::CoreStopped { fatal: fatal.to_string() })
    }
}

/// Why `request` must not start an election here, if it must not.
fn check(metrics: &crate::Metrics, request: &TimeoutNow) -> Result<(), TimeoutNowRefusal> {
    if metrics.state != ServerState::Follower {
        return Err(TimeoutNowRefusal::NotFollower { state: metrics.state });
    }
    if metrics.current_term != request.term {
        let (request_term, own_term) = (request.term, metrics.current_term);
        return Err(TimeoutNowRefusal::WrongTerm { request_term, own_term });
    }
    if metrics.current_leader != Some(request.leader_id) {
        let (sender, followed) = (request.leader_id, metrics.current_leader);
        return Err(TimeoutNowRefusal::NotFollowedLeader { sender, followed });
    }
    Ok(())
}

/// Waits up to `bound` until a member other than `id` leads; the metrics then.
async fn another_leads(
    raft: &Raft,
    id: u64,
    bound: Duration,
) -> Result<openraft::RaftMetrics<u64, openraft::BasicNode>, openraft::metrics::WaitError> {
    let leads_elsewhere = move |metrics: &openraft::RaftMetrics<u64, openraft::BasicNode>| {
        metrics.current_leader.is_some_and(|leader| leader != id)
    };
    raft.wait(Some(bound)).metrics(leads_elsewhere, "another member leads").await
}
