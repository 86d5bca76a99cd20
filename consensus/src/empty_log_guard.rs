//! A node that opened without a vote on its disk (a new data directory: a new member, the
//! group's first start, or a member that lost its disk and came back under its old id) votes
//! for no candidate with a history until a leader has brought its log up to that leader's
//! commit index.
//!
//! Raft counts a member's acknowledgements and votes as promises kept on its disk. A member
//! that lost its disk broke them: it may have acknowledged entries that made a commit, and its
//! empty log is up to date against any candidate, so the first candidate to ask (perhaps one
//! that missed those entries, while the leader is down) would win with its vote and the
//! committed entries would be lost. Until it is caught up, this node cannot tell a new member
//! from one that lost its disk, so it treats both alike: it grants a vote only to a candidate
//! whose log holds at most the group's initial membership (index 0: the group's first
//! election, when every member is new), and once a leader's AppendEntries left its log
//! reaching a commit index that leader announced since this node opened, an entry of the
//! leader's own term (everything committed before that entry, everything it could have
//! acknowledged before among it, is then back on its disk; a follower that lags behind every
//! newest commit, as one does under a steady load, reaches the first such one soon), or once it
//! was elected itself (a majority found its log up to date, and
//! a majority holds every committed entry), it votes as any member does. A node that had a
//! vote on its disk is never held back.
//!
//! What stays open: a vote the lost disk had cast in a term after the one of the leader it
//! caught up from. openraft records the caught-up node's vote for that leader's term, so it
//! grants no second vote in that term; a later term it voted in before the loss could only
//! come back if that term's candidate had never reached the leader, which then still leads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use openraft::ServerState;
use tokio::sync::watch;

use openraft::error::RaftError;
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, VoteRequest};

use crate::rpc_bounds::Refusal;
use crate::{Metrics, TypeConfig};

/// Whether this node still holds its vote back from candidates with a history.
#[derive(Debug)]
pub(crate) struct EmptyLogGuard {
    holding: AtomicBool,
    /// The first commit index of its own term the leader of the highest term seen announced
    /// (that term, that index): the log reaching it is caught up.
    target: Mutex<Option<(u64, u64)>>,
}

impl EmptyLogGuard {
    /// The guard of a node whose disk held a vote when it opened (`had_vote`) or not.
    pub(crate) fn new(had_vote: bool) -> Self {
        if !had_vote {
            tracing::info!(
                "this data directory held no vote: this node votes only in the group's first \
                 election until a leader has brought its log up to date"
            );
        }
        Self { holding: AtomicBool::new(!had_vote), target: Mutex::new(None) }
    }

    /// Refuses a vote for a candidate whose log goes past the group's initial membership
    /// while this node has not been caught up since it opened empty.
    pub(crate) fn check_vote(&self, request: &VoteRequest<u64>) -> Result<(), Refusal> {
        let history = request.last_log_id.map_or(0, |id| id.index);
        if !self.holding.load(Ordering::Acquire) || history == 0 {
            return Ok(());
        }
        Err(Refusal {
            rpc: "Vote",
            reason: format!(
                "this node started on an empty data directory and has not caught up with a \
                 leader yet: it votes for no candidate with a log (the candidate's reaches \
                 index {history}) until then, since its disk may have lost entries it had \
                 acknowledged"
            ),
        })
    }

    /// Whether `request`, applied whole, leaves the receiver's log reaching the catch-up
    /// target: the first commit index of the sender's own term it announced (taken before the
    /// request goes to openraft, which consumes it). A commit of an earlier term (a leader's
    /// before its first commit) sets no target: the entries after it may hold commits of the
    /// term before.
    pub(crate) fn reaches_commit(&self, request: &AppendEntriesRequest<TypeConfig>) -> bool {
        if !self.holding.load(Ordering::Acquire) {
            return false; // Nothing to lift: no lock on a caught-up follower's every append.
        }
        let term = request.vote.leader_id().term;
        let own_commit = request.leader_commit.filter(|id| id.leader_id.term == term);
        let target = {
            let mut target = self.target.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(commit) = own_commit {
                if target.is_none_or(|(seen, _)| term > seen) {
                    *target = Some((term, commit.index));
                }
            }
            *target
        };
        let reached = request.entries.last().map(|entry| entry.log_id).or(request.prev_log_id);
        match (reached, target) {
            (Some(reached), Some((_, index))) => reached.index >= index,
            _ => false,
        }
    }

    /// Stops holding back once a leader's AppendEntries that `reaches_commit` succeeded.
    pub(crate) fn after_append(
        &self,
        reaches_commit: bool,
        result: &Result<AppendEntriesResponse<u64>, RaftError<u64>>,
    ) {
        if !reaches_commit
            || !self.holding.load(Ordering::Acquire)
            || !matches!(result, Ok(AppendEntriesResponse::Success))
        {
            return;
        }
        self.holding.store(false, Ordering::Release);
        tracing::info!("caught up with the leader's commit index: this node votes again");
    }

    /// Stops holding back once `metrics` show this node leading (spawned while it holds back:
    /// a leader receives no AppendEntries, yet its vote is what a handoff's successor needs).
    pub(crate) async fn release_once_leading(
        self: Arc<Self>,
        mut metrics: watch::Receiver<Metrics>,
    ) {
        let led = metrics.wait_for(|metrics| metrics.state == ServerState::Leader).await;
        if led.is_ok() && self.holding.swap(false, Ordering::AcqRel) {
            tracing::info!("elected: this node votes again");
        }
    }

    /// Whether this node still holds its vote back.
    #[cfg(test)]
    pub(crate) fn holding(&self) -> bool {
        self.holding.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests;
