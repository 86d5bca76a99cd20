//! How long the batcher waits for a fuller batch. Closed-loop writers answered by one entry
//! come back within a moment; proposing the first of them alone would start a whole Raft round
//! for one write while the others queue behind it, so batch sizes would alternate between tiny
//! and large. The batcher therefore waits for as many writers as the last entry answered, but
//! never longer than a fraction of the last round, so a writer that does not come back costs
//! at most that.
//!
//! Writers, not writes: writes a client sent together (`ConsensusNode::write_together`, a
//! training process asking for two tasks at once) are one writer's, who may come back with a
//! single write. Counted as writes, an entry of one such pair made the next write alone wait
//! the whole linger for a second that was never coming (every pass's last ask of a
//! `TaskLoader`, which follows a pair: 4.4-6.6 ms instead of 1.7-3.0 ms).

use std::time::Duration;

/// The wait is at most this part of the last entry's commit time...
const LINGER_ROUND_DIVISOR: u32 = 2;
/// ...and never longer than this.
const LINGER_MAX: Duration = Duration::from_millis(2);

/// One writer, in the shares [`writer_share`] counts: divisible by every count of writes sent
/// together, 1 to [`crate::batcher::TOGETHER_MAX`] (the test `writes_sent_together_are_one_writers`
/// fails for a maximum it does not divide).
pub(crate) const WRITER: usize = 840;

/// The share of one writer that a write sent together with `together - 1` others is (`together`
/// from 1 to [`crate::batcher::TOGETHER_MAX`]).
pub(crate) fn writer_share(together: usize) -> usize {
    WRITER / together
}

/// What the last answered entry says about the next one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BatchPace {
    /// The writers the last entry answered, in [`writer_share`]s: those expected back.
    answered: usize,
    /// From proposing the last entry to its answer.
    round: Duration,
}

impl BatchPace {
    /// The pace after an entry of `answered` writers (in [`writer_share`]s) took `round` to
    /// commit and apply.
    pub(crate) fn new(answered: usize, round: Duration) -> Self {
        Self { answered, round }
    }

    /// Whether a batch of `gathered` writers (in [`writer_share`]s) should wait for more.
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
        assert!(!pace.wants_more(WRITER));
        assert_eq!(pace.linger(), Duration::ZERO);
    }

    #[test]
    fn waits_for_the_writers_the_last_entry_answered() {
        let pace = BatchPace::new(64 * WRITER, Duration::from_millis(3));
        assert!(pace.wants_more(WRITER));
        assert!(pace.wants_more(63 * WRITER));
        assert!(!pace.wants_more(64 * WRITER));
        assert_eq!(pace.linger(), Duration::from_micros(1500));
    }

    #[test]
    fn a_slow_round_still_waits_at_most_the_cap() {
        let pace = BatchPace::new(8 * WRITER, Duration::from_secs(1));
        assert_eq!(pace.linger(), LINGER_MAX);
    }

    #[test]
    fn a_lone_writer_never_waits() {
        let pace = BatchPace::new(WRITER, Duration::from_millis(1));
        assert!(!pace.wants_more(WRITER));
    }

    #[test]
    fn writes_sent_together_are_one_writers() {
        let pair = 2 * writer_share(2);
        let pace = BatchPace::new(pair, Duration::from_millis(3));
        assert!(!pace.wants_more(writer_share(1)), "the pair's writer came back alone");
        assert!(pace.wants_more(writer_share(2)), "half the pair");
        let shares: usize = (1..=crate::batcher::TOGETHER_MAX).map(|n| n * writer_share(n)).sum();
        assert_eq!(shares, crate::batcher::TOGETHER_MAX * WRITER, "every group is one writer");
    }
}
