//! Purges: held back until a durable snapshot covers them, recorded at once, and their entries
//! removed by the flusher thread a chunk at a time, also when a stop left some behind.

use std::time::Duration;

use openraft::{CommittedLeaderId, EntryPayload};

use super::*;

fn log_id(index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

/// Stores blank entries `first..=last` as appends would, without waiting for a flush.
fn store_entries(store: &LogStore, first: u64, last: u64) {
    let entries: Vec<Entry> = (first..=last)
        .map(|index| Entry { log_id: log_id(index), payload: EntryPayload::Blank })
        .collect();
    insert_entries(&store.db, &entries).expect("sled takes the entries");
}

/// How many entries at or below `index` are still stored.
fn stored_upto(store: &LogStore, index: u64) -> usize {
    store.db.range(purged_keys(index)).count()
}

/// Waits until no entry at or below `index` is stored (the flusher removed them all).
async fn wait_removed(store: &LogStore, index: u64) {
    for _ in 0..600 {
        if stored_upto(store, index) == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} purged entries at or below {index} are still stored", stored_upto(store, index));
}

/// A purge attached to a state machine store completes only once a durable snapshot covers
/// the purged entries, so the purge can never reach the disk before the snapshot file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_waits_for_the_snapshot_that_covers_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (mut store, _closed) = LogStore::open(dir.path()).expect("an empty log opens");
    let (durable, receiver) = watch::channel(None);
    store.purge_behind(receiver);

    let purge = tokio::spawn(async move {
        store.purge(log_id(5)).await.expect("the purge succeeds");
        store
    });
    durable.send_replace(Some(log_id(4)));
    tokio::task::yield_now().await;
    assert!(!purge.is_finished(), "a snapshot up to 4 does not cover a purge up to 5");
    durable.send_replace(Some(log_id(5)));
    let mut store = purge.await.expect("the purge task runs");
    let state = store.get_log_state().await.expect("the log state reads");
    assert_eq!(state.last_purged_log_id, Some(log_id(5)));
}

/// A purge of a snapshot interval's entries does not hold the log up: a flush asked for right
/// after it is answered while most of the purged entries are still stored (removing them all
/// in one batch stalled openraft's task, and the node, for most of a second), the purged
/// entries are never read again, and the flusher removes them all in the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_purge_is_removed_between_flushes() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (mut store, _closed) = LogStore::open(dir.path()).expect("an empty log opens");
    store_entries(&store, 1, 50_010);
    store.purge(log_id(50_000)).await.expect("the purge is recorded");
    store.flusher.sync().await.expect("a flush after the purge");
    // The whole purge is about 200 chunks: some are left whatever the scheduling (the purge in
    // one batch left none once it returned).
    let left = stored_upto(&store, 50_000);
    assert!(left > 0, "the flush waited for the whole purge");

    let read = store.try_get_log_entries(0..=50_010).await.expect("the log reads");
    let indexes: Vec<u64> = read.iter().map(|entry| entry.log_id.index).collect();
    assert_eq!(indexes, (50_001..=50_010).collect::<Vec<_>>(), "only entries after the purge");
    let state = store.get_log_state().await.expect("the log state reads");
    assert_eq!(
        (state.last_purged_log_id, state.last_log_id),
        (Some(log_id(50_000)), Some(log_id(50_010)))
    );
    wait_removed(&store, 50_000).await;
    assert_eq!(store.db.range(LOG_PREFIX..LOG_END).count(), 10, "the entries after the purge stay");
}

/// Entries a stop left at or below the purged id (here a purge past the whole log, as a
/// snapshot's installation makes) are never read, the log ends at the purged id, and the next
/// open removes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purged_entries_a_stop_left_are_removed_at_the_next_open() {
    let dir = tempfile::tempdir().expect("a temp dir");
    {
        let (store, closed) = LogStore::open(dir.path()).expect("an empty log opens");
        store_entries(&store, 1, 1_000);
        write_value(&store.db, PURGED_KEY, &log_id(1_500)).expect("the purged id is written");
        store.flusher.sync().await.expect("a flush");
        drop(store);
        closed.wait(Duration::from_secs(30)).await.expect("the log closes");
    }
    let (mut store, _closed) = LogStore::open(dir.path()).expect("the log opens again");
    let state = store.get_log_state().await.expect("the log state reads");
    assert_eq!(
        (state.last_purged_log_id, state.last_log_id),
        (Some(log_id(1_500)), Some(log_id(1_500)))
    );
    let read = store.try_get_log_entries(0..2_000).await.expect("the log reads");
    assert!(read.is_empty(), "purged entries are read: {}", read.len());
    wait_removed(&store, 1_500).await;
}
