//! Trainer leases, the leader's soft state: when each trainer was last heard from. A trainer
//! silent for longer than its lease is declared lost through a replicated `TrainerLost`.
//! Simplification: one table for the whole run instead of one per leader, so a new leader does
//! not start every lease afresh (the real leader does; that only delays declarations).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// A trainer not heard from for this long is lost.
pub const LEASE_MS: u64 = 1_500;

/// The shared table. Cheap to clone.
#[derive(Clone, Default)]
pub struct Leases {
    inner: Arc<Mutex<BTreeMap<u64, u64>>>,
}

impl Leases {
    fn table(&self) -> MutexGuard<'_, BTreeMap<u64, u64>> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `trainer` was heard from at `now_ms`.
    pub fn heard(&self, trainer: u64, now_ms: u64) {
        self.table().insert(trainer, now_ms);
    }

    /// The first of `registered` whose lease ran out by `now_ms`. A trainer never heard from
    /// gets a fresh lease now.
    pub fn expired(&self, registered: &[u64], now_ms: u64) -> Option<u64> {
        let mut table = self.table();
        for trainer in registered {
            let heard_ms = *table.entry(*trainer).or_insert(now_ms);
            if now_ms.saturating_sub(heard_ms) > LEASE_MS {
                return Some(*trainer);
            }
        }
        None
    }
}
