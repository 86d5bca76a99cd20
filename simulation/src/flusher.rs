//! The one task that flushes a node's simulated disk: each flush takes a seeded delay, flushes
//! complete in the order they were asked for, and only then is the log published as durable
//! that far and the waiting write acknowledged.
//! A slow disk multiplies the delay; a stalled one holds the flush until it recovers.

use std::io;
use std::time::Duration;

use consensus::{DurableLog, TypeConfig};
use openraft::storage::LogFlushed;
use openraft::LogId;
use tokio::sync::{mpsc, oneshot};

use crate::disk::SimDisk;
use crate::rng::SimRng;

/// Who waits for a flush.
pub enum FlushWaiter {
    /// openraft's callback for an append of entries up to the log id.
    Append(LogFlushed<TypeConfig>, LogId<u64>),
    /// Nobody: an append of entries up to the log id, already acknowledged (the leader's own,
    /// see `consensus::durable_log`); the flush publishes them as durable.
    Written(LogId<u64>),
    /// A store method (`save_vote`) that returns only once its write is durable.
    Caller(oneshot::Sender<io::Result<()>>),
    /// Nobody: the write was already acknowledged and published (the planted early-ack bug).
    Nobody,
}

struct FlushRequest {
    sequence: u64,
    waiter: FlushWaiter,
}

/// The sending side; the task stops when every sender is dropped.
#[derive(Clone)]
pub struct Flusher {
    requests: mpsc::UnboundedSender<FlushRequest>,
}

impl Flusher {
    /// Starts the flushing task of one process (`generation`) of the disk. Each flush takes
    /// `delay_ms` (a range, drawn from `rng`) of simulated time; each raises `durable`.
    pub fn start(
        disk: SimDisk,
        generation: u64,
        mut rng: SimRng,
        delay_ms: (u64, u64),
        durable: DurableLog,
    ) -> Self {
        let (requests, mut receiver) = mpsc::unbounded_channel::<FlushRequest>();
        tokio::spawn(async move {
            while let Some(request) = receiver.recv().await {
                let delay = rng.range(delay_ms.0, delay_ms.1);
                let slow_factor = disk.usable().await;
                tokio::time::sleep(Duration::from_millis(delay * slow_factor)).await;
                disk.usable().await;
                let result = disk
                    .flush(generation, request.sequence)
                    .map_err(|error| io::Error::other(error.to_string()));
                publish(&durable, &result, &request.waiter);
                match request.waiter {
                    FlushWaiter::Append(callback, _) => callback.log_io_completed(result),
                    FlushWaiter::Written(_) => {}
                    // The caller may have given up (its process crashed); nobody to tell.
                    FlushWaiter::Caller(sender) => drop(sender.send(result)),
                    FlushWaiter::Nobody => {}
                }
            }
        });
        Self { requests }
    }

    /// Asks for every write up to `sequence` to be made durable, then tells `waiter`.
    pub fn flush(&self, sequence: u64, waiter: FlushWaiter) -> io::Result<()> {
        self.requests
            .send(FlushRequest { sequence, waiter })
            .map_err(|_closed| io::Error::other("the flusher task is gone"))
    }

    /// Flushes up to `sequence` and waits until it is durable.
    pub async fn sync(&self, sequence: u64) -> io::Result<()> {
        let (sender, receiver) = oneshot::channel();
        self.flush(sequence, FlushWaiter::Caller(sender))?;
        receiver.await.map_err(|_dropped| io::Error::other("the flusher task is gone"))?
    }
}

/// Tells the gates how far the log is durable, before the waiter is answered.
fn publish(durable: &DurableLog, result: &io::Result<()>, waiter: &FlushWaiter) {
    match (result, waiter) {
        (Err(error), _) => durable.failed(error),
        (Ok(()), FlushWaiter::Append(_, last) | FlushWaiter::Written(last)) => {
            durable.flushed(*last);
        }
        (Ok(()), FlushWaiter::Caller(_) | FlushWaiter::Nobody) => {}
    }
}
