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
//! - an AppendEntries leaves the leader only once its `leader_commit` is durable here (so no
//!   follower learns of a commit, applies it, or puts it in a snapshot, before that).
//!
//! Together: by the time anything depends on an entry being committed, it is durable on the
//! leader and on a follower that acknowledged it: a quorum of three, as without this.
//!
//! Durability is tracked as a log id, not an index. A flush covering log id `d` makes every
//! entry of the log that is at or below `d` durable; entries that replace a truncated tail come
//! from a later leader and so have larger log ids than the ones they replace (Raft's Log
//! Matching: one (term, index) is one entry), so a flush of the old tail never vouches for them.

use std::sync::Arc;

use openraft::{LogId, Vote};
use tokio::sync::watch;

use crate::type_config::Entry;

/// How far this node's log is durable: a log id (`None`: nothing yet), or why it never will be
/// (a flush failed, so the node must stop).
pub type Durability = Result<Option<LogId<u64>>, String>;

/// The writing side: the log store's flusher raises it after each flush.
#[derive(Clone, Debug)]
pub struct DurableLog {
    sender: Arc<watch::Sender<Durability>>,
}

impl DurableLog {
    /// A log durable up to `last` (what was on disk when it was opened).
    pub fn new(last: Option<LogId<u64>>) -> Self {
        Self { sender: Arc::new(watch::Sender::new(Ok(last))) }
    }

    /// A flush made everything appended up to `log_id` durable.
    pub fn flushed(&self, log_id: LogId<u64>) {
        self.sender.send_if_modified(|durable| match durable {
            Ok(known) if *known < Some(log_id) => {
                *known = Some(log_id);
                true
            }
            _ => false,
        });
    }

    /// A flush failed: nothing more will become durable.
    pub fn failed(&self, reason: String) {
        drop(self.sender.send_replace(Err(reason)));
    }

    /// A reader, for the gates.
    pub fn watch(&self) -> DurableWatch {
        DurableWatch { receiver: self.sender.subscribe() }
    }
}

/// The reading side: waits until a log id is durable.
#[derive(Clone, Debug)]
pub struct DurableWatch {
    receiver: watch::Receiver<Durability>,
}

impl DurableWatch {
    /// Returns once `log_id` is durable on this node, or why it will never be.
    pub async fn covers(&mut self, log_id: LogId<u64>) -> Result<(), String> {
        let reached = self
            .receiver
            .wait_for(|durable| !matches!(durable, Ok(known) if *known < Some(log_id)))
            .await
            .map_err(|_| "the log store is closed".to_string())?;
        match &*reached {
            Ok(_) => Ok(()),
            Err(reason) => Err(format!("the log cannot be made durable: {reason}")),
        }
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

    /// A watcher returns once the durable log id reaches its entry, never for a larger one,
    /// and with an error once a flush failed.
    #[tokio::test]
    async fn a_watch_waits_for_the_flush_that_covers_it() {
        let durable = DurableLog::new(None);
        let mut watch = durable.watch();
        let log_id = |term, index| LogId::new(CommittedLeaderId::new(term, 1), index);
        durable.flushed(log_id(2, 5));
        watch.covers(log_id(2, 5)).await.expect("5 is durable");
        watch.covers(log_id(1, 9)).await.expect("an older term's entry below is durable");
        let waiting = tokio::spawn({
            let mut watch = watch.clone();
            async move { watch.covers(log_id(2, 6)).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "6 is not durable yet");
        durable.flushed(log_id(2, 4));
        durable.flushed(log_id(2, 6));
        waiting.await.expect("the task runs").expect("6 is durable");
        durable.failed("disk gone".to_string());
        assert!(watch.covers(log_id(2, 7)).await.is_err());
    }
}
