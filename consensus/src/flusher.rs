//! The one place where the sled log is made durable: a thread that flushes sled and then
//! fsyncs its database file, batching every request that arrived meanwhile into one fsync.
//!
//! sled 0.34's `flush` only calls `sync_file_range` on Linux, which does not make data
//! durable, so `sync_data` on the database file follows it. Concurrent flushes can deadlock in
//! sled 0.34, so nothing else flushes (sled's own periodic flusher is disabled at open).

use std::fs::File;
use std::io;
use std::thread::JoinHandle;

use openraft::storage::LogFlushed;
use tokio::sync::{mpsc, oneshot};

use crate::TypeConfig;

/// Requests waiting for the flusher; a full queue makes writers wait (backpressure).
const FLUSH_QUEUE_LENGTH_MAX: usize = 4096;

/// One fsync acknowledges at most this many requests, so the first waiter is not starved.
const FLUSH_BATCH_LENGTH_MAX: usize = 1024;

/// Someone waiting for everything written so far to be durable.
pub(crate) enum FlushRequest {
    /// openraft's append callback: entries are durable once it is called.
    Appended(LogFlushed<TypeConfig>),
    /// A caller awaiting durability (vote, truncation, bootstrap record).
    Sync(oneshot::Sender<Result<(), io::Error>>),
}

/// The sending side of the flusher thread; the thread ends when every sender is dropped.
#[derive(Clone)]
pub(crate) struct Flusher {
    requests: mpsc::Sender<FlushRequest>,
}

impl Flusher {
    /// Starts the flusher thread for `db`, whose database file is `db_file`.
    pub(crate) fn start(db: sled::Db, db_file: File) -> io::Result<(Self, JoinHandle<()>)> {
        let (requests, receiver) = mpsc::channel(FLUSH_QUEUE_LENGTH_MAX);
        let thread = std::thread::Builder::new()
            .name("sled-flusher".to_string())
            .spawn(move || run(db, db_file, receiver))?;
        Ok((Self { requests }, thread))
    }

    /// Hands an append callback to the flusher; it is called once the entries are durable.
    pub(crate) async fn appended(&self, callback: LogFlushed<TypeConfig>) -> io::Result<()> {
        self.send(FlushRequest::Appended(callback)).await
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

fn run(db: sled::Db, db_file: File, mut receiver: mpsc::Receiver<FlushRequest>) {
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
        for request in batch.drain(..) {
            let result = match &result {
                Ok(()) => Ok(()),
                Err(error) => Err(io::Error::new(error.kind(), error.to_string())),
            };
            match request {
                FlushRequest::Appended(callback) => callback.log_io_completed(result),
                // The waiter may have given up; nobody is left to tell.
                FlushRequest::Sync(done) => drop(done.send(result)),
            }
        }
    }
}
