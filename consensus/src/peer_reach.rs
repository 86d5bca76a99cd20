//! `PeerReach`: whether one peer answers this node's Raft RPCs, logged as it changes. While a
//! peer is down the leader tries it every retry interval (tens of milliseconds, so that a
//! restarted peer hears from it before an election timeout), and openraft's replication logs
//! two lines per failed try (its `openraft::replication` target is off by default, see the
//! binary's logging); this says it once, again every `REPEAT_EVERY` while the peer stays down,
//! and once when it answers again.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How often a peer that stays unreachable is logged again.
pub(crate) const REPEAT_EVERY: Duration = Duration::from_secs(60);

/// One peer's reachability, as this node's RPCs to it found it.
#[derive(Debug)]
pub(crate) struct PeerReach {
    target: u64,
    /// When the first of the failed RPCs in a row failed (`None`: the last one was answered).
    down_since: Option<Instant>,
    /// When the peer was last logged unreachable.
    logged_at: Option<Instant>,
}

impl PeerReach {
    pub(crate) fn new(target: u64) -> Self {
        Self { target, down_since: None, logged_at: None }
    }

    /// An RPC to the peer at `addr` found it unreachable at `now` (`error`): logged when it is
    /// the first of a row, or `REPEAT_EVERY` after the last line. Whether it logged.
    pub(crate) fn unreachable(&mut self, addr: &str, error: &dyn Display, now: Instant) -> bool {
        let since = *self.down_since.get_or_insert(now);
        let due = self.logged_at.is_none_or(|at| now.duration_since(at) >= REPEAT_EVERY);
        if due {
            self.logged_at = Some(now);
            let down_s = now.duration_since(since).as_secs();
            tracing::warn!(peer = self.target, addr, %error, down_s, "peer unreachable");
        }
        due
    }

    /// An RPC to the peer at `addr` was answered at `now`: logged when it was down. Whether it
    /// logged.
    pub(crate) fn answered(&mut self, addr: &str, now: Instant) -> bool {
        let Some(since) = self.down_since.take() else { return false };
        self.logged_at = None;
        let down_ms = now.duration_since(since).as_millis();
        tracing::info!(peer = self.target, addr, down_ms, "peer reachable again");
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer down for a while is logged once, then once a `REPEAT_EVERY`, and once when it
    /// answers again; a peer that answers is not logged.
    #[test]
    fn logs_a_peer_once_as_it_goes_down_and_comes_back() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut reach = PeerReach::new(2);
        assert!(!reach.answered("a:1", at(0)));
        assert!(reach.unreachable("a:1", &"refused", at(10)));
        let repeats =
            (1..1200).filter(|tick| reach.unreachable("a:1", &"refused", at(10 + tick * 50)));
        assert_eq!(repeats.count(), 0, "within a minute of the first line");
        assert!(reach.unreachable("a:1", &"refused", at(10 + REPEAT_EVERY.as_millis() as u64)));
        assert!(reach.answered("a:1", at(70_000)));
        assert!(!reach.answered("a:1", at(70_050)));
        assert!(reach.unreachable("a:1", &"refused", at(70_100)), "down again: logged at once");
    }
}
