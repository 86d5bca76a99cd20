//! Each simulated master's and pserver's own clock (`master::clock::Clock`,
//! `pserver::clock::Clock`): the simulation's paused tokio time, offset by a seeded amount
//! (hours either way) and drifting by a seeded rate, the way machines' clocks disagree.
//! Production must not care: leader stamps come from the state's clock, leases from each
//! leader's own monotonic time, and a pserver trusts only 80% of its lease, counted on its own
//! clock from the heartbeat's send.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use master::clock::Clock;
use tokio::time::Instant;

use crate::rng::SimRng;

/// Where every simulated wall clock starts before its offset: 2026-01-01T00:00:00Z.
const EPOCH_WALL_MS: u64 = 1_767_225_600_000;

/// How one node's clock is wrong.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClockSkew {
    /// Added to the wall clock, in milliseconds.
    pub offset_ms: i64,
    /// Parts per million the clock runs fast (positive) or slow (negative).
    pub drift_ppm: i64,
}

impl ClockSkew {
    /// A clock offset of up to a few hours either way and a drift of up to 5%, for a third
    /// of the draws; the rest keep true time.
    pub fn draw(rng: &mut SimRng) -> Self {
        if !rng.percent(33) {
            return Self::default();
        }
        let offset_ms = rng.range(0, 4 * 3_600_000) as i64 - 2 * 3_600_000;
        let drift_ppm = rng.range(0, 100_001) as i64 - 50_000;
        Self { offset_ms, drift_ppm }
    }
}

/// A node's clock. Clones share the skew, which the nemesis may change.
#[derive(Clone, Debug)]
pub struct SimClock {
    origin: Instant,
    skew: Arc<Mutex<ClockSkew>>,
}

impl SimClock {
    /// A clock that reads true until skewed, counting from `origin` (the run's start).
    pub fn new(origin: Instant) -> Self {
        Self { origin, skew: Arc::default() }
    }

    pub fn set_skew(&self, skew: ClockSkew) {
        *self.skew.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = skew;
    }

    fn skew(&self) -> ClockSkew {
        *self.skew.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Simulated time since the origin as this clock sees it (drift applied).
    fn elapsed(&self) -> Duration {
        let true_us = Instant::now().saturating_duration_since(self.origin).as_micros() as i128;
        let drifted = true_us + true_us * i128::from(self.skew().drift_ppm) / 1_000_000;
        Duration::from_micros(u64::try_from(drifted.max(0)).unwrap_or(u64::MAX))
    }
}

impl Clock for SimClock {
    fn wall_ms(&self) -> u64 {
        let elapsed_ms = self.elapsed().as_millis() as u64;
        (EPOCH_WALL_MS + elapsed_ms).saturating_add_signed(self.skew().offset_ms)
    }

    fn now(&self) -> Instant {
        self.origin + self.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offset moves the wall clock only; drift makes both clocks run fast or slow.
    #[tokio::test(start_paused = true)]
    async fn offset_and_drift() {
        let clock = SimClock::new(Instant::now());
        let wall = clock.wall_ms();
        clock.set_skew(ClockSkew { offset_ms: 3_600_000, drift_ppm: 0 });
        assert_eq!(clock.wall_ms(), wall + 3_600_000);
        clock.set_skew(ClockSkew { offset_ms: 0, drift_ppm: 100_000 });
        let start = clock.now();
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(clock.now() - start, Duration::from_secs(11), "10% fast");
    }
}
