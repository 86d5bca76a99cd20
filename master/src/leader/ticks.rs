//! The leader loops' clock: a fixed period whose missed ticks are delayed, not bunched, and a
//! stop signal polled after the tick so a replayed simulation takes the same branch.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Interval, MissedTickBehavior};

/// Ticks every `period_ms`, a late tick delaying the ones after it.
pub(super) fn every(period_ms: u64) -> Interval {
    let mut ticks = tokio::time::interval(Duration::from_millis(period_ms));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticks
}

/// Waits for the next tick; `false` once `stop` turned true.
pub(super) async fn next(ticks: &mut Interval, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        // Polled in order, so a replayed simulation takes the same branch.
        biased;
        _ = ticks.tick() => {}
        _ = stop.changed() => return false,
    }
    !*stop.borrow()
}
