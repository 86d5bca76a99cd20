//! `ApplyObserver`: a tap on the state machine that sees every applied entry and the answers
//! it produced. Production runs without one; the simulation's checkers compare what every
//! replica applied at every index through it.

use crate::type_config::Entry;

/// Sees each entry a node applies, in order, with the answer of each of its commands.
pub trait ApplyObserver: Send + Sync + 'static {
    fn applied(&self, entry: &Entry, responses: &[Vec<u8>]);
}
