//! The one place where the sled log is made durable: a thread that flushes sled and then
//! fsyncs its database file, batching every request that arrived meanwhile into one fsync,
//! and publishing how far the log is durable ([`DurableLog`]) before it answers anyone.
//!
//! sled 0.34's `flush` only calls `sync_file_range` on Linux, which does not make data
//! durable, so `sync_data` on the database file follows it. Concurrent flushes can deadlock in
//! sled 0.34, so nothing else flushes (sled's own periodic flusher is disabled at open).
//!
//! The thread also removes purged entries, [`PURGE_CHUNK_KEYS`] at a time while no flush is
//! waiting: a purge covers a snapshot interval (50,000 entries by default), and removing it in
//! one sled batch on openraft's task stalled the whole node for most of a second (no
//! heartbeat answered, so the others' timers ran out and an election followed).

use std::fs::File;
use std::io;
use std::thread::JoinHandle;

use openraft::storage::LogFlushed;
use openraft::LogId;
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, oneshot};

use crate::durable_log::DurableLog;
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
        let thread = std::thread::Builder::new()
            .name("sled-flusher".to_string())
            .spawn(move || run(db, db_file, receiver, durable, purge))?;
        Ok((Self { requests }, thread))
    }

    /// Has the flusher remove the entries at or below `index`, whose purge is recorded.
    pub(crate) async fn purge(&self, index: u64) -> io::Result<()> {
        self.send(FlushRequest::Purge(index)).await
    }

    /// Hands an append callback to the flusher; it is called once the entries up to `last`
    /// are durable.
    pub(crate) async fn appended(
        &self,
        callback: LogFlushed<TypeConfig>,
        last: LogId<u64>,
    ) -> io::Result<()> {
        self.send(FlushRequest::Appended(callback, last)).await
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
        self.requests.send(request).await.map_err(|_| stopped())
    }
}

fn stopped() -> io::Error {
    io::Error::other("the sled flusher thread has stopped")
}

fn run(
    db: sled::Db,
    db_file: File,
    mut receiver: mpsc::Receiver<FlushRequest>,
    durable: DurableLog,
    mut purge: PendingPurge,
) {
    let mut batch = Vec::with_capacity(FLUSH_BATCH_LENGTH_MAX);
    while let Some(first) = next_request(&db, &mut receiver, &mut purge) {
        batch.push(first);
        while batch.len() < FLUSH_BATCH_LENGTH_MAX {
            match receiver.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        batch.retain(|request| {
            let FlushRequest::Purge(index) = request else { return true };
            purge.raise(*index);
            false
        });
        if !batch.is_empty() {
            flush(&db, &db_file, &durable, &mut batch);
        }
    }
}

/// The next request; while none waits and a purge is pending, removes a chunk of it first.
/// `None` once every sender is gone.
fn next_request(
    db: &sled::Db,
    receiver: &mut mpsc::Receiver<FlushRequest>,
    purge: &mut PendingPurge,
) -> Option<FlushRequest> {
    while purge.upto.is_some() {
        match receiver.try_recv() {
            Ok(request) => return Some(request),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => purge.step(db),
        }
    }
    receiver.blocking_recv()
}

/// Makes everything written so far durable and answers `batch`, which it empties.
fn flush(db: &sled::Db, db_file: &File, durable: &DurableLog, batch: &mut Vec<FlushRequest>) {
    // A failure is handed to every waiter, whose caller (openraft) treats it as fatal.
    let started = std::time::Instant::now();
    let result = db.flush().map_err(io::Error::other).and_then(|_| db_file.sync_data());
    metrics::histogram!("raftrain_raft_fsync_seconds").record(started.elapsed().as_secs_f64());
    publish(durable, &result, batch);
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
    fn step(&mut self, db: &sled::Db) {
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

/// Tells the gates how far the log is durable after one flush, before anyone is answered: a
/// follower's callback must not overtake the durability its own apply waits for.
fn publish(durable: &DurableLog, result: &io::Result<()>, batch: &[FlushRequest]) {
    if let Err(error) = result {
        durable.failed(error);
        return;
    }
    let last = batch.iter().filter_map(|request| match request {
        FlushRequest::Appended(_, last) | FlushRequest::Written(last) => Some(*last),
        FlushRequest::Sync(_) | FlushRequest::Purge(_) => None,
    });
    if let Some(last) = last.max() {
        durable.flushed(last);
    }
}
