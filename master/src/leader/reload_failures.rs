//! `ReloadFailures`: why a pserver could not reload the file a restore asked it for, as its
//! holder last said. Soft state of the leader, like the leases: the replicated state only knows
//! that the restore still waits for the slot; this says why, for `job list` and `status`. A
//! holder says it again at every attempt, so a new leader learns it within a heartbeat or two.
//!
//! Bounded: one reason per (job, slot), each at most [`RELOAD_FAILURE_BYTES_MAX`] bytes, and at
//! most [`RELOAD_FAILURES_MAX`] slots (the oldest report goes first).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// The longest reason kept, in bytes (a longer one is cut at a character boundary).
pub const RELOAD_FAILURE_BYTES_MAX: usize = 1_024;
/// The most slots whose reasons are kept at once.
pub const RELOAD_FAILURES_MAX: usize = 1_024;

/// A slot of a job: (job id, slot index).
type SlotOfJob = (u64, u32);

/// The holders' reasons, by slot.
#[derive(Default)]
pub(crate) struct ReloadFailures {
    /// Slot to (holder's generation, reason, report number): the number orders the reports.
    reasons: Mutex<BTreeMap<SlotOfJob, (u64, String, u64)>>,
    reports: std::sync::atomic::AtomicU64,
}

impl ReloadFailures {
    /// Keeps `reason` as what the holder of `generation` of `slot` of job `job` said.
    pub(crate) fn report(&self, (job, slot, generation): (u64, u32, u64), reason: &str) {
        let number = self.reports.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let reason = cut(reason, RELOAD_FAILURE_BYTES_MAX).to_string();
        let mut reasons = lock(&self.reasons);
        reasons.insert((job, slot), (generation, reason, number));
        while reasons.len() > RELOAD_FAILURES_MAX {
            let oldest = reasons.iter().min_by_key(|(_, (_, _, number))| *number);
            let Some(key) = oldest.map(|(key, _)| *key) else { break };
            reasons.remove(&key);
        }
    }

    /// The reason the holder of `generation` of `slot` of job `job` gave, if it gave one.
    pub(crate) fn reason(&self, (job, slot, generation): (u64, u32, u64)) -> Option<String> {
        let reasons = lock(&self.reasons);
        let (said_by, reason, _) = reasons.get(&(job, slot))?;
        (*said_by == generation).then(|| reason.clone())
    }

    /// Forgets every reason (a new term: they are heard again).
    pub(crate) fn clear(&self) {
        lock(&self.reasons).clear();
    }
}

/// At most `bytes_max` bytes of `text`, cut at a character boundary.
fn cut(text: &str, bytes_max: usize) -> &str {
    let mut end = text.len().min(bytes_max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reason is the current holder's only, cut to its bound, and the oldest goes first.
    #[test]
    fn reasons_are_the_holders_own_and_bounded() {
        let failures = ReloadFailures::default();
        failures.report((1, 0, 5), "missing file");
        assert_eq!(failures.reason((1, 0, 5)).as_deref(), Some("missing file"));
        assert_eq!(failures.reason((1, 0, 6)), None, "another holder said nothing");
        failures.report((1, 1, 7), &"é".repeat(RELOAD_FAILURE_BYTES_MAX));
        let long = failures.reason((1, 1, 7)).expect("kept");
        assert!(long.len() <= RELOAD_FAILURE_BYTES_MAX && long.starts_with('é'));
        for slot in 0..RELOAD_FAILURES_MAX as u32 {
            failures.report((2, slot, 1), "x");
        }
        assert_eq!(failures.reason((1, 0, 5)), None, "the oldest report went first");
        failures.clear();
        assert_eq!(failures.reason((2, 3, 1)), None);
    }
}
