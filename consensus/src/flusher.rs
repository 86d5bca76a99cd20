//! The one place where the sled log is made durable: a thread that flushes sled and then
//! fsyncs its database file, batching every request that arrived meanwhile into one fsync,
//! and publishing how far the log is durable ([`DurableLog`]) before it answers anyone.
//!
//! sled 0.34's `flush` only calls `sync_file_range` on Linux, which does not make data
//! durable, so `sync_data` on the database file follows it. Concurrent flushes can deadlock in
//! sled 0.34, so nothing else flushes (sled's own periodic flusher is disabled at open).

use std::fs::File;
use std::io;
use std::thread::JoinHandle;

use openraft::storage::LogFlushed;
use openraft::LogId;
use tokio::sync::{mpsc, oneshot};

use crate::durable_log::DurableLog;
use crate::TypeConfig;

/// Requests waiting for the flusher; a full queue makes writers wait (backpressure).
const FLUSH_QUEUE_LENGTH_MAX: usize = 4096;

/// One fsync acknowledges at most this many requests, so the first waiter is not starved.
const FLUSH_BATCH_LENGTH_MAX: usize = 1024;

/// Someone waiting for everything written so far to be durable.
pub(crate) enum FlushRequest {
    /// openraft's append callback, called once the entries up to the log id are durable.
    Appended(LogFlushed<TypeConfig>, LogId<u64>),
    /// Entries up to the log id, already acknowledged (the leader's own, see `durable_log`):
    /// nobody waits, the flush only publishes them as durable.
    Written(LogId<u64>),
    /// A caller awaiting durability (vote, truncation, bootstrap record).
    Sync(oneshot::Sender<Result<(), io::Error>>),
}

/// The sending side of the flusher thread; the thread ends when every sender is dropped.
#[derive(Clone)]
pub(crate) struct Flusher {
    requests: mpsc::Sender<FlushRequest>,
}

impl Flusher {
    /// Starts the flusher thread for `db`, whose database file is `db_file`; it raises
    /// `durable` after every flush.
    pub(crate) fn start(
        db: sled::Db,
        db_file: File,
        durable: DurableLog,
    ) -> io::Result<(Self, JoinHandle<()>)> {
        let (requests, receiver) = mpsc::channel(FLUSH_QUEUE_LENGTH_MAX);
        let thread = std::thread::Builder::new()
            .name("sled-flusher".to_string())
            .spawn(move || run(db, db_file, receiver, durable))?;
        Ok((Self { requests }, thread))
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
) {
    let mut batch = Vec::with_capacity(FLUSH_BATCH_LENGTH_MAX);
    while let Some(first) = receiver.blocking_recv() {
        batch.push(first);
        while batch.len() < FLUSH_BATCH_LENGTH_MAX {
            match receiver.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        // A failure is handed to every waiter, whose caller (openraft) treats it as fatal.
        let started = std::time::Instant::now();
        let result = db.flush().map_err(io::Error::other).and_then(|_| db_file.sync_data());
        metrics::histogram!("raftrain_raft_fsync_seconds").record(started.elapsed().as_secs_f64());
        publish(&durable, &result, &batch);
        for request in batch.drain(..) {
            let result = match &result {
                Ok(()) => Ok(()),
                Err(error) => Err(io::Error::new(error.kind(), error.to_string())),
            };
            match request {
                FlushRequest::Appended(callback, _) => callback.log_io_completed(result),
                FlushRequest::Written(_) => {}
                // The waiter may have given up; nobody is left to tell.
                FlushRequest::Sync(done) => drop(done.send(result)),
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
        FlushRequest::Sync(_) => None,
    });
    if let Some(last) = last.max() {
        durable.flushed(last);
    }
}
