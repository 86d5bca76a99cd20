//! Leases held by trainers (and pservers) as the leader's soft state: heartbeats renew them,
//! and only the decision that a holder is lost is replicated. A new leader starts by granting
//! every known holder a fresh lease, so a leader change never declares anyone lost.

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

pub(crate) struct LeaseTable<K: Ord + Copy> {
    lease: Duration,
    expires_at: BTreeMap<K, Instant>,
    /// When each lease was last granted or renewed, without the time held since: a hold
    /// credits a lease only the quiet time after it, as its holder could renew until then.
    renewed_at: BTreeMap<K, Instant>,
}

impl<K: Ord + Copy> LeaseTable<K> {
    pub(crate) fn new(lease: Duration) -> Self {
        Self { lease, expires_at: BTreeMap::new(), renewed_at: BTreeMap::new() }
    }

    /// Makes the table hold exactly `known`: new holders get a fresh lease, forgotten ones go.
    pub(crate) fn sync(&mut self, known: impl IntoIterator<Item = K>, now: Instant) {
        let (mut next, mut renewed) = (BTreeMap::new(), BTreeMap::new());
        for key in known {
            let expires_at = self.expires_at.get(&key).copied().unwrap_or(now + self.lease);
            next.insert(key, expires_at);
            renewed.insert(key, self.renewed_at.get(&key).copied().unwrap_or(now));
        }
        self.expires_at = next;
        self.renewed_at = renewed;
    }

    /// Forgets everything, as a node does when it stops leading; the next `sync` grants fresh
    /// leases to all.
    pub(crate) fn clear(&mut self) {
        self.expires_at.clear();
        self.renewed_at.clear();
    }

    /// When `key`'s lease was last granted or renewed, if it holds one.
    pub(crate) fn granted_at(&self, key: K) -> Option<Instant> {
        self.expires_at.get(&key).map(|expires| *expires - self.lease)
    }

    /// Grants or renews a holder's lease (callers check that the state knows the holder).
    pub(crate) fn grant(&mut self, key: K, now: Instant) {
        self.expires_at.insert(key, now + self.lease);
        self.renewed_at.insert(key, now);
    }

    /// Renews `key`'s lease unless it already ran out (its release may be on its way through
    /// the log: confirming the holder now would let it serve after the release). A holder the
    /// table does not know yet gets a fresh lease. Whether it was renewed.
    pub(crate) fn renew(&mut self, key: K, now: Instant) -> bool {
        if self.expires_at.get(&key).is_some_and(|expires_at| *expires_at <= now) {
            return false;
        }
        self.grant(key, now);
        true
    }

    /// Moves every lease still running at `since` forward by the quiet time from `since` (or
    /// from its last renewal, if later) to `now`: time in which holders could not renew does
    /// not count against them, and time before a renewal was no holder's loss. A lease that ran
    /// out before `since` stays run out (its release may already be on its way). The caller
    /// passes each quiet instant once; a lease is then never held longer than the quiet time.
    pub(crate) fn hold(&mut self, since: Instant, now: Instant) {
        for (key, expires_at) in self.expires_at.iter_mut() {
            if *expires_at <= since {
                continue;
            }
            let renewed_at = self.renewed_at.get(key).copied().unwrap_or(since);
            *expires_at += now.saturating_duration_since(since.max(renewed_at));
        }
    }

    /// Holders whose lease ran out by `now`, in key order.
    pub(crate) fn expired(&self, now: Instant) -> Vec<K> {
        self.expires_at
            .iter()
            .filter(|(_, &expires_at)| expires_at <= now)
            .map(|(&key, _)| key)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// New holders get a full lease, grants extend it, forgotten holders leave, and nobody
    /// expires before their lease has run.
    #[test]
    fn leases_expire_only_without_heartbeats() {
        let start = Instant::now();
        let second = Duration::from_secs(1);
        let mut table = LeaseTable::new(2 * second);
        table.sync([1, 2, 3], start);
        assert!(table.expired(start + second).is_empty());
        table.grant(2, start + second);
        assert_eq!(table.expired(start + 2 * second), vec![1, 3]);
        table.sync([2, 3, 4], start + 2 * second);
        assert_eq!(table.expired(start + 3 * second), vec![2, 3], "4 got a fresh lease");
        table.clear();
        table.sync([2, 3, 4], start + 3 * second);
        assert!(table.expired(start + 4 * second).is_empty(), "a new leader grants fresh leases");
        assert!(table.renew(2, start + 4 * second), "a live lease is renewed");
        assert!(!table.renew(3, start + 5 * second), "a lease that ran out is not renewed");
        assert_eq!(table.expired(start + 5 * second), vec![3, 4]);
        assert!(table.renew(9, start + 5 * second), "a holder not known yet gets a lease");
    }

    /// Holding leases moves only those still running forward; one that ran out stays out.
    #[test]
    fn held_leases_do_not_run_out_but_expired_ones_stay_expired() {
        let start = Instant::now();
        let second = Duration::from_secs(1);
        let mut table = LeaseTable::new(2 * second);
        table.sync([1], start);
        table.grant(2, start + second);
        table.hold(start + 2 * second, start + 12 * second);
        assert_eq!(table.expired(start + 3 * second), vec![1], "1 ran out before the hold");
        assert_eq!(table.expired(start + 12 * second), vec![1], "2 was held for 10 s");
        assert_eq!(table.expired(start + 13 * second), vec![1, 2]);
    }
}
