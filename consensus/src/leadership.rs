//! A cheap answer to "does a quorum still follow me?": the master asks it before answering
//! every trainer and pserver heartbeat, so most answers come from the last confirmation and
//! only an old one costs a round of heartbeats.
//!
//! Why a cached confirmation is safe: openraft 0.9 followers refuse every vote for a leader
//! lease (`election_timeout_max_ms`) after they last accepted this leader's AppendEntries. When
//! a quorum acknowledged a heartbeat *sent* at instant `t`, each of them received it after `t`,
//! so no quorum can elect another leader before `t + election_timeout_max_ms`. A confirmation
//! is trusted for `election_timeout_min_ms / 2` after `t`, well inside that lease: the margin
//! covers clock rates that differ between machines and the time a caller takes to act on the
//! answer.

use std::sync::Mutex;
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, RaftError};
use openraft::ServerState;
// tokio's clock, so tests with a paused clock and the simulation stay deterministic.
use tokio::time::Instant;

use crate::batcher::forward_to_leader;
use crate::{Raft, WriteError};

/// The last confirmation a quorum gave this node.
#[derive(Clone, Copy, Debug)]
struct Confirmed {
    /// When the confirming round started: the lease runs from the heartbeat's sending.
    sent: Instant,
    /// The term the node led in.
    term: u64,
}

/// Confirmed leadership, cached for `fresh_for`; cheap to share behind the node's `Arc`.
pub(crate) struct Leadership {
    raft: Raft,
    fresh_for: Duration,
    last: Mutex<Option<Confirmed>>,
    /// Held while a confirmation round runs, so concurrent callers share one round.
    refreshing: tokio::sync::Mutex<()>,
}

impl Leadership {
    /// Confirmations of `raft`'s leadership, trusted for `election_timeout_min_ms / 2`.
    pub(crate) fn new(raft: Raft, election_timeout_min_ms: u64) -> Self {
        let fresh_for = Duration::from_millis(election_timeout_min_ms / 2);
        Self { raft, fresh_for, last: Mutex::new(None), refreshing: tokio::sync::Mutex::new(()) }
    }

    /// How long one confirmation is trusted.
    pub(crate) fn fresh_for(&self) -> Duration {
        self.fresh_for
    }

    /// The term this node leads in, if a quorum confirmed it within `fresh_for`; otherwise runs
    /// one confirmation round (shared with concurrent callers), bounded by `fresh_for`.
    pub(crate) async fn confirm(&self) -> Result<u64, WriteError> {
        if let Some(term) = self.fresh_term() {
            return Ok(term);
        }
        let _round = self.refreshing.lock().await;
        // Another caller may have confirmed while this one waited for the lock.
        if let Some(term) = self.fresh_term() {
            return Ok(term);
        }
        self.refresh().await
    }

    /// The cached term, if it is still fresh and still this node's leading term.
    fn fresh_term(&self) -> Option<u64> {
        let last = (*self.lock())?;
        let (state, term) = self.state_and_term();
        let fresh = last.sent.elapsed() < self.fresh_for;
        (fresh && state == ServerState::Leader && term == last.term).then_some(term)
    }

    async fn refresh(&self) -> Result<u64, WriteError> {
        let sent = Instant::now();
        let (_, term) = self.state_and_term();
        let round = self.raft.get_read_log_id();
        let result = match tokio::time::timeout(self.fresh_for, round).await {
            Err(_elapsed) => {
                let reason = format!("no quorum answered within {:?}", self.fresh_for);
                return Err(WriteError::NoQuorum { reason });
            }
            Ok(result) => result,
        };
        if let Err(error) = result {
            return Err(self.check_error(error));
        }
        let (state, term_after) = self.state_and_term();
        if state != ServerState::Leader || term_after != term {
            // The round confirmed a leadership that began after `sent` was taken; do not date
            // it back. The caller asks again.
            let reason = format!("the term moved from {term} to {term_after} during the round");
            return Err(WriteError::NoQuorum { reason });
        }
        *self.lock() = Some(Confirmed { sent, term });
        Ok(term)
    }

    fn check_error(
        &self,
        error: RaftError<u64, CheckIsLeaderError<u64, openraft::BasicNode>>,
    ) -> WriteError {
        match error {
            RaftError::APIError(CheckIsLeaderError::ForwardToLeader(forward)) => {
                forward_to_leader(&self.raft, forward)
            }
            RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(error)) => {
                WriteError::NoQuorum { reason: error.to_string() }
            }
            RaftError::Fatal(fatal) => WriteError::Stopped { reason: fatal.to_string() },
        }
    }

    fn state_and_term(&self) -> (ServerState, u64) {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        (metrics.state, metrics.current_term)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Confirmed>> {
        self.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
