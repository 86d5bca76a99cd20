//! The demo's faults: what is broken when (as a share of all the job's tasks done), and how
//! long the job took to recover from each (until a task completed again; for the leader, also
//! until a new leader answered).

use std::time::{Duration, Instant};

/// One planned fault: which process is killed with SIGKILL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL the master leader, restart it at once (it rejoins as a follower).
    Leader,
    /// SIGKILL trainer 0 and start a new one in its place.
    Trainer,
    /// SIGKILL pserver 0 and start it again (it reclaims its slot and restores its checkpoint).
    Pserver,
}

impl Fault {
    /// The plan: the leader a third of the way in, then a trainer, then a pserver.
    pub const PLAN: [(Fault, f64); 3] =
        [(Fault::Leader, 1.0 / 3.0), (Fault::Trainer, 0.5), (Fault::Pserver, 2.0 / 3.0)];

    pub fn describe(self) -> &'static str {
        match self {
            Self::Leader => "kill -9 the master leader",
            Self::Trainer => "kill -9 trainer 0, start a new trainer",
            Self::Pserver => "kill -9 pserver 0, start it again",
        }
    }
}

/// A fault that happened, and when the job recovered from it.
#[derive(Debug)]
pub struct FaultRecord {
    pub fault: Fault,
    pub detail: String,
    pub at: Instant,
    /// The number of finished tasks when it struck.
    pub done_before: u64,
    /// The Raft term when it struck: a leader in a later term is a new leader.
    pub term_before: u64,
    pub new_leader_after: Option<Duration>,
    pub progress_after: Option<Duration>,
}

impl FaultRecord {
    pub fn new(fault: Fault, detail: String, done_before: u64, term_before: u64) -> Self {
        Self {
            fault,
            detail,
            at: Instant::now(),
            done_before,
            term_before,
            new_leader_after: None,
            progress_after: None,
        }
    }

    /// Notes what the latest status (answered by a leader in `term`) shows: a task finished
    /// after the fault, a leader elected after it.
    pub fn observe(&mut self, done: u64, term: u64) {
        if self.progress_after.is_none() && done > self.done_before {
            self.progress_after = Some(self.at.elapsed());
        }
        if self.fault == Fault::Leader && self.new_leader_after.is_none() && term > self.term_before
        {
            self.new_leader_after = Some(self.at.elapsed());
        }
    }

    pub fn summary(&self) -> String {
        let ms = |duration: Option<Duration>| {
            duration.map_or_else(
                || "not seen".to_string(),
                |duration| format!("{} ms", duration.as_millis()),
            )
        };
        let leader = match self.fault {
            Fault::Leader => format!("; new leader after {}", ms(self.new_leader_after)),
            _ => String::new(),
        };
        format!(
            "{} ({}): tasks completing again after {}{leader}",
            self.fault.describe(),
            self.detail,
            ms(self.progress_after)
        )
    }
}
