//! Where the sled log is made durable: a thread that flushes it (see `flush_seat`), batching
//! every request that arrived meanwhile into one fsync, and publishing how far the log is
//! durable ([`DurableLog`]) before it answers anyone.
//!
//! An append that would wait for its flush (a follower's: openraft answers the leader only
//! after it) flushes on its own task instead when nothing else is flushing or waiting to, and
//! the last flush was fast ([`Flusher::appended`]): handing the flush to the thread and its
//! answer back to the runtime were two thread wake-ups on the path of every replicated write
//! (one Python task hand-off through three release masters on 2 cores: p50 0.76-0.91 ms
//! against 0.92-1.05 in alternated runs, BENCHMARKS.md). The leader's own entries still go to
//! the thread, which flushes them while the runtime replicates them (`durable_log`).
//!
//! The thread also removes purged entries, [`PURGE_CHUNK_KEYS`] at a time while no flush is
//! waiting: a purge covers a snapshot interval (50,000 entries by default), and removing it in
//! one sled batch on openraft's task stalled the whole node for most of a second (no
//! heartbeat answered, so the others' timers ran out and an election followed).

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use openraft::storage::LogFlushed;
use openraft::LogId;
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, oneshot};

use crate::durable_log::DurableLog;
use crate::flush_seat::{FlushSeat, Held};
use crate::TypeConfig;

/// Requests waiting for the flusher; a full queue makes writers wait (backpressure).
const FLUSH_QUEUE_LENGTH_MAX: usize = 4096;

/// One fsync acknowledges at most this many requests, so the first waiter is not starved.
const FLUSH_BATCH_LENGTH_MAX: usize = 1024;

/// Purged entries removed in one sled batch between flushes: a few milliseconds of work, so
/// an append waiting for its flush waits at most that long for a purge.
const PURGE_CHUNK_KEYS: usize = 256;

/// Someone waiting for everything written so far to be durable.
pub(crate) enum FlushRequest {
    /// openraft's append callback, called once the entries up to the log id are durable.
    Appended(LogFlushed<TypeConfig>, LogId<u64>),
    /// Entries up to the log id, already acknowledged (the leader's own, see `durable_log`):
    /// nobody waits, the flush only publishes them as durable.
    Written(LogId<u64>),
    /// A caller awaiting durability (vote, truncation, bootstrap record).
    Sync(oneshot::Sender<Result<(), io::Error>>),
    /// The purged id reached this index (already recorded): its entries are removed, a chunk at
    /// a time, while no flush waits. Nobody waits for it.
    Purge(u64),
}

/// The sending side of the flusher thread; the thread ends when every sender is dropped.
#[derive(Clone)]
pub(crate) struct Flusher {
    requests: mpsc::Sender<FlushRequest>,
    seat: Arc<FlushSeat>,
    /// Requests sent and not yet answered by the thread: while there is one, an append does
    /// not flush on its own task (it would be answered before the requests sent before it).
    /// Only the log store sends, one call at a time (its methods take `&mut self`), so none is
    /// sent while an append flushes in place.
    outstanding: Arc<AtomicUsize>,
}

impl Flusher {
    /// Starts the flusher thread for `db`, whose database file is `db_file`; it raises
    /// `durable` after every flush, and first removes the entries at or below `purged` that a
    /// stop left behind.
    pub(crate) fn start(
        db: sled::Db,
        db_file: File,
        durable: DurableLog,
        purged: Option<u64>,
    ) -> io::Result<(Self, JoinHandle<()>)> {
        let (requests, receiver) = mpsc::channel(FLUSH_QUEUE_LENGTH_MAX);
        let purge = PendingPurge { upto: purged };
        let seat = Arc::new(FlushSeat::new(db, db_file, durable));
        let outstanding = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (seat, outstanding) = (seat.clone(), outstanding.clone());
            std::thread::Builder::new()
                .name("sled-flusher".to_string())
                .spawn(move || run(&seat, receiver, &outstanding, purge))?
        };
        Ok((Self { requests, seat, outstanding }, thread))
    }

    /// The seat the thread and in-place flushes share.
    #[cfg(test)]
    pub(crate) fn seat(&self) -> Arc<FlushSeat> {
        self.seat.clone()
    }

    /// Waits until the thread has answered every request sent to it: it answers a batch's
    /// callbacks before it counts them answered, so an append can return a moment earlier.
    #[cfg(test)]
    pub(crate) async fn until_idle(&self) {
        while self.outstanding.load(Ordering::Acquire) != 0 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    /// Has the flusher remove the entries at or below `index`, whose purge is recorded.
    pub(crate) async fn purge(&self, index: u64) -> io::Result<()> {
        self.send(FlushRequest::Purge(index)).await
    }

    /// Calls an append's callback once the entries up to `last` are durable: flushed on the
    /// calling task before returning when the thread has no request to answer and the seat is
    /// free and was fast ([`FlushSeat::take_if_fast`]), else by the thread.
    pub(crate) async fn appended(
        &self,
        callback: LogFlushed<TypeConfig>,
        last: LogId<u64>,
    ) -> io::Result<()> {
        match self.flush_in_place(callback, last) {
            None => Ok(()),
            Some(callback) => self.send(FlushRequest::Appended(callback, last)).await,
        }
    }

    /// Flushes here and answers `callback`, as the thread would; hands `callback` back when
    /// it must go to the thread.
    fn flush_in_place(
        &self,
        callback: LogFlushed<TypeConfig>,
        last: LogId<u64>,
    ) -> Option<LogFlushed<TypeConfig>> {
        if self.outstanding.load(Ordering::Acquire) != 0 {
            return Some(callback);
        }
        let Some(held) = self.seat.take_if_fast() else { return Some(callback) };
        let result = self.seat.flush(&held);
        drop(held);
        self.seat.flushed_in_place();
        publish(self.seat.durable(), &result, Some(last));
        callback.log_io_completed(result);
        None
    }

    /// Has the flusher make entries up to `last`, already acknowledged, durable.
    pub(crate) async fn written(&self, last: LogId<u64>) -> io::Result<()> {
        self.send(FlushRequest::Written(last)).await
    }

    /// Returns once everything written before the call is durable.
    pub(crate) async fn sync(&self) -> io::Result<()> {
        let (done, result) = oneshot::channel();
        self.send(FlushRequest::Sync(done)).await?;
        result.await.map_err(|_| stopped())?
    }

    async fn send(&self, request: FlushRequest) -> io::Result<()> {
        self.outstanding.fetch_add(1, Ordering::AcqRel);
        self.requests.send(request).await.map_err(|_| stopped())
    }
}

fn stopped() -> io::Error {
    io::Error::other("the sled flusher thread has stopped")
}

fn run(
    seat: &FlushSeat,
    mut receiver: mpsc::Receiver<FlushRequest>,
    outstanding: &AtomicUsize,
    mut purge: PendingPurge,
) {
    let mut batch = Vec::with_capacity(FLUSH_BATCH_LENGTH_MAX);
    while let Some(first) = next_request(seat, &mut receiver, &mut purge) {
        batch.push(first);
        while batch.len() < FLUSH_BATCH_LENGTH_MAX {
            match receiver.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        let taken = batch.len();
        batch.retain(|request| {
            let FlushRequest::Purge(index) = request else { return true };
            purge.raise(*index);
            false
        });
        if !batch.is_empty() {
            flush(seat, &mut batch);
        }
        outstanding.fetch_sub(taken, Ordering::AcqRel);
    }
}

/// The next request; while none waits and a purge is pending, removes a chunk of it first.
/// `None` once every sender is gone.
fn next_request(
    seat: &FlushSeat,
    receiver: &mut mpsc::Receiver<FlushRequest>,
    purge: &mut PendingPurge,
) -> Option<FlushRequest> {
    while purge.upto.is_some() {
        match receiver.try_recv() {
            Ok(request) => return Some(request),
            Err(TryRecvError::Disconnected) => return None,
            // Seated: an append does not flush in place meanwhile, as the thread never did.
            Err(TryRecvError::Empty) => purge.step(seat.db(), &seat.take()),
        }
    }
    receiver.blocking_recv()
}

/// Makes everything written so far durable and answers `batch`, which it empties.
fn flush(seat: &FlushSeat, batch: &mut Vec<FlushRequest>) {
    // A failure is handed to every waiter, whose caller (openraft) treats it as fatal.
    let result = seat.flush(&seat.take());
    publish(seat.durable(), &result, last_of(batch));
    for request in batch.drain(..) {
        let result = match &result {
            Ok(()) => Ok(()),
            Err(error) => Err(io::Error::new(error.kind(), error.to_string())),
        };
        match request {
            FlushRequest::Appended(callback, _) => callback.log_io_completed(result),
            FlushRequest::Written(_) | FlushRequest::Purge(_) => {}
            // The waiter may have given up; nobody is left to tell.
            FlushRequest::Sync(done) => drop(done.send(result)),
        }
    }
}

/// Entries at or below `upto` still to remove: their purge is recorded, and openraft never
/// reads them again.
struct PendingPurge {
    upto: Option<u64>,
}

impl PendingPurge {
    /// Purges up to `index` too.
    fn raise(&mut self, index: u64) {
        self.upto = Some(self.upto.map_or(index, |upto| upto.max(index)));
    }

    /// Removes up to [`PURGE_CHUNK_KEYS`] purged entries; the purge is over once fewer were
    /// left. A failed removal ends it (it only keeps more; the next flush reports a broken
    /// database).
    fn step(&mut self, db: &sled::Db, _held: &Held<'_>) {
        let Some(upto) = self.upto else { return };
        let keys: Result<Vec<_>, _> =
            db.range(crate::log_store::purged_keys(upto)).keys().take(PURGE_CHUNK_KEYS).collect();
        let removed = keys.and_then(|keys| {
            let count = keys.len();
            let mut batch = sled::Batch::default();
            keys.into_iter().for_each(|key| batch.remove(key));
            db.apply_batch(batch).map(|()| count)
        });
        match removed {
            Ok(count) if count == PURGE_CHUNK_KEYS => {}
            Ok(_) => self.upto = None,
            Err(error) => {
                tracing::warn!(%error, "removing purged log entries failed; they stay on disk");
                self.upto = None;
            }
        }
    }
}

/// Tells the gates how far the log is durable after one flush (up to `last`, the last log id
/// it answers), before anyone is answered: a follower's callback must not overtake the
/// durability its own apply waits for.
fn publish(durable: &DurableLog, result: &io::Result<()>, last: Option<LogId<u64>>) {
    if let Err(error) = result {
        durable.failed(error);
        return;
    }
    if let Some(last) = last {
        durable.flushed(last);
    }
}

/// The last log id a flush answering `batch` makes durable.
fn last_of(batch: &[FlushRequest]) -> Option<LogId<u64>> {
    let last = batch.iter().filter_map(|request| match request {
        FlushRequest::Appended(_, last) | FlushRequest::Written(last) => Some(*last),
        FlushRequest::Sync(_) | FlushRequest::Purge(_) => None,
    });
    last.max()
}
