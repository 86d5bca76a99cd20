//! `Clock`: where a master or a pserver reads time. The monotonic clock (tokio's, so that a
//! paused test clock drives it) times leases: a master's lease tables and leader clock, a
//! pserver's slot lease. The wall clock only seeds a fresh master group's clock (so stamps read
//! like real times) and stamps a checkpoint record's `created_ms`. Production reads the system
//! (`SystemClock`); the simulation gives every master and pserver process a clock of its own,
//! offset by hours and drifting up to 5%, which is why this is a trait and not only
//! `tokio::time::Instant`: the lease rules exist to absorb clocks that disagree.
//!
//! `RAFTRAIN_CLOCK_OFFSET_MS` (a signed number of milliseconds) shifts this process's wall
//! clock: fault tests give one master a clock hours off to show that it steers nothing.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// A process's view of time.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Milliseconds since the Unix epoch, as this machine believes.
    fn wall_ms(&self) -> u64;
    /// The monotonic clock (tokio's, so that a paused test clock drives it).
    fn now(&self) -> Instant;
}

/// The machine's clocks, the wall clock shifted by `RAFTRAIN_CLOCK_OFFSET_MS`.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn wall_ms(&self) -> u64 {
        now_ms()
    }

    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// The environment variable that skews this process's wall clock, for fault tests.
pub const CLOCK_OFFSET_ENV: &str = "RAFTRAIN_CLOCK_OFFSET_MS";

fn now_ms() -> u64 {
    // A clock before 1970 is a broken machine; treating it as 0 keeps deadlines in the past,
    // which expires tasks early (safe) rather than never.
    let wall_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64);
    wall_ms.saturating_add_signed(offset_ms())
}

fn offset_ms() -> i64 {
    static OFFSET_MS: OnceLock<i64> = OnceLock::new();
    *OFFSET_MS.get_or_init(|| {
        let value = std::env::var(CLOCK_OFFSET_ENV).ok();
        match value.as_deref().map(str::parse::<i64>) {
            None => 0,
            Some(Ok(offset_ms)) => {
                tracing::warn!(offset_ms, "the wall clock is skewed by {CLOCK_OFFSET_ENV}");
                offset_ms
            }
            Some(Err(error)) => {
                tracing::warn!(%error, "{CLOCK_OFFSET_ENV} is not a number of milliseconds; ignored");
                0
            }
        }
    })
}
