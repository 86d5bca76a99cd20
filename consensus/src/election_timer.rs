//! Starts an election as soon as a follower's election timer runs out, not at openraft's next
//! tick.
//!
//! openraft 0.9 checks its election timer only on a tick every 1.5 heartbeats (75 ms with the
//! master's 50 ms), so a follower campaigns 0-75 ms after its timer ran out: on average a tenth
//! of a kill -9 failover (`bench master`). This timer runs beside it: once the follower has
//! heard no leader for the leader lease (`election_timeout_max`) plus its election timeout
//! (in `[election_timeout_min, election_timeout_max)`, drawn per term from the node id, so two
//! followers differ and a seed replays), it triggers the election that openraft's tick would
//! have started a little later. It only changes *when* an election starts, which Raft's safety
//! never depends on, and it waits out the same lease, so it disturbs no live leader.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use tokio::time::Instant;

use crate::step_up::StepUp;
use crate::Raft;

/// The settings of one node's timer, in milliseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ElectionTiming {
    pub(crate) id: u64,
    pub(crate) timeout_min_ms: u64,
    pub(crate) timeout_max_ms: u64,
}

impl ElectionTiming {
    /// How long a follower that knew a leader waits after its last message, in `term`: the
    /// lease plus a timeout drawn from (id, term).
    fn silence(&self, term: u64) -> Duration {
        let spread = self.timeout_max_ms.saturating_sub(self.timeout_min_ms).max(1);
        let timeout_ms = self.timeout_min_ms + mix(self.id, term) % spread;
        Duration::from_millis(self.timeout_max_ms + timeout_ms)
    }
}

/// Runs the timer until the node stops (the task ends with the Raft core).
pub(crate) fn start(
    raft: Raft,
    step_up: Arc<StepUp>,
    timing: ElectionTiming,
    leaving: Arc<AtomicBool>,
) {
    tokio::spawn(async move {
        // The last time this timer fired, which counts as a fresh start like a message heard.
        let mut fired = Instant::now();
        loop {
            let term = raft.metrics().borrow().current_term;
            tokio::time::sleep_until(step_up.last_heard().max(fired) + timing.silence(term)).await;
            let now = Instant::now();
            let term = raft.metrics().borrow().current_term;
            if step_up.last_heard().max(fired) + timing.silence(term) > now {
                continue; // Heard from a leader or a candidate meanwhile, or the term moved.
            }
            fired = now;
            // A node without a leader is openraft's own timer's (no lease to shorten there).
            if leaving.load(Ordering::SeqCst) || !knew_a_leader(&raft) {
                continue;
            }
            tracing::info!(
                term,
                "no leader heard for a lease and an election timeout; campaigning"
            );
            if raft.trigger().elect().await.is_err() {
                return; // The core has stopped.
            }
        }
    });
}

/// Whether this node follows a leader it has accepted (a committed vote): only then does
/// openraft add the lease to its own timer, which is the wait this timer shortens.
fn knew_a_leader(raft: &Raft) -> bool {
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    metrics.state == ServerState::Follower && metrics.vote.is_committed()
}

/// A well-spread 64-bit mix of two numbers (splitmix64's finaliser).
fn mix(id: u64, term: u64) -> u64 {
    let mut z = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ term.wrapping_add(0x632b_e59b_d9b4_e019);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The silence is the lease plus a timeout within the configured range, differs between
    /// nodes and terms, and is a constant when the range is one value wide (the simulation's).
    #[test]
    fn silence_is_a_lease_plus_a_timeout_in_range() {
        let timing = |id| ElectionTiming { id, timeout_min_ms: 110, timeout_max_ms: 200 };
        let silences: Vec<Duration> =
            (1..=3).flat_map(|id| (1..=20).map(move |term| timing(id).silence(term))).collect();
        let in_range = |silence: &Duration| (310..400).contains(&silence.as_millis());
        assert!(silences.iter().all(in_range), "{silences:?}");
        assert!(silences.iter().any(|silence| *silence != silences[0]), "spread");
        let narrow = ElectionTiming { id: 2, timeout_min_ms: 110, timeout_max_ms: 111 };
        assert!((1..=20).all(|term| narrow.silence(term) == Duration::from_millis(221)));
    }
}
