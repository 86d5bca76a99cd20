//! The one seat from which the sled log is flushed: whoever holds it (the flusher thread, or an
//! append flushing on its own task, see `flusher`) flushes sled and then fsyncs its database
//! file. sled 0.34's `flush` only calls `sync_file_range` on Linux, which does not make data
//! durable, so `sync_data` on the database file follows it; concurrent flushes can deadlock in
//! sled 0.34, so nothing flushes without the seat (sled's own periodic flusher is disabled at
//! open).

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::durable_log::DurableLog;

/// An append flushes on its own task only while the last flush took at most this long: a disk
/// that slows down is waited for on the flusher thread again, not on a runtime worker.
pub(crate) const IN_PLACE_FLUSH_MAX: Duration = Duration::from_millis(5);

/// The log's database and file, how far the log is durable, and the seat itself.
pub(crate) struct FlushSeat {
    db: sled::Db,
    db_file: File,
    durable: DurableLog,
    seat: Mutex<()>,
    /// How long the last flush took, in microseconds.
    last_flush_us: AtomicU64,
    /// Flushes an append made on its own task.
    in_place: AtomicU64,
}

/// The seat, held: only its holder flushes.
pub(crate) struct Held<'a> {
    _seat: MutexGuard<'a, ()>,
}

impl FlushSeat {
    pub(crate) fn new(db: sled::Db, db_file: File, durable: DurableLog) -> Self {
        let seat = Mutex::new(());
        Self {
            db,
            db_file,
            durable,
            seat,
            last_flush_us: AtomicU64::new(0),
            in_place: AtomicU64::new(0),
        }
    }

    /// The database (the flusher thread removes purged entries from it).
    pub(crate) fn db(&self) -> &sled::Db {
        &self.db
    }

    /// How far the log is durable; raised by the seat's holder after each flush.
    pub(crate) fn durable(&self) -> &DurableLog {
        &self.durable
    }

    /// Takes the seat, waiting while another holds it.
    pub(crate) fn take(&self) -> Held<'_> {
        Held { _seat: self.seat.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) }
    }

    /// Takes the seat if nobody holds it and the last flush was fast (`IN_PLACE_FLUSH_MAX`).
    pub(crate) fn take_if_fast(&self) -> Option<Held<'_>> {
        let last = Duration::from_micros(self.last_flush_us.load(Ordering::Relaxed));
        if last > IN_PLACE_FLUSH_MAX {
            return None;
        }
        let seat = match self.seat.try_lock() {
            Ok(seat) => seat,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        Some(Held { _seat: seat })
    }

    /// Makes everything written so far durable (the seat held), timing it.
    pub(crate) fn flush(&self, _held: &Held<'_>) -> io::Result<()> {
        let started = Instant::now();
        let result =
            self.db.flush().map_err(io::Error::other).and_then(|_| self.db_file.sync_data());
        let took = started.elapsed();
        metrics::histogram!("raftrain_raft_fsync_seconds").record(took.as_secs_f64());
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.last_flush_us.store(micros, Ordering::Relaxed);
        result
    }

    /// Counts a flush an append made on its own task.
    pub(crate) fn flushed_in_place(&self) {
        self.in_place.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("raftrain_raft_flushes_in_place_total").increment(1);
    }

    /// How many flushes appends made on their own tasks so far.
    #[cfg(test)]
    pub(crate) fn in_place(&self) -> u64 {
        self.in_place.load(Ordering::Relaxed)
    }

    /// How long the last flush took.
    #[cfg(test)]
    pub(crate) fn last_flush(&self) -> Duration {
        Duration::from_micros(self.last_flush_us.load(Ordering::Relaxed))
    }

    /// Makes the last flush look as if it took `took` (tests of where the next one goes).
    #[cfg(test)]
    pub(crate) fn pretend_last_flush(&self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.last_flush_us.store(micros, Ordering::Relaxed);
    }
}
