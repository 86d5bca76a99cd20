//! Starts an election as soon as a follower's election timer runs out, not at openraft's next
//! tick.
//!
//! openraft 0.9 checks its election timer only on a tick every 1.5 heartbeats (75 ms with the
//! master's 50 ms), so a follower campaigns 0-75 ms after its timer ran out: on average a tenth
//! of a kill -9 failover (`bench master`). This timer runs beside it: once the follower has
//! heard no leader for the leader lease (`election_timeout_max`) plus its election timeout
//! (in `[election_timeout_min, election_timeout_max)`, a slot of that range per member that
//! rotates with the term, so two followers never tie and a seed replays), it triggers the
//! election that openraft's tick would have started a little later. It only changes *when* an election starts, which Raft's safety
//! never depends on, and it waits out the same lease, so it disturbs no live leader.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use tokio::time::Instant;

use crate::step_up::StepUp;
use crate::{NodeConfig, Raft};

/// The settings of one node's timer, in milliseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ElectionTiming {
    /// This node's place among the members (its id's rank) and how many there are.
    pub(crate) rank: u64,
    pub(crate) members: u64,
    pub(crate) timeout_min_ms: u64,
    pub(crate) timeout_max_ms: u64,
}

impl ElectionTiming {
    /// The timing of the node `config` describes.
    pub(crate) fn of(config: &NodeConfig) -> Self {
        let rank = config.peers.keys().position(|id| *id == config.id).unwrap_or(0);
        Self {
            rank: rank as u64,
            members: config.peers.len() as u64,
            timeout_min_ms: config.election_timeout_min_ms,
            timeout_max_ms: config.election_timeout_max_ms,
        }
    }

    /// How long a follower that knew a leader waits after its last message, in `term`: the
    /// lease plus a timeout. The range is cut into one slot per member, and the members take
    /// the slots in turn from term to term, so two followers never run out together (both
    /// would campaign in one term, each keep its own vote, and wait a whole timeout more: a
    /// 1.1 s failover in `bench master` with a timeout drawn at random within the range).
    fn silence(&self, term: u64) -> Duration {
        let members = self.members.max(1);
        let slot_ms = self.timeout_max_ms.saturating_sub(self.timeout_min_ms) / members;
        let slot = (self.rank + term) % members;
        Duration::from_millis(self.timeout_max_ms + self.timeout_min_ms + slot * slot_ms)
    }
}

/// What keeps the timer from campaigning: the node hands leadership off before it stops, or
/// its elections are switched off.
pub(crate) struct ElectionSwitches {
    pub(crate) leaving: Arc<AtomicBool>,
    pub(crate) elections: Arc<AtomicBool>,
}

impl ElectionSwitches {
    fn may_campaign(&self) -> bool {
        !self.leaving.load(Ordering::SeqCst) && self.elections.load(Ordering::SeqCst)
    }
}

/// Runs the timer until the node stops (the task ends with the Raft core).
pub(crate) fn start(
    raft: Raft,
    step_up: Arc<StepUp>,
    timing: ElectionTiming,
    switches: ElectionSwitches,
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
            if !switches.may_campaign() || !knew_a_leader(&raft) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The silence is the lease plus a timeout within the configured range, in a slot of its
    /// own for each member in every term (so two members never time out together), and the
    /// lease plus the minimum when the range is one value wide (the simulation's).
    #[test]
    fn silence_is_a_lease_plus_a_timeout_slot_of_its_own() {
        let timing =
            |rank| ElectionTiming { rank, members: 3, timeout_min_ms: 110, timeout_max_ms: 200 };
        for term in 1..=20 {
            let mut silences: Vec<u128> =
                (0..3).map(|rank| timing(rank).silence(term).as_millis()).collect();
            assert!(silences.iter().all(|silence| (310..400).contains(silence)), "{silences:?}");
            silences.sort_unstable();
            assert!(silences.windows(2).all(|pair| pair[1] - pair[0] >= 30), "{silences:?}");
        }
        assert_ne!(timing(0).silence(1), timing(0).silence(2), "the slots rotate");
        let narrow =
            ElectionTiming { rank: 1, members: 3, timeout_min_ms: 110, timeout_max_ms: 111 };
        assert!((1..=20).all(|term| narrow.silence(term) == Duration::from_millis(221)));
    }
}
