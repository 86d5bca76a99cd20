//! `LeaderDuties`: lease tables for trainers and pservers, and the loop that acts on them while
//! this node leads.

use super::decisions::decide;
use super::idle_jobs::IdleJobs;
use super::lease_table::LeaseTable;
use super::quiet_time::QuietTime;
use crate::clock::Clock;
use crate::service::Proposer;
use crate::state::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// How often the leader looks for lost holders and expired tasks.
pub(crate) const DUTY_TICK_MS: u64 = 100;

/// A trainer of a job: (job id, trainer id). Trainer ids are a job's own.
pub(crate) type TrainerKey = (u64, u64);
/// A slot's holder in a job: (job id, slot index, generation).
pub(crate) type SlotKey = (u64, u32, u64);

pub(crate) struct LeaderDuties {
    clock: std::sync::Arc<dyn Clock>,
    trainer_lease: Duration,
    pserver_lease: Duration,
    trainers: Mutex<LeaseTable<TrainerKey>>,
    /// Keyed by (job, slot, generation): a new holder of a slot never inherits the lease
    /// (expired, perhaps) of the one before it, even between its claim and the next tick.
    pservers: Mutex<LeaseTable<SlotKey>>,
    /// The term the lease tables were filled in. Leases are soft state of one leadership:
    /// when the term changes (even if this node leads again, and even between two ticks),
    /// everyone gets a fresh lease before anyone is judged.
    lease_term: Mutex<Option<u64>>,
    /// Tasks each trainer says it finished (from its heartbeats; soft state for status).
    progress: Mutex<std::collections::BTreeMap<TrainerKey, u64>>,
    /// The quiet time already credited to the leases (see [`LeaderDuties::hold`]).
    quiet: Mutex<QuietTime>,
    /// How long an ended job is kept before the leader removes it.
    job_retention: Duration,
    /// How long a rendezvous run nobody writes to is kept.
    rendezvous_idle: Duration,
    /// When each running job was last touched (`idle_jobs.rs`): one untouched for the idle
    /// expiry is cancelled.
    idle: Mutex<IdleJobs>,
    /// Why holders could not reload for a restore (soft state for `job list`).
    reload_failures: super::reload_failures::ReloadFailures,
}

impl LeaderDuties {
    pub(crate) fn new(
        clock: std::sync::Arc<dyn Clock>,
        trainer_lease: Duration,
        pserver_lease: Duration,
        job_retention: Duration,
        rendezvous_idle: Duration,
        job_idle_expiry: Option<Duration>,
    ) -> Self {
        Self {
            clock,
            trainer_lease,
            pserver_lease,
            trainers: Mutex::new(LeaseTable::new(trainer_lease)),
            pservers: Mutex::new(LeaseTable::new(pserver_lease)),
            lease_term: Mutex::new(None),
            progress: Mutex::new(std::collections::BTreeMap::new()),
            quiet: Mutex::new(QuietTime::default()),
            job_retention,
            rendezvous_idle,
            idle: Mutex::new(IdleJobs::new(job_idle_expiry)),
            reload_failures: Default::default(),
        }
    }

    pub(crate) fn trainer_lease_ms(&self) -> u64 {
        self.trainer_lease.as_millis() as u64
    }

    /// How long ago this leader last renewed `trainer`'s lease in `term` (its last heartbeat,
    /// or the grant at the start of the term).
    pub(crate) fn trainer_heard_ago(&self, term: u64, trainer: TrainerKey) -> Option<Duration> {
        let now = self.clock.now();
        let _term = self.in_term(term)?;
        lock(&self.trainers)
            .granted_at(trainer)
            .map(|granted| now.saturating_duration_since(granted))
    }

    /// What the holders said of reloads that failed.
    pub(crate) fn reload_failures(&self) -> &super::reload_failures::ReloadFailures {
        &self.reload_failures
    }

    /// How long an ended job is kept before it is removed.
    pub(crate) fn job_retention_ms(&self) -> u64 {
        self.job_retention.as_millis() as u64
    }

    pub(crate) fn rendezvous_idle_ms(&self) -> u64 {
        self.rendezvous_idle.as_millis() as u64
    }

    pub(crate) fn pserver_lease_ms(&self) -> u64 {
        self.pserver_lease.as_millis() as u64
    }

    /// `trainer` was heard from by this node leading in `term`: a fresh lease.
    pub(crate) fn trainer_alive(&self, term: u64, trainer: TrainerKey) {
        let Some(_term) = self.in_term(term) else { return };
        lock(&self.trainers).grant(trainer, self.clock.now());
        lock(&self.idle).touch(trainer.0, self.clock.now());
    }

    /// What `trainer`'s heartbeat in `term` said of its progress (soft state, like its lease).
    pub(crate) fn trainer_progress(&self, term: u64, trainer: TrainerKey, tasks_done: u64) {
        let Some(_term) = self.in_term(term) else { return };
        lock(&self.progress).insert(trainer, tasks_done);
    }

    /// Tasks `trainer` said it finished, as its latest heartbeat to this leader in `term` said.
    pub(crate) fn trainer_tasks_done(&self, term: u64, trainer: TrainerKey) -> Option<u64> {
        let _term = self.in_term(term)?;
        lock(&self.progress).get(&trainer).copied()
    }

    /// A pserver claimed a slot from this node leading in `term`: a fresh lease.
    pub(crate) fn pserver_granted(&self, term: u64, slot: SlotKey) {
        let Some(_term) = self.in_term(term) else { return };
        lock(&self.pservers).grant(slot, self.clock.now());
        lock(&self.idle).touch(slot.0, self.clock.now());
    }

    /// `slot`'s holder under `generation` heartbeated to this node leading in `term`:
    /// renews its lease, unless the lease already ran out in this term (then the slot's release
    /// may already be proposed, and the holder must stop). In a term whose first round has not
    /// run yet, the holder will get a fresh lease in that round, as every holder does.
    pub(crate) fn pserver_alive(&self, term: u64, slot: SlotKey) -> bool {
        let Some(_term) = self.in_term(term) else { return true };
        let renewed = lock(&self.pservers).renew(slot, self.clock.now());
        if renewed {
            lock(&self.idle).touch(slot.0, self.clock.now());
        }
        renewed
    }

    /// Forgets all leases: the next time this node leads, everyone starts with a fresh lease.
    fn step_down(&self) {
        if crate::planted::active("leases-across-terms") {
            return;
        }
        lock(&self.trainers).clear();
        lock(&self.pservers).clear();
        lock(&self.idle).clear();
        *lock(&self.lease_term) = None;
        lock(&self.quiet).clear();
    }

    /// A round on a leader that has not heard its quorum for a lease: nobody is judged, and
    /// the time since the last such round does not count against any lease still running.
    /// Holders cannot renew meanwhile (every renewal waits for a confirmed leadership), so
    /// judging them would free a live pserver's slot, or return a live trainer's tasks, the
    /// moment the quorum answers again (a majority outage of a minute did). A lease that ran
    /// out before the quorum went quiet stays run out. Holding only delays a release, and a
    /// leader elected elsewhere meanwhile starts from fresh leases of its own. Each quiet
    /// instant is credited once ([`QuietTime`]): the first such round holds from the newest
    /// heartbeat the quorum acknowledged (`ack_age` ago), the next ones from the last round
    /// that held or heard the quorum, so a lease is never held longer than the time that
    /// passed without quorum contact.
    fn hold(&self, term: u64, ack_age: Option<Duration>) {
        let _term = self.enter_term(term);
        let now = self.clock.now();
        let acked_at = ack_age.and_then(|age| now.checked_sub(age));
        let since = lock(&self.quiet).hold(now, acked_at);
        lock(&self.trainers).hold(since, now);
        lock(&self.pservers).hold(since, now);
        lock(&self.idle).hold(since, now);
    }

    /// A round on a leader that heard its quorum (its newest ack `ack_age` ago): the time up
    /// to now is contact, never credited by a later hold.
    fn heard(&self, ack_age: Option<Duration>) {
        let now = self.clock.now();
        let acked_at = ack_age.and_then(|age| now.checked_sub(age));
        lock(&self.quiet).heard(now, acked_at);
    }

    /// The tables' term guard, if the tables belong to `term` or a newer one. Heartbeats,
    /// grants and status reads act only on tables the duty loop entered: only it enters a term
    /// (its rounds run while this node leads in it), and its first round in a term grants every
    /// holder a fresh lease. A caller with a newer term changes nothing (its term comes from
    /// `node.term()` read after the fact, perhaps while this node is a candidate: entering it
    /// then would date leases before the term's leadership began); a caller late with an older
    /// term acts on the newer tables (renewing with the clock of now). (Lock order:
    /// `lease_term`, then a table.)
    fn in_term(&self, term: u64) -> Option<MutexGuard<'_, Option<u64>>> {
        let lease_term = lock(&self.lease_term);
        lease_term.is_some_and(|filled_in| filled_in >= term).then_some(lease_term)
    }

    /// Clears the tables if they were filled in an earlier term than `term`; only the duty
    /// loop calls it, in a term in which this node leads. Every judgement holds the returned
    /// guard, so no lease outlives the term it was granted in, even when this node leads again
    /// before its next tick. (Lock order: `lease_term`, then a table.)
    fn enter_term(&self, term: u64) -> MutexGuard<'_, Option<u64>> {
        let mut lease_term = lock(&self.lease_term);
        let newer = lease_term.is_none_or(|filled_in| term > filled_in);
        if newer {
            if !crate::planted::active("leases-across-terms") {
                lock(&self.trainers).clear();
                lock(&self.pservers).clear();
                lock(&self.progress).clear();
                lock(&self.idle).clear();
                self.reload_failures.clear();
            }
            lock(&self.quiet).clear();
            *lease_term = Some(term);
        }
        lease_term
    }

    /// One round of duties on the leader, whose leadership is in `term`. Every decision
    /// carries `term`, so one computed before a leadership change is refused after it. A round
    /// may wait on its decisions for a while; each judgement reads the clock and the state
    /// afresh, and the round ends if the tables were meanwhile renewed for a newer term.
    async fn tick(&self, proposer: &Proposer, term: u64) {
        let ack_age = || proposer.node().quorum_ack_age();
        self.heard(ack_age());
        let trainers = proposer.node().read(|state| state.trainer_ids());
        let Some(lost) = self.judge(term, &self.trainers, trainers, ack_age()) else { return };
        for (job, trainer) in lost {
            tracing::warn!(job, trainer, term, "trainer missed its lease; returning its tasks");
            decide(proposer, term, Command::in_job(job, Command::TrainerLost { trainer })).await;
        }
        let slots = proposer.node().read(|state| state.held_slots());
        let holders = slots.iter().map(|(job, slot, holder)| (*job, *slot, holder.generation));
        let holders = holders.collect::<Vec<_>>();
        let Some(dead) = self.judge(term, &self.pservers, holders, ack_age()) else { return };
        for (job, slot, holder) in slots {
            let (addr, generation) = (holder.addr, holder.generation);
            if !dead.contains(&(job, slot, generation)) {
                continue;
            }
            tracing::warn!(job, slot, %addr, generation, term, "pserver missed its lease; freeing its slot");
            let release = Command::ReleasePServerSlot { slot, generation };
            decide(proposer, term, Command::in_job(job, release)).await;
        }
        for job in proposer.node().read(|state| state.jobs_expired(proposer.now_ms())) {
            decide(proposer, term, Command::in_job(job, Command::ExpireTasks)).await;
        }
        let retention_ms = self.job_retention.as_millis() as u64;
        let now_ms = proposer.now_ms();
        let past = |state: &crate::ReplicatedState| {
            state.state().jobs_past_retention(retention_ms, now_ms)
        };
        for job in proposer.node().read(past) {
            tracing::info!(job, term, "removing an ended job after its retention");
            decide(proposer, term, Command::RemoveJob { job }).await;
        }
        self.expire_rendezvous(proposer, term).await;
        let running = proposer.node().read(|state| state.state().running_job_clocks());
        let Some(idle) = self.judge_idle(term, running, ack_age()) else { return };
        for (job, clock_ms) in idle {
            tracing::warn!(
                job,
                term,
                "no client touched the job for its idle expiry; cancelling it"
            );
            decide(proposer, term, Command::CancelIdleJob { job, clock_ms }).await;
        }
    }

    /// Removes the rendezvous runs nobody wrote to for the idle time (each only if still
    /// untouched when the decision applies).
    async fn expire_rendezvous(&self, proposer: &Proposer, term: u64) {
        let before_ms = proposer.now_ms().saturating_sub(self.rendezvous_idle_ms());
        let idle = proposer.node().read(|state| state.state().rendezvous_idle_since(before_ms));
        for (run, touched_ms) in idle {
            tracing::info!(run, touched_ms, term, "removing a rendezvous run nobody wrote to");
            let command = Command::RemoveRendezvous { run, touched_ms: Some(touched_ms) };
            decide(proposer, term, command).await;
        }
    }

    /// Which running jobs (with their state clocks, `running`) nobody touched for the idle
    /// expiry, judged now in `term` as `judge` judges leases (a job seen for the first time
    /// in the term, or whose state clock moved, counts as touched now); `None` if the tables
    /// already belong to a newer term.
    fn judge_idle(
        &self,
        term: u64,
        running: Vec<(u64, u64)>,
        ack_age: Option<Duration>,
    ) -> Option<Vec<(u64, u64)>> {
        let lease_term = self.enter_term(term);
        if *lease_term != Some(term) {
            return None;
        }
        let now = self.clock.now();
        let mut idle = lock(&self.idle);
        idle.observe(running, now);
        let acked_at = ack_age.and_then(|age| now.checked_sub(age));
        Some(acked_at.map_or_else(Vec::new, |acked_at| idle.idle(acked_at)))
    }

    /// Makes `table` hold exactly `known` (newcomers get a fresh lease) and returns whose
    /// lease ran out, judged now in `term`; `None` if the tables already belong to a newer term
    /// (a round that outlived its term must not fill the newer term's table with its leases).
    /// Only a lease that ran out before the newest heartbeat a quorum acknowledged (`ack_age`
    /// ago) is judged: a holder could renew until then, not since (every renewal waits for a
    /// confirmed leadership), so a lease ending just as the quorum went quiet is held, not
    /// freed when the quorum answers again.
    fn judge<K: Ord + Copy>(
        &self,
        term: u64,
        table: &Mutex<LeaseTable<K>>,
        known: Vec<K>,
        ack_age: Option<Duration>,
    ) -> Option<Vec<K>> {
        let lease_term = self.enter_term(term);
        if *lease_term != Some(term) {
            return None;
        }
        let now = self.clock.now();
        let mut table = lock(table);
        table.sync(known, now);
        let acked_at = ack_age.and_then(|age| now.checked_sub(age));
        Some(acked_at.map_or_else(Vec::new, |acked_at| table.expired(acked_at)))
    }
}

/// Runs the duties until `stop` turns true.
pub(crate) async fn run_duties(
    proposer: Proposer,
    duties: std::sync::Arc<LeaderDuties>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticks = super::ticks::every(DUTY_TICK_MS);
    while super::ticks::next(&mut ticks, &mut stop).await {
        let node = proposer.node();
        // The term is read before leadership: if leadership changes in between, the
        // decisions of this tick carry the old term and are refused when applied.
        let term = node.term();
        if node.quorum_heard_recently() {
            duties.tick(&proposer, term).await;
        } else if node.is_leader() {
            duties.hold(term, node.quorum_ack_age());
        } else {
            duties.step_down();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The tables stay consistent whatever panicked while holding them: every method leaves
    // them whole.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
