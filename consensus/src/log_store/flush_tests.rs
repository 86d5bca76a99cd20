//! Where an append's flush happens: on the append's own task when nothing else is flushing or
//! waiting for the flusher thread and the last flush was fast, else on the thread; either way
//! the entries are durable (and published so) before openraft hears of it.

use std::time::Duration;

use openraft::storage::RaftLogStorageExt;
use openraft::{CommittedLeaderId, EntryPayload};

use super::*;
use crate::flush_seat::IN_PLACE_FLUSH_MAX;

fn blank(index: u64) -> Entry {
    Entry { log_id: LogId::new(CommittedLeaderId::new(1, 2), index), payload: EntryPayload::Blank }
}

/// How far the store's log is published durable.
fn durable_index(store: &LogStore) -> Option<u64> {
    let durable = store.durable.watch().durable_now().expect("no flush failed");
    durable.map(|log_id| log_id.index)
}

/// A follower's append (not this node's own entries) with nothing else flushing flushes on
/// its own task: answered before `append` returns, and published durable first.
#[tokio::test]
async fn an_append_flushes_on_its_own_task_when_nothing_else_flushes() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (mut store, _closed) = LogStore::open(dir.path()).expect("an empty log opens");
    let seat = store.flusher.seat();
    store.blocking_append([blank(1), blank(2)]).await.expect("the append is durable");
    assert_eq!((seat.in_place(), durable_index(&store)), (1, Some(2)));
    seat.pretend_last_flush(Duration::ZERO);
    store.blocking_append([blank(3)]).await.expect("the append is durable");
    assert_eq!((seat.in_place(), durable_index(&store)), (2, Some(3)));
}

/// While the flusher thread holds the seat (a flush or a purge chunk under way), an append
/// goes to the thread, which answers it once the seat is free; and the next append, with a
/// request still outstanding on the thread, does not overtake it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_waits_for_the_thread_while_it_holds_the_seat() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (mut store, _closed) = LogStore::open(dir.path()).expect("an empty log opens");
    let seat = store.flusher.seat();
    let held = seat.take();
    let append = tokio::spawn(async move {
        store.blocking_append([blank(1)]).await.expect("the append is durable");
        store
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!append.is_finished(), "the append was answered while the seat was held");
    assert_eq!(seat.in_place(), 0);
    drop(held);
    let mut store = append.await.expect("the append's task runs");
    assert_eq!((seat.in_place(), durable_index(&store)), (0, Some(1)));
    // Nothing outstanding any more: the next append flushes in place again.
    store.flusher.until_idle().await;
    seat.pretend_last_flush(Duration::ZERO);
    store.blocking_append([blank(2)]).await.expect("the append is durable");
    assert_eq!((seat.in_place(), durable_index(&store)), (1, Some(2)));
}

/// After a slow flush, appends go to the thread (a slowing disk is not waited for on a
/// runtime worker), until a flush is fast again.
#[tokio::test]
async fn after_a_slow_flush_appends_go_to_the_thread() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (mut store, _closed) = LogStore::open(dir.path()).expect("an empty log opens");
    let seat = store.flusher.seat();
    seat.pretend_last_flush(IN_PLACE_FLUSH_MAX + Duration::from_micros(1));
    store.blocking_append([blank(1)]).await.expect("the append is durable");
    assert_eq!((seat.in_place(), durable_index(&store)), (0, Some(1)));
    // The thread's flush is timed too: the next append goes where its time says.
    store.flusher.until_idle().await;
    let in_place = u64::from(seat.last_flush() <= IN_PLACE_FLUSH_MAX);
    store.blocking_append([blank(2)]).await.expect("the append is durable");
    assert_eq!((seat.in_place(), durable_index(&store)), (in_place, Some(2)));
}

/// The leader's own entries are acknowledged at once and flushed by the thread while they
/// replicate (`durable_log`): never in place, which would hold the replication up.
#[tokio::test]
async fn the_leaders_own_entries_go_to_the_thread() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (mut store, _closed) = LogStore::open(dir.path()).expect("an empty log opens");
    store.own_id = Some(2);
    store.save_vote(&Vote::new_committed(1, 2)).await.expect("the vote is saved");
    store.blocking_append([blank(1)]).await.expect("the append is acknowledged");
    store.durable.watch().covers(blank(1).log_id).await.expect("the thread flushes it");
    assert_eq!(store.flusher.seat().in_place(), 0);
}
