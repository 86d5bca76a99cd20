//! How far the state machine has applied, for linearizable reads: a reader that learned which
//! entry its read must see (`Raft::get_read_log_id`) waits here until that entry is applied.
//!
//! openraft's own `ensure_linearizable` waits on its metrics (a `tokio::sync::watch`), which
//! wakes its waiters in an order drawn from tokio's unseeded per-thread random numbers. Readers
//! woken by one apply then answer their clients in a different order from run to run, and the
//! simulation did not replay a seed (two pservers' slot heartbeats, two registrations batched
//! into one entry in either order). Here one `Notify` wakes waiters in the order they began to
//! wait, as `durable_log` does for the same reason.

use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

/// The index of the last applied entry, and who waits for it to rise.
#[derive(Debug)]
pub(crate) struct AppliedIndex {
    index: Mutex<u64>,
    raised: Notify,
}

impl AppliedIndex {
    /// Starts at `index` (what a restored snapshot holds; 0 for nothing).
    pub(crate) fn new(index: u64) -> Self {
        Self { index: Mutex::new(index), raised: Notify::new() }
    }

    /// Everything up to `index` is applied; a lower index (never sent) changes nothing.
    pub(crate) fn raise(&self, index: u64) {
        let raised = {
            let mut applied = self.lock();
            let raised = *applied < index;
            *applied = (*applied).max(index);
            raised
        };
        if raised {
            self.raised.notify_waiters();
        }
    }

    /// Returns once the entry at `index` is applied.
    pub(crate) async fn reaches(&self, index: u64) {
        crate::fifo_wait::until(&self.raised, || (*self.lock() >= index).then_some(())).await;
    }

    fn lock(&self) -> MutexGuard<'_, u64> {
        // Every change is one assignment; a panicking holder leaves a consistent index.
        self.index.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// A reader returns once its entry is applied, not before, and at once if it already is.
    #[tokio::test]
    async fn a_reader_waits_until_its_entry_is_applied() {
        let applied = Arc::new(AppliedIndex::new(3));
        applied.reaches(3).await;
        let waiting = tokio::spawn({
            let applied = Arc::clone(&applied);
            async move { applied.reaches(5).await }
        });
        tokio::task::yield_now().await;
        applied.raise(4);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "5 is not applied yet");
        applied.raise(6);
        waiting.await.expect("the reader runs");
        applied.raise(2);
        applied.reaches(6).await;
    }

    /// One apply wakes its readers in the order they began to wait, in every run (see the
    /// module doc: over openraft's metrics watch they answered in a random order).
    #[tokio::test]
    async fn readers_wake_in_the_order_they_began_to_wait() {
        let applied = Arc::new(AppliedIndex::new(0));
        let woken = Arc::new(Mutex::new(Vec::new()));
        let readers: Vec<_> = (0..16)
            .map(|reader| {
                let (applied, woken) = (Arc::clone(&applied), Arc::clone(&woken));
                tokio::spawn(async move {
                    applied.reaches(1).await;
                    woken.lock().expect("no reader panics holding it").push(reader);
                })
            })
            .collect();
        tokio::task::yield_now().await;
        applied.raise(1);
        for reader in readers {
            reader.await.expect("the reader runs");
        }
        let order = woken.lock().expect("no reader panics holding it").clone();
        assert_eq!(order, (0..16).collect::<Vec<_>>());
    }
}
