//! `WarningPace`: how often a condition that persists (the job does not exist, the table
//! watch keeps failing) is warned about: at once, then at most every `quiet`, each warning
//! saying how many it stands for. A `PServerClient` for a job that did not exist warned every
//! 200 ms, once per failed watch (issue 35).

use std::time::{Duration, Instant};

/// The pace of one kind of warning.
#[derive(Debug)]
pub(super) struct WarningPace {
    quiet: Duration,
    warned_at: Option<Instant>,
    /// Occurrences since the last warning, not warned about.
    held_back: u64,
}

impl WarningPace {
    pub(super) fn new(quiet: Duration) -> Self {
        Self { quiet, warned_at: None, held_back: 0 }
    }

    /// Whether to warn about an occurrence at `now`: `Some(occurrences held back since the
    /// last warning)` when due, `None` to stay quiet.
    pub(super) fn due(&mut self, now: Instant) -> Option<u64> {
        if self.warned_at.is_some_and(|warned| now < warned + self.quiet) {
            self.held_back += 1;
            return None;
        }
        self.warned_at = Some(now);
        Some(std::mem::take(&mut self.held_back))
    }

    /// The condition ended: the next occurrence is warned about at once.
    pub(super) fn reset(&mut self) {
        self.warned_at = None;
        self.held_back = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One warning at once, then one per quiet period however often it happens, each
    /// counting the quiet ones; after a reset, at once again.
    #[test]
    fn warnings_come_at_once_then_at_most_once_per_quiet_period() {
        let start = Instant::now();
        let mut pace = WarningPace::new(Duration::from_secs(10));
        // An occurrence every 200 ms for 25 s, as the watch of a missing job failed.
        let warned: Vec<(u64, u64)> = (0..125u64)
            .filter_map(|step| {
                let at = start + Duration::from_millis(200 * step);
                pace.due(at).map(|held_back| (step * 200, held_back))
            })
            .collect();
        assert_eq!(warned, [(0, 0), (10_000, 49), (20_000, 49)]);
        pace.reset();
        assert_eq!(pace.due(start + Duration::from_millis(25_100)), Some(0));
    }
}
