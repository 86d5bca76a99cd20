//! `HeldSlot`: the slot this pserver holds, its generation, and how long its lease is known to
//! hold. The lease counts from when the last answered heartbeat was *sent* and ends early by a
//! margin, so it always ends before the master's (which counts from the heartbeat's arrival).
//! A process paused past its lease finds it over on the monotonic clock the moment it runs
//! again, before it answers anything.
//!
//! A lease that ran out is *unconfirmed*, not lost: the pserver serves nothing, but keeps
//! heartbeating, because during a master failover no leader answers for a while and the new
//! leader grants every holder a fresh lease. A heartbeat answered "held" (by a leader a quorum
//! confirmed) proves no other generation holds the slot, so serving resumes. The slot is *lost*
//! for good only when the master says another generation holds it.
//!
//! A planned shutdown *leaves* the slot (`leave`): from then on every request is refused
//! (`Leaving`, which clients answer by waiting for the next holder), and `leave` returns once
//! every write admitted before it has applied, so the last checkpoint holds every push this
//! pserver acknowledged.
//!
//! The lease is judged on one clock only, the one the slot was granted with (`clock.rs`): the
//! send times come from it, and every check reads it, so an instant of another clock never
//! meets this one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client::SlotAsks;
use thiserror::Error;
use tokio::sync::{Notify, OwnedRwLockReadGuard, RwLock};
use tokio::time::Instant;

use crate::clock::Clock;

/// The share of the master's lease this pserver trusts; the rest absorbs clock drift and the
/// time between the master's answer and its arrival.
const LEASE_TRUSTED_PERCENT: u32 = 80;

/// Why a request for this pserver is refused before it reaches the shard.
#[derive(Debug, Error, PartialEq)]
pub enum FenceError {
    #[error("this pserver serves slot {slot} generation {generation}; the request is for slot {asked_slot} generation {asked_generation}: re-resolve the pserver table")]
    WrongGeneration { slot: u32, generation: u64, asked_slot: u32, asked_generation: u64 },
    #[error("this pserver no longer holds slot {slot} (generation {generation}): {reason}")]
    LeaseLost { slot: u32, generation: u64, reason: String },
    #[error("slot {slot} (generation {generation}) is not confirmed: no heartbeat answered for {overdue_ms} ms past the lease; waiting for the master")]
    LeaseUnconfirmed { slot: u32, generation: u64, overdue_ms: u128 },
    #[error("this pserver is shutting down and hands slot {slot} (generation {generation}) to the next holder: re-resolve the pserver table")]
    Leaving { slot: u32, generation: u64 },
}

/// The held slot and its lease.
#[derive(Debug)]
pub struct HeldSlot {
    slot: u32,
    generation: u64,
    lease: Duration,
    /// The clock the lease is judged on.
    clock: Arc<dyn Clock>,
    state: Mutex<LeaseState>,
    /// The highest update step the shard was seen at, reported in heartbeats: the master
    /// refuses a checkpoint record far beyond it.
    step_seen: AtomicU64,
    /// The masters said the slot's job was cancelled or removed: the pserver stops (exit 0).
    job_ended: AtomicBool,
    /// What the last heartbeat asked beyond keeping the slot (a checkpoint for a progress
    /// checkpoint, a reload), and a wake-up for the checkpoint loop when it asks something.
    asks: Mutex<SlotAsks>,
    asked: Notify,
    /// Set by `leave`: every request is refused from then on.
    leaving: AtomicBool,
    /// Held shared by every write in flight; `leave` takes it whole to wait for them.
    writes: Arc<RwLock<()>>,
}

#[derive(Debug)]
struct LeaseState {
    valid_until: Instant,
    lost: Option<String>,
}

impl HeldSlot {
    /// A slot granted by a claim sent at `claim_sent` (read from `clock`), with the master's
    /// lease length.
    pub fn granted(
        slot: u32,
        generation: u64,
        lease: Duration,
        clock: Arc<dyn Clock>,
        claim_sent: Instant,
    ) -> Self {
        let valid_until = claim_sent + trusted(lease);
        let state = Mutex::new(LeaseState { valid_until, lost: None });
        let (step_seen, job_ended) = (AtomicU64::new(0), AtomicBool::new(false));
        let (asks, asked) = (Mutex::new(SlotAsks::default()), Notify::new());
        let (leaving, writes) = (AtomicBool::new(false), Arc::new(RwLock::new(())));
        Self {
            slot,
            generation,
            lease,
            clock,
            state,
            step_seen,
            job_ended,
            asks,
            asked,
            leaving,
            writes,
        }
    }

    /// Keeps what a heartbeat asked; wakes [`HeldSlot::wait_asked`] when it asks for work.
    pub fn asked(&self, asks: SlotAsks) {
        let work = asks.tag_for.is_some() || asks.reload.is_some();
        *self.asks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = asks;
        if work {
            self.asked.notify_one();
        }
    }

    /// What the last heartbeat asked.
    pub fn asks(&self) -> SlotAsks {
        self.asks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Returns once a heartbeat asked for work (at once if one did since the last wait).
    pub async fn wait_asked(&self) {
        self.asked.notified().await
    }

    /// The clock the lease is judged on: a heartbeat's send time is read from it.
    pub fn clock(&self) -> &dyn Clock {
        &*self.clock
    }

    pub fn slot(&self) -> u32 {
        self.slot
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The shard is at update `step` now (a lower step than seen before changes nothing).
    pub fn saw_step(&self, step: u64) {
        self.step_seen.fetch_max(step, Ordering::Relaxed);
    }

    /// The highest update step seen, for heartbeats.
    pub fn step_seen(&self) -> u64 {
        self.step_seen.load(Ordering::Relaxed)
    }

    /// A heartbeat sent at `sent` was answered "held".
    pub fn renewed(&self, sent: Instant) {
        let mut state = self.lock();
        if state.lost.is_none() {
            state.valid_until = state.valid_until.max(sent + trusted(self.lease));
        }
    }

    /// The masters said the slot's job ended (cancelled, or removed after it ended).
    pub fn end_job(&self) {
        self.job_ended.store(true, Ordering::Relaxed);
    }

    /// Whether the slot's job ended: the pserver stops as for a shutdown.
    pub fn is_job_ended(&self) -> bool {
        self.job_ended.load(Ordering::Relaxed)
    }

    /// The slot is gone for good: another generation holds it.
    pub fn lose(&self, reason: String) {
        let mut state = self.lock();
        if state.lost.is_none() {
            state.lost = Some(reason);
        }
    }

    /// Ok while the lease holds now; `LeaseUnconfirmed` past it until a heartbeat is
    /// answered; `LeaseLost` for good once the master gave the slot to another generation.
    pub fn check(&self) -> Result<(), FenceError> {
        let now = self.clock.now();
        let state = self.lock();
        let (slot, generation) = (self.slot, self.generation);
        if let Some(reason) = &state.lost {
            return Err(FenceError::LeaseLost { slot, generation, reason: reason.clone() });
        }
        if now >= state.valid_until {
            let overdue_ms = now.duration_since(state.valid_until).as_millis();
            return Err(FenceError::LeaseUnconfirmed { slot, generation, overdue_ms });
        }
        Ok(())
    }

    /// Whether the slot is lost for good.
    pub fn is_lost(&self) -> bool {
        self.lock().lost.is_some()
    }

    /// Ok if the lease holds, the slot is not being left, and the request is meant for this
    /// slot and generation.
    pub fn admit(&self, asked_slot: u32, asked_generation: u64) -> Result<(), FenceError> {
        self.check()?;
        if self.leaving.load(Ordering::SeqCst) {
            return Err(FenceError::Leaving { slot: self.slot, generation: self.generation });
        }
        if asked_slot != self.slot || asked_generation != self.generation {
            return Err(FenceError::WrongGeneration {
                slot: self.slot,
                generation: self.generation,
                asked_slot,
                asked_generation,
            });
        }
        Ok(())
    }

    /// Admits a write (see [`HeldSlot::admit`]); `leave` waits until the guard is dropped.
    pub fn admit_write(
        &self,
        asked_slot: u32,
        asked_generation: u64,
    ) -> Result<OwnedRwLockReadGuard<()>, FenceError> {
        let leaving = FenceError::Leaving { slot: self.slot, generation: self.generation };
        // Taken before the flag is read: a write that saw no flag holds the guard `leave`
        // waits for.
        let guard = self.writes.clone().try_read_owned().map_err(|_| leaving)?;
        self.admit(asked_slot, asked_generation)?;
        Ok(guard)
    }

    /// Refuses every request from now on and returns once the writes admitted before have
    /// applied.
    pub async fn leave(&self) {
        self.leaving.store(true, Ordering::SeqCst);
        drop(self.writes.write().await);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LeaseState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn trusted(lease: Duration) -> Duration {
    lease * LEASE_TRUSTED_PERCENT / 100
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;

    /// A slot granted now, on the system clock (which a paused test runtime drives).
    fn granted(slot: u32, generation: u64) -> (HeldSlot, Instant) {
        let start = Instant::now();
        let lease = Duration::from_millis(1000);
        (HeldSlot::granted(slot, generation, lease, Arc::new(SystemClock), start), start)
    }

    /// Moves the paused clock to `start + at_ms`.
    async fn at(start: Instant, at_ms: u64) {
        tokio::time::advance((start + Duration::from_millis(at_ms)) - Instant::now()).await;
    }

    /// The lease counts from the claim's send, ends at 80% of it, comes back with an answered
    /// heartbeat, and never comes back once lost.
    #[tokio::test(start_paused = true)]
    async fn the_lease_runs_from_the_send_and_ends_before_the_masters() {
        let (slot, start) = granted(2, 7);
        at(start, 799).await;
        assert_eq!(slot.admit(2, 7), Ok(()));
        at(start, 800).await;
        assert!(matches!(slot.check(), Err(FenceError::LeaseUnconfirmed { .. })));
        // A heartbeat answered after a failover confirms the slot again.
        slot.renewed(start + Duration::from_millis(900));
        at(start, 901).await;
        assert_eq!(slot.check(), Ok(()));
        // Lost stays lost, even if a late heartbeat answer arrives.
        slot.lose("slot 2 is held by generation 8".into());
        slot.renewed(start + Duration::from_millis(950));
        at(start, 951).await;
        assert!(matches!(slot.check(), Err(FenceError::LeaseLost { .. })));
        assert!(slot.is_lost());
    }

    /// `leave` waits for a write admitted before it, refuses every request from its start
    /// (writes and reads alike), and leaves the lease itself untouched for the last checkpoint.
    #[tokio::test]
    async fn leaving_waits_for_admitted_writes_and_refuses_the_rest() {
        let (slot, _) = granted(1, 5);
        let slot = Arc::new(slot);
        let in_flight = slot.admit_write(1, 5).expect("a write before the shutdown");
        let leaving = tokio::spawn({
            let slot = slot.clone();
            async move { slot.leave().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!leaving.is_finished(), "leave waits for the write in flight");
        assert!(matches!(
            slot.admit_write(1, 5),
            Err(FenceError::Leaving { slot: 1, generation: 5 })
        ));
        assert!(matches!(slot.admit(1, 5), Err(FenceError::Leaving { .. })));
        drop(in_flight);
        leaving.await.expect("leave returns once the write applied");
        assert!(matches!(slot.admit_write(1, 5), Err(FenceError::Leaving { .. })));
        assert_eq!(slot.check(), Ok(()), "the lease still holds for the last checkpoint");
    }

    /// A renewal moves the end to 80% past its send; requests for another slot or generation
    /// are refused, and everything is once the slot is lost.
    #[tokio::test(start_paused = true)]
    async fn renewals_extend_and_requests_for_others_are_refused() {
        let (slot, start) = granted(0, 3);
        slot.renewed(start + Duration::from_millis(500));
        at(start, 1200).await;
        assert_eq!(slot.check(), Ok(()));
        assert!(matches!(slot.admit(0, 2), Err(FenceError::WrongGeneration { generation: 3, .. })));
        assert!(matches!(slot.admit(1, 3), Err(FenceError::WrongGeneration { .. })));
        slot.lose("slot 0 is held by generation 4".into());
        assert!(matches!(slot.admit(0, 3), Err(FenceError::LeaseLost { .. })));
    }

    /// A clock running 25% fast since `origin`.
    #[derive(Debug)]
    struct FastClock {
        origin: Instant,
    }

    impl Clock for FastClock {
        fn now(&self) -> Instant {
            self.origin + (Instant::now() - self.origin) * 5 / 4
        }

        fn wall_ms(&self) -> u64 {
            0
        }
    }

    /// The lease is judged on the slot's own clock: on one running 25% fast, the trusted 800 ms
    /// of a 1 s lease end after 640 ms of true time.
    #[tokio::test(start_paused = true)]
    async fn the_lease_is_judged_on_the_slots_clock() {
        let start = Instant::now();
        let clock = Arc::new(FastClock { origin: start });
        let slot = HeldSlot::granted(1, 4, Duration::from_millis(1000), clock, start);
        at(start, 639).await;
        assert_eq!(slot.check(), Ok(()));
        at(start, 640).await;
        assert!(matches!(slot.check(), Err(FenceError::LeaseUnconfirmed { .. })));
    }
}
