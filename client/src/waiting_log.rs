//! `WaitingLog`: how many calls of this process wait for a master leader, and when one of them
//! last said so in the log. A training process holds several clients (a Python loader one per
//! task it asks ahead for, and some per DataLoader worker); were each waiting call to warn every
//! interval on its own, an outage of the masters would fill the log with a dozen lines every
//! ten seconds saying the same. One line per interval for the whole process says it, with the
//! count.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use tokio::time::Instant;

/// The process's waiting calls.
pub(crate) static PROCESS_WAITING: WaitingLog = WaitingLog::new();

pub(crate) struct WaitingLog {
    /// Calls waiting for a leader now (from their first failed attempt to their end).
    waiting: AtomicUsize,
    /// Milliseconds since `epoch` when a call last warned, plus one (0: none has).
    warned_at_ms: AtomicU64,
    epoch: OnceLock<Instant>,
}

impl WaitingLog {
    pub(crate) const fn new() -> Self {
        Self {
            waiting: AtomicUsize::new(0),
            warned_at_ms: AtomicU64::new(0),
            epoch: OnceLock::new(),
        }
    }

    /// A call begins to wait.
    pub(crate) fn enter(&self) {
        self.waiting.fetch_add(1, Ordering::Relaxed);
    }

    /// A call that waited ended.
    pub(crate) fn leave(&self) {
        self.waiting.fetch_sub(1, Ordering::Relaxed);
    }

    /// The calls waiting now.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Whether the calling call is the one to warn now: none of the process's calls warned in
    /// the last `interval_ms` (true for exactly one of several that ask at once).
    pub(crate) fn claim_warning(&self, interval_ms: u64) -> bool {
        let epoch = *self.epoch.get_or_init(Instant::now);
        let now = u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX).saturating_add(1);
        let last = self.warned_at_ms.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < interval_ms {
            return false;
        }
        self.warned_at_ms.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// One warning per interval among the calls of a process, whichever call asks; the count
    /// follows the calls that enter and leave.
    #[tokio::test(start_paused = true)]
    async fn one_call_of_the_process_warns_per_interval() {
        let log = WaitingLog::new();
        log.enter();
        log.enter();
        assert!(log.claim_warning(10_000), "the first call to ask warns");
        assert!(!log.claim_warning(10_000), "another asking at once does not");
        tokio::time::sleep(Duration::from_millis(9_999)).await;
        assert!(!log.claim_warning(10_000), "nor within the interval");
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(log.claim_warning(10_000), "one warns once the interval passed");
        assert_eq!(log.waiting(), 2);
        log.leave();
        assert_eq!(log.waiting(), 1);
    }
}
