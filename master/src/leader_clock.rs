//! The time a leader stamps into its proposals. Not its wall clock: one master whose clock runs
//! two hours fast would, as leader, expire every task at once and forget every session, and the
//! state's clock (the largest stamp ever applied) would then stay two hours ahead for every
//! later leader. Instead a leader takes the state's clock when it starts leading a term and
//! adds its own monotonic time since then. Clock offsets between masters then have no effect
//! at all; the state's clock only pauses while no leader proposes (an election), which delays
//! expiry by that gap and never advances it. A fresh group starts from the first leader's wall
//! clock, so stamps read like real times.

use crate::clock::Clock;
use crate::replicated_state::ReplicatedState;
use consensus::ConsensusNode;
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// The state's clock when this node's leadership of `term` began, and when that was here.
#[derive(Clone, Copy)]
struct Base {
    term: u64,
    state_ms: u64,
    at: Instant,
}

pub(crate) struct LeaderClock {
    clock: Arc<dyn Clock>,
    base: Mutex<Option<Base>>,
}

impl LeaderClock {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        Self { clock, base: Mutex::new(None) }
    }

    /// The time to stamp into a proposal made now.
    pub(crate) fn now_ms(&self, node: &ConsensusNode<ReplicatedState>) -> u64 {
        let term = node.term();
        let mut base = self.base.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let current = match *base {
            Some(known) if known.term == term => known,
            _ => {
                let applied_ms = node.read(|state| state.state().clock_ms());
                let state_ms = if applied_ms == 0 { self.clock.wall_ms() } else { applied_ms };
                *base.insert(Base { term, state_ms, at: self.clock.now() })
            }
        };
        let elapsed = self.clock.now().saturating_duration_since(current.at);
        let elapsed_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        current.state_ms.saturating_add(elapsed_ms)
    }
}
