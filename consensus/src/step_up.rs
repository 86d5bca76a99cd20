//! Stepping up when a candidate with a shorter log asks for our vote after the leader went
//! silent.
//!
//! In openraft 0.9 a follower that knew a leader campaigns only after the leader's lease plus
//! its own random election timeout, a timeout drawn once per process. When the leader dies, the
//! follower with the shorter timeout campaigns first; if the dying leader had replicated its
//! last entry to the other follower only, the vote is refused (our log is longer), the refused
//! candidate adds `2 x election_timeout_max` to its next attempt, and the follower with the
//! longer log waits for its own timer, then often loses a first round to the candidate's vote in
//! the same term. Measured with `raftrain bench master`, that is a failover of 1.4 s instead of
//! 0.6 s.
//!
//! So a node that refuses a vote because its own log is longer, and that has not heard from a
//! leader for a whole leader lease, campaigns at once, in a term above the candidate's. This only
//! changes *when* an election starts, which Raft's safety never depends on; a live leader's
//! heartbeats keep `last_heard` fresh, so it is not disturbed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// tokio's clock, so a simulation with a paused clock stays deterministic.
use tokio::time::Instant;

use openraft::raft::{AppendEntriesResponse, VoteRequest, VoteResponse};
use openraft::ServerState;

use crate::Raft;

/// How long to wait for one triggered election to show up in the metrics.
const ELECTION_SEEN_TIMEOUT: Duration = Duration::from_millis(100);

/// When this node last accepted an AppendEntries from a leader.
#[derive(Debug)]
pub(crate) struct StepUp {
    last_heard: Mutex<Instant>,
    /// The leader lease: silence this long means the leader may be gone.
    silence: Duration,
    /// Set when the node hands leadership off before it stops: it must not campaign then, or
    /// it wins back what it hands off (seen in `bench master`: a leaving leader refused its
    /// successor's vote for a shorter log, stepped up, and led again until it exited).
    leaving: Arc<AtomicBool>,
    /// When this node last granted a vote.
    granted: Mutex<Instant>,
}

impl StepUp {
    pub(crate) fn new(silence: Duration, leaving: Arc<AtomicBool>) -> Self {
        let now = Instant::now();
        Self { last_heard: Mutex::new(now), silence, leaving, granted: Mutex::new(now) }
    }

    /// Notes an AppendEntries result: any answer but "higher vote" came from a current leader.
    pub(crate) fn after_append(&self, result: &Result<AppendEntriesResponse<u64>, impl Sized>) {
        if let Ok(response) = result {
            if !matches!(response, AppendEntriesResponse::HigherVote(_)) {
                self.touch();
            }
        }
    }

    /// After answering `request` with `response`: campaign if the refused candidate's log is
    /// behind ours and no leader has been heard for a lease. Returns at once; the election
    /// runs in the background.
    pub(crate) fn after_vote(
        &self,
        raft: &Raft,
        request: &VoteRequest<u64>,
        response: &VoteResponse<u64>,
    ) {
        if response.vote_granted {
            self.granted_now();
        }
        let behind = response.last_log_id > request.last_log_id;
        if response.vote_granted || !behind || self.heard_within_lease() || is_leader(raft) {
            return;
        }
        if self.leaving.load(Ordering::SeqCst) {
            return;
        }
        // Counts as a fresh start: a second refusal within the lease does not elect again.
        self.touch();
        let candidate_term = request.vote.leader_id().term;
        tracing::info!(candidate_term, "refused a candidate with a shorter log; campaigning");
        let raft = raft.clone();
        tokio::spawn(async move { campaign_above(&raft, candidate_term).await });
    }

    /// When this node last accepted an AppendEntries from a leader, or granted a vote (an
    /// election is under way then): what the election timer counts from.
    pub(crate) fn last_heard(&self) -> Instant {
        (*self.lock()).max(*self.granted.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// Notes a vote granted now.
    fn granted_now(&self) {
        *self.granted.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Instant::now();
    }

    fn heard_within_lease(&self) -> bool {
        self.lock().elapsed() < self.silence
    }

    fn touch(&self) {
        *self.lock() = Instant::now();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Instant> {
        self.last_heard.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A leader hears no AppendEntries, but has nothing to step up to.
fn is_leader(raft: &Raft) -> bool {
    raft.metrics().borrow().state == ServerState::Leader
}

/// Triggers elections until this node campaigns in a term above `candidate_term` (in the
/// candidate's own term it would be refused: the candidate voted for itself). At most twice.
async fn campaign_above(raft: &Raft, candidate_term: u64) {
    for _ in 0..2 {
        let term = raft.metrics().borrow().current_term;
        if term > candidate_term {
            return;
        }
        if raft.trigger().elect().await.is_err() {
            return; // Shutting down.
        }
        let moved = raft
            .wait(Some(ELECTION_SEEN_TIMEOUT))
            .metrics(|metrics| metrics.current_term > term, "the triggered election")
            .await;
        if moved.is_err() {
            return; // The election was not started (this node became leader, or stopped).
        }
    }
}
