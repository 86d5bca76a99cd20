//! How long the batcher waits for a fuller batch. Closed-loop writers answered by one entry
//! come back within a moment; proposing the first of them alone would start a whole Raft round
//! for one write while the others queue behind it, so batch sizes would alternate between tiny
//! and large. The batcher therefore waits for as many writes as the last entry answered, but
//! never longer than a fraction of the last round, so a writer that does not come back costs
//! at most that.

use std::time::Duration;

/// The wait is at most this part of the last entry's commit time...
const LINGER_ROUND_DIVISOR: u32 = 2;
/// ...and never longer than this.
const LINGER_MAX: Duration = Duration::from_millis(2);

/// What the last answered entry says about the next one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BatchPace {
    /// Writes the last entry answered: the writers expected back.
    answered: usize,
    /// From proposing the last entry to its answer.
    round: Duration,
}

impl BatchPace {
    /// The pace after an entry of `answered` writes took `round` to commit and apply.
    pub(crate) fn new(answered: usize, round: Duration) -> Self {
        Self { answered, round }
    }

    /// Whether a batch of `gathered` writes should wait for more.
    pub(crate) fn wants_more(&self, gathered: usize) -> bool {
        gathered < self.answered
    }

    /// The longest wait for more writes, counted from when the batch could be proposed.
    pub(crate) fn linger(&self) -> Duration {
        (self.round / LINGER_ROUND_DIVISOR).min(LINGER_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_batch_never_waits() {
        let pace = BatchPace::default();
        assert!(!pace.wants_more(1));
        assert_eq!(pace.linger(), Duration::ZERO);
    }

    #[test]
    fn waits_for_the_writers_the_last_entry_answered() {
        let pace = BatchPace::new(64, Duration::from_millis(3));
        assert!(pace.wants_more(1));
        assert!(pace.wants_more(63));
        assert!(!pace.wants_more(64));
        assert_eq!(pace.linger(), Duration::from_micros(1500));
    }

    #[test]
    fn a_slow_round_still_waits_at_most_the_cap() {
        let pace = BatchPace::new(8, Duration::from_secs(1));
        assert_eq!(pace.linger(), LINGER_MAX);
    }

    #[test]
    fn a_lone_writer_never_waits() {
        let pace = BatchPace::new(1, Duration::from_millis(1));
        assert!(!pace.wants_more(1));
    }
}
