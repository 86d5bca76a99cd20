//! The leader writes its own new entries to its disk while it replicates them (the Raft thesis,
//! section 10.2.1), instead of replicating only once its own flush is done.
//!
//! openraft 0.9.25 sends a leader's new entries to the followers only after the log store's
//! append callback, which reports the entries durable. So a log store acknowledges the
//! leader's *own* new entries at once ([`acknowledge_early`]) and flushes them meanwhile; every
//! other append (a follower's, which answers the leader only after it) is acknowledged after
//! its flush, as before. openraft then counts the leader's copy towards the quorum before it is
//! durable, so nothing that depends on a commit may be seen before the leader's flush covers
//! the committed entry, and the store publishes how far its log is durable ([`DurableLog`]):
//!
//! - the state machine applies an entry only once it is durable here (so no client is answered,
//!   and no linearizable read served, before a quorum *including this disk* has the entry);
//! - an AppendEntries leaves the leader with its `leader_commit` lowered to what is durable here
//!   (so no follower learns of a commit, applies it, or puts it in a snapshot, before that),
//!   at once: heartbeats never wait for the leader's disk.
//!
//! Together: by the time anything depends on an entry being committed, it is durable on the
//! leader and on a follower that acknowledged it: a quorum of three, as without this.
//!
//! Durability is tracked as a log id, not an index. A flush covering log id `d` makes every
//! entry of the log that is at or below `d` durable; entries that replace a truncated tail come
//! from a later leader and so have larger log ids than the ones they replace (Raft's Log
//! Matching: one (term, index) is one entry), so a flush of the old tail never vouches for them.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::{LogId, Vote};
use tokio::sync::Notify;

use crate::durability_error::{DurabilityError, FlushFailure};
use crate::fifo_wait;
use crate::type_config::Entry;

/// The writing side: the log store's flusher raises it after each flush. When the last clone
/// is dropped (the store closed), waiters still short of their entry are told so.
#[derive(Clone, Debug)]
pub struct DurableLog {
    writer: Arc<Writer>,
}

/// The one owner of the writing side; dropping it closes the log.
#[derive(Debug)]
struct Writer {
    shared: Arc<Shared>,
}

/// What both sides see. Waiters are woken through one `Notify`, which wakes them in the order
/// they began to wait: the leader's apply and its replication streams all wait here, and the
/// order they run in after a flush decides the order of the messages they send. (A
/// `tokio::sync::watch` spreads its waiters over eight queues chosen by tokio's unseeded
/// per-thread random numbers, so the same flush woke them in a different order from run to
/// run, and the simulation did not replay a seed.)
#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    raised: Notify,
    /// Told only when the log fails or closes: `failure`'s waiter is not woken by every flush.
    ended: Notify,
}

/// How far this node's log is durable, or why it never will be.
#[derive(Debug)]
struct State {
    /// Everything appended up to this log id is durable (`None`: nothing yet).
    durable: Option<LogId<u64>>,
    /// A flush failed, so nothing more will become durable and the node must stop.
    failure: Option<FlushFailure>,
    /// Every writer is gone: nothing more will become durable.
    closed: bool,
}

impl DurableLog {
    /// A log durable up to `last` (what was on disk when it was opened).
    pub fn new(last: Option<LogId<u64>>) -> Self {
        let state = State { durable: last, failure: None, closed: false };
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            raised: Notify::new(),
            ended: Notify::new(),
        });
        Self { writer: Arc::new(Writer { shared }) }
    }

    /// A flush made everything appended up to `log_id` durable.
    pub fn flushed(&self, log_id: LogId<u64>) {
        self.writer.shared.change(|state| {
            let raised = state.failure.is_none() && state.durable < Some(log_id);
            if raised {
                state.durable = Some(log_id);
            }
            raised
        });
    }

    /// A flush failed with `error`: nothing more will become durable.
    pub fn failed(&self, error: &io::Error) {
        self.writer.shared.change(|state| {
            state.failure = Some(FlushFailure::from(error));
            true
        });
        self.writer.shared.ended.notify_waiters();
    }

    /// A reader, for the gates.
    pub fn watch(&self) -> DurableWatch {
        DurableWatch { shared: Arc::clone(&self.writer.shared) }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.shared.change(|state| {
            state.closed = true;
            true
        });
        self.shared.ended.notify_waiters();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change is one assignment; a panicking holder leaves a consistent state.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Applies `change` and, if it says the state changed, wakes every waiter.
    fn change(&self, change: impl FnOnce(&mut State) -> bool) {
        let changed = change(&mut self.lock());
        if changed {
            self.raised.notify_waiters();
        }
    }
}

impl State {
    /// The answer for a waiter of `log_id`, or `None` while it must wait.
    fn covers(&self, log_id: LogId<u64>) -> Option<Result<(), DurabilityError>> {
        if let Some(failure) = &self.failure {
            return Some(Err(DurabilityError::FlushFailed(failure.clone())));
        }
        if self.durable >= Some(log_id) {
            return Some(Ok(()));
        }
        self.closed.then_some(Err(DurabilityError::Closed))
    }
}

/// The reading side: waits until a log id is durable.
#[derive(Clone, Debug)]
pub struct DurableWatch {
    shared: Arc<Shared>,
}

impl DurableWatch {
    /// Returns once `log_id` is durable on this node, or why it will never be.
    pub async fn covers(&self, log_id: LogId<u64>) -> Result<(), DurabilityError> {
        fifo_wait::until(&self.shared.raised, || self.shared.lock().covers(log_id)).await
    }

    /// How far the log is durable now, or why it never will be again (a flush failed).
    pub fn durable_now(&self) -> Result<Option<LogId<u64>>, DurabilityError> {
        let state = self.shared.lock();
        match &state.failure {
            Some(failure) => Err(DurabilityError::FlushFailed(failure.clone())),
            None => Ok(state.durable),
        }
    }

    /// Why a flush failed, if one did.
    pub fn failure_now(&self) -> Option<FlushFailure> {
        self.shared.lock().failure.clone()
    }

    /// Resolves with why once a flush failed (the node must stop: nothing more becomes durable,
    /// and the leader's own entries, acknowledged early, cannot be reported failed to
    /// openraft); `None` if the log closed first.
    pub async fn failure(&self) -> Option<FlushFailure> {
        fifo_wait::until(&self.shared.ended, || {
            let state = self.shared.lock();
            match &state.failure {
                Some(reason) => Some(Some(reason.clone())),
                None => state.closed.then_some(None),
            }
        })
        .await
    }
}

/// Whether an append of `entries` may be acknowledged before it is durable: only when they are
/// this node's own entries, proposed as leader of the term it holds its own vote in (`own_id`
/// and `vote` as the store knows them). Entries with this node's leader id that arrive in a
/// later term (it lost them in a crash and a new leader sends them back) are a follower's
/// append and wait for their flush.
pub fn acknowledge_early(entries: &[Entry], own_id: Option<u64>, vote: Option<&Vote<u64>>) -> bool {
    let (Some(own_id), Some(vote)) = (own_id, vote) else {
        return false;
    };
    let leader = vote.leader_id();
    if leader.voted_for() != Some(own_id) {
        return false;
    }
    !entries.is_empty()
        && entries.iter().all(|entry| {
            let id = entry.log_id.leader_id;
            id.term == leader.term && id.node_id == own_id
        })
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;

    fn entry(term: u64, node_id: u64, index: u64) -> Entry {
        let log_id = LogId::new(CommittedLeaderId::new(term, node_id), index);
        Entry { log_id, payload: EntryPayload::Blank }
    }

    /// Only a leader's own entries of the term it voted for itself in are acknowledged early.
    #[test]
    fn only_the_leaders_own_entries_are_acknowledged_early() {
        let check = |entries: &[Entry], own: Option<u64>, vote: Option<Vote<u64>>, early: bool| {
            assert_eq!(
                acknowledge_early(entries, own, vote.as_ref()),
                early,
                "{entries:?} {vote:?}"
            );
        };
        let leading = Some(Vote::new_committed(3, 1));
        check(&[entry(3, 1, 7), entry(3, 1, 8)], Some(1), leading, true);
        check(&[entry(3, 1, 7), entry(2, 2, 8)], Some(1), leading, false);
        check(&[entry(3, 2, 7)], Some(1), leading, false);
        check(&[entry(2, 1, 7)], Some(1), Some(Vote::new_committed(3, 2)), false);
        check(&[entry(3, 1, 7)], Some(1), Some(Vote::new_committed(4, 1)), false);
        check(&[entry(3, 1, 7)], None, leading, false);
        check(&[entry(3, 1, 7)], Some(1), None, false);
        check(&[], Some(1), leading, false);
    }

    fn log_id(term: u64, index: u64) -> LogId<u64> {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    /// A watcher returns once the durable log id reaches its entry, never for a larger one,
    /// and with an error once a flush failed.
    #[tokio::test]
    async fn a_watch_waits_for_the_flush_that_covers_it() {
        let durable = DurableLog::new(None);
        let watch = durable.watch();
        durable.flushed(log_id(2, 5));
        watch.covers(log_id(2, 5)).await.expect("5 is durable");
        watch.covers(log_id(1, 9)).await.expect("an older term's entry below is durable");
        let waiting = tokio::spawn({
            let watch = watch.clone();
            async move { watch.covers(log_id(2, 6)).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "6 is not durable yet");
        durable.flushed(log_id(2, 4));
        durable.flushed(log_id(2, 6));
        waiting.await.expect("the task runs").expect("6 is durable");
        durable.failed(&io::Error::other("disk gone"));
        let failed = Err(DurabilityError::FlushFailed(FlushFailure {
            kind: io::ErrorKind::Other,
            message: "disk gone".to_string(),
        }));
        assert_eq!(watch.covers(log_id(2, 7)).await, failed);
        assert_eq!(watch.covers(log_id(2, 6)).await, failed, "after a failed flush, nothing is");
    }

    /// `failure` waits through successful flushes and answers the first failure's reason; a
    /// store that closes without one answers `None`.
    #[tokio::test]
    async fn failure_resolves_only_on_a_failed_flush() {
        let durable = DurableLog::new(None);
        let failing = tokio::spawn({
            let watch = durable.watch();
            async move { watch.failure().await }
        });
        durable.flushed(log_id(2, 5));
        tokio::task::yield_now().await;
        assert!(!failing.is_finished(), "a successful flush is no failure");
        assert_eq!(durable.watch().failure_now(), None);
        durable.failed(&io::Error::new(io::ErrorKind::StorageFull, "EIO"));
        let eio = FlushFailure { kind: io::ErrorKind::StorageFull, message: "EIO".to_string() };
        assert_eq!(failing.await.expect("the task runs"), Some(eio.clone()));
        assert_eq!(durable.watch().failure_now(), Some(eio));
        let closed = DurableLog::new(None);
        let watch = closed.watch();
        drop(closed);
        assert_eq!(watch.failure().await, None);
    }

    /// When the store closes (every writer dropped), a waiter short of its entry is told so,
    /// while an entry that was durable stays durable.
    #[tokio::test]
    async fn closing_the_store_ends_the_wait() {
        let durable = DurableLog::new(Some(log_id(2, 3)));
        let watch = durable.watch();
        let waiting = tokio::spawn({
            let watch = watch.clone();
            async move { watch.covers(log_id(2, 4)).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "4 is not durable yet");
        let writers = [durable.clone(), durable];
        drop(writers);
        let closed = waiting.await.expect("the task runs");
        assert_eq!(closed, Err(DurabilityError::Closed));
        assert_eq!(DurabilityError::Closed.to_string(), "the log store is closed");
        watch.covers(log_id(2, 3)).await.expect("3 was durable before the store closed");
    }

    /// One flush wakes its waiters in the order they began to wait, in every run: the leader's
    /// apply and its replication streams wait here together, and the messages they send after
    /// the flush must leave in one order for the simulation to replay a seed. (Over a
    /// `tokio::sync::watch`, sixteen waiters came out in a random order.)
    #[tokio::test]
    async fn waiters_wake_in_the_order_they_began_to_wait() {
        let durable = DurableLog::new(None);
        let woken = Arc::new(Mutex::new(Vec::new()));
        let waiters: Vec<_> = (0..16)
            .map(|waiter| {
                let (watch, woken) = (durable.watch(), Arc::clone(&woken));
                tokio::spawn(async move {
                    watch.covers(log_id(2, 1)).await.expect("1 becomes durable");
                    woken.lock().expect("no waiter panics holding it").push(waiter);
                })
            })
            .collect();
        tokio::task::yield_now().await;
        assert!(woken.lock().expect("no waiter panics holding it").is_empty(), "nothing durable");
        durable.flushed(log_id(2, 1));
        for waiter in waiters {
            waiter.await.expect("the waiter runs");
        }
        let order = woken.lock().expect("no waiter panics holding it").clone();
        assert_eq!(order, (0..16).collect::<Vec<_>>());
    }
}
