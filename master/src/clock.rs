//! The wall clock in milliseconds. Leaders no longer stamp it into proposals (see
//! `leader_clock.rs`); it only seeds a fresh group's clock, so stamps read like real times.
//!
//! `RAFTRAIN_CLOCK_OFFSET_MS` (a signed number of milliseconds) shifts this process's wall
//! clock: fault tests give one master a clock hours off to show that it steers nothing.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// The environment variable that skews this process's wall clock, for fault tests.
pub const CLOCK_OFFSET_ENV: &str = "RAFTRAIN_CLOCK_OFFSET_MS";

pub(crate) fn now_ms() -> u64 {
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
