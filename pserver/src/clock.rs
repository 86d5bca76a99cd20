//! `Clock`: where a pserver reads time. The monotonic clock times the slot's lease (the claim's
//! and each heartbeat's send, and every check of the lease); the wall clock only stamps a
//! checkpoint record's `created_ms`. Production reads the system (`SystemClock`).
//!
//! Why a trait and not only `tokio::time::Instant`: tokio's instant alone would let the
//! simulation's paused clock drive the pserver, but every pserver would then keep true time.
//! The lease trust rule (`held_slot.rs`: trust 80% of the lease, counted from the send) exists
//! to absorb clocks that disagree, so the simulation gives each pserver a clock of its own that
//! drifts (up to 5%, as it does the masters'), and the production slot keeper has to hold its
//! slot on that clock. The instant is still tokio's, so that a paused test clock drives
//! `SystemClock` too.

use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// A pserver's view of time.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// The monotonic clock (tokio's, so that a paused test clock drives it).
    fn now(&self) -> Instant;
    /// Milliseconds since the Unix epoch, as this machine believes.
    fn wall_ms(&self) -> u64;
}

/// The machine's clocks.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall_ms(&self) -> u64 {
        // A clock before 1970 is a broken machine; a record stamped 0 says so plainly.
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64)
    }
}
