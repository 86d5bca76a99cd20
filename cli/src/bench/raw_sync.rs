//! The consensus benchmark's baseline: what the disk allows one durable write at a time,
//! measured with the same store and the same flush-then-fsync the Raft log uses.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

/// The benchmark's baseline: one writer doing sled `insert` + `flush` + `sync_data` of
/// `value_bytes` values in a fresh database in `dir` for `duration`. Returns the latency of
/// every write, the best any durable log on this disk can do one write at a time.
pub fn measure_raw_sync_writes(
    dir: &Path,
    duration: Duration,
    value_bytes: usize,
) -> anyhow::Result<Vec<Duration>> {
    let db = sled::Config::new().path(dir).flush_every_ms(None).open()?;
    let db_file = File::open(dir.join("db"))?;
    let value = vec![0x5a; value_bytes];
    let mut latencies = Vec::new();
    let start = Instant::now();
    let mut index = 0u64;
    while start.elapsed() < duration {
        let write_start = Instant::now();
        db.insert(index.to_be_bytes(), value.as_slice())?;
        db.flush()?;
        db_file.sync_data()?;
        latencies.push(write_start.elapsed());
        index += 1;
    }
    Ok(latencies)
}
