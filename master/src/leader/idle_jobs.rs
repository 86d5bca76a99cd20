//! `IdleJobs`: when each running job was last touched, as the leader's soft state, so that a
//! job left running by a script that crashed ends instead of holding one of the group's 32
//! places for ever.
//!
//! A job is *touched* when the leader accepts a heartbeat of one of its trainers or pservers
//! (a trainer's lease renewed, a slot claimed or its lease renewed) or when a command is
//! applied to it, which the leader sees as the job's state clock moving: every client write
//! (reports, task calls and progress, registrations, claims, checkpoint records, evaluations)
//! and the leader's own decisions about it (a trainer lost, tasks expired; these only delay an
//! expiry). Reads (`status`, `job list`) touch nothing. A job untouched for the idle expiry is
//! cancelled by a replicated `CancelIdleJob`, fenced by the state clock the leader judged it
//! at. The clocks are soft state of one term: a new leader starts every job's clock afresh
//! when it first sees it, so after a failover a job expires later than it would have, never
//! earlier. A trainer that holds a task heartbeats, so its job is never idle.

use super::lease_table::LeaseTable;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

pub(crate) struct IdleJobs {
    /// A "lease" per running job, of the idle expiry, renewed by every touch; `None`: jobs
    /// never expire for idleness (`--job-idle-expiry-ms 0`).
    touched: Option<LeaseTable<u64>>,
    /// Each running job's state clock when last seen: a moved clock is a touch.
    clocks: BTreeMap<u64, u64>,
}

impl IdleJobs {
    pub(crate) fn new(expiry: Option<Duration>) -> Self {
        Self { touched: expiry.map(LeaseTable::new), clocks: BTreeMap::new() }
    }

    /// Makes the table hold exactly the running jobs, `(job, state clock)`: a job seen for
    /// the first time, or whose clock moved since the last look, counts as touched `now`.
    pub(crate) fn observe(&mut self, running: Vec<(u64, u64)>, now: Instant) {
        let Some(touched) = &mut self.touched else { return };
        touched.sync(running.iter().map(|(job, _)| *job), now);
        for (job, clock_ms) in &running {
            if self.clocks.get(job).is_some_and(|seen| seen != clock_ms) {
                touched.grant(*job, now);
            }
        }
        self.clocks = running.into_iter().collect();
    }

    /// A heartbeat of one of `job`'s members was accepted `now`.
    pub(crate) fn touch(&mut self, job: u64, now: Instant) {
        if let Some(touched) = &mut self.touched {
            touched.grant(job, now);
        }
    }

    /// The quiet time from `since` to `now` (no quorum: no heartbeat could be accepted) does
    /// not count against any job, as it does not against leases.
    pub(crate) fn hold(&mut self, since: Instant, now: Instant) {
        if let Some(touched) = &mut self.touched {
            touched.hold(since, now);
        }
    }

    /// Forgets everything (a new term, or this node stopped leading).
    pub(crate) fn clear(&mut self) {
        if let Some(touched) = &mut self.touched {
            touched.clear();
        }
        self.clocks.clear();
    }

    /// The jobs untouched for the idle expiry by `now`, with the state clock they were
    /// judged at, in id order.
    pub(crate) fn idle(&self, now: Instant) -> Vec<(u64, u64)> {
        let Some(touched) = &self.touched else { return Vec::new() };
        let clock = |job: u64| self.clocks.get(&job).map(|clock_ms| (job, *clock_ms));
        touched.expired(now).into_iter().filter_map(clock).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job goes idle only after the expiry without a heartbeat or a moved state clock; a
    /// new term starts its clock afresh; with no expiry nothing is ever idle.
    #[test]
    fn a_job_is_idle_only_when_untouched_for_the_expiry() {
        let (start, second) = (Instant::now(), Duration::from_secs(1));
        let mut jobs = IdleJobs::new(Some(10 * second));
        jobs.observe(vec![(1, 100), (2, 100)], start);
        jobs.touch(1, start + 5 * second);
        jobs.observe(vec![(1, 100), (2, 100)], start + 9 * second);
        assert_eq!(jobs.idle(start + 10 * second), vec![(2, 100)], "job 1 had a heartbeat");
        jobs.observe(vec![(1, 100), (2, 250)], start + 11 * second);
        assert!(jobs.idle(start + 14 * second).is_empty(), "job 2's clock moved: touched");
        assert_eq!(jobs.idle(start + 15 * second), vec![(1, 100)]);
        jobs.hold(start + 15 * second, start + 20 * second);
        assert_eq!(jobs.idle(start + 20 * second), vec![(1, 100)], "an idle job stays idle");
        jobs.clear();
        jobs.observe(vec![(1, 100)], start + 20 * second);
        assert!(jobs.idle(start + 29 * second).is_empty(), "a new term starts afresh");
        jobs.observe(vec![], start + 30 * second);
        assert!(jobs.idle(start + 60 * second).is_empty(), "an ended job is forgotten");
        let mut never = IdleJobs::new(None);
        never.observe(vec![(1, 100)], start);
        assert!(never.idle(start + 1_000_000 * second).is_empty());
    }
}
