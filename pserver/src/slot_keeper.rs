//! Claiming a slot through the master and keeping it: the claim waits while every slot is
//! held (a standby takes over when a holder's lease ends), and the heartbeat loop renews the
//! lease until the master says another generation holds the slot or no answer comes in time.
//! Both read time from the pserver's `Clock` and reach the masters through `SlotMaster`, so the
//! simulation runs them as they are.

use std::sync::Arc;
use std::time::Duration;

use client::{ClientError, SlotHeartbeat, SlotLease};
use tokio::sync::watch;

use crate::clock::Clock;
use crate::held_slot::HeldSlot;
use crate::slot_master::SlotMaster;

/// Between claims while every slot is held.
const CLAIM_RETRY_MS: u64 = 250;
/// Heartbeats per lease: three may be lost before the lease (trusted at 80%) runs out.
const HEARTBEATS_PER_LEASE: u32 = 5;
/// How long a heartbeat waits for its answer once the lease ran out unanswered. Nothing more is
/// lost by waiting then, and a heartbeat cut off at every lease, each one looking for the
/// leader afresh, may never be answered on a loaded machine while a new leader settles.
const OVERDUE_PATIENCE: Duration = Duration::from_secs(10);

/// Claims the lowest free slot below `desired` for `addr`, waiting while all are held; the
/// slot's lease is judged on `clock`. `None` if `stop` turned true first.
pub async fn claim(
    master: &impl SlotMaster,
    clock: Arc<dyn Clock>,
    addr: &str,
    desired: u32,
    stop: &mut watch::Receiver<bool>,
) -> anyhow::Result<Option<(Arc<HeldSlot>, SlotLease)>> {
    let mut waiting_logged = false;
    loop {
        let sent = clock.now();
        // A fresh secret per claim: only this process ever learns it.
        match master.claim_slot(addr, desired, master.new_secret()).await {
            Ok(Some(lease)) => {
                let lease_time = Duration::from_millis(lease.lease_ms);
                let (slot, generation) = (lease.slot, lease.generation);
                let held = HeldSlot::granted(slot, generation, lease_time, clock, sent);
                // The shard restores at the recorded step: heartbeats report it from the
                // first, so the first checkpoint record is not judged against step 0.
                held.saw_step(lease.checkpoint.as_ref().map_or(0, |meta| meta.step));
                return Ok(Some((Arc::new(held), lease)));
            }
            Ok(None) if !waiting_logged => {
                tracing::info!(
                    desired,
                    "all {desired} pserver slots are held; waiting for one to free"
                );
                waiting_logged = true;
            }
            Ok(None) => {}
            Err(error @ ClientError::Deadline { .. }) => {
                tracing::warn!(%error, "claiming a slot; retrying")
            }
            // A pserver may start before its job is submitted: it waits for it.
            Err(error @ ClientError::NoSuchJob { .. }) if !waiting_logged => {
                tracing::info!(%error, "waiting for the job to be submitted");
                waiting_logged = true;
            }
            Err(ClientError::NoSuchJob { .. }) => {}
            Err(ClientError::JobCancelled { .. }) => {
                tracing::info!("the job was cancelled; not claiming a slot");
                return Ok(None);
            }
            Err(error) => return Err(anyhow::Error::new(error).context("claim a pserver slot")),
        }
        // Biased, stop first: a stop wins a tie, and the simulation replays a seed exactly
        // (an unbiased select draws from tokio's unseeded RNG).
        tokio::select! {
            biased;
            _ = stop.wait_for(|stop| *stop) => return Ok(None),
            _ = tokio::time::sleep(Duration::from_millis(CLAIM_RETRY_MS)) => {}
        }
    }
}

/// Renews the lease until `stop` turns true, the master says another generation holds the
/// slot (then `held` is marked lost), or that the slot's job ended (then `held` says so). A
/// lease that ran out unanswered (a master failover) is renewed again as soon as a leader
/// answers; until then each heartbeat waits longer for its answer. Each heartbeat carries the
/// claim's secret and the shard's step as last seen.
pub async fn keep(
    master: Arc<impl SlotMaster>,
    held: Arc<HeldSlot>,
    lease: SlotLease,
    addr: String,
    mut stop: watch::Receiver<bool>,
) {
    let interval = (held.lease() / HEARTBEATS_PER_LEASE).max(Duration::from_millis(10));
    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|stop| *stop) => return,
            _ = tokio::time::sleep(interval) => {}
        }
        if held.is_lost() {
            return;
        }
        let sent = held.clock().now();
        let waits = patience(&held);
        let beat = master.slot_heartbeat(&lease, &addr, held.step_seen());
        // A stop does not wait for a heartbeat to masters that may be gone.
        let answered = tokio::select! {
            biased;
            _ = stop.wait_for(|stop| *stop) => return,
            answered = tokio::time::timeout(waits, beat) => answered,
        };
        match answered {
            Ok(Ok(SlotHeartbeat::Held(asks))) => {
                held.renewed(sent);
                held.asked(asks);
            }
            Ok(Ok(SlotHeartbeat::JobEnded)) => {
                tracing::info!(slot = held.slot(), "the slot's job ended; stopping");
                held.end_job();
                return;
            }
            Ok(Ok(SlotHeartbeat::NotHeld)) => {
                held.lose(format!(
                    "the master says slot {} is no longer held under generation {}",
                    held.slot(),
                    held.generation()
                ));
                return;
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, slot = held.slot(), "pserver heartbeat failed")
            }
            Err(_) => {
                tracing::warn!(
                    slot = held.slot(),
                    waited_ms = waits.as_millis() as u64,
                    "pserver heartbeat got no answer in time"
                );
                // The next heartbeat looks for the leader afresh.
                master.forget_leader();
            }
        }
    }
}

/// How long the next heartbeat waits for its answer: the lease while it holds, so that a
/// master that stopped answering is left in time; longer once it ran out.
fn patience(held: &HeldSlot) -> Duration {
    match held.check() {
        Ok(()) => held.lease(),
        Err(_) => held.lease().max(OVERDUE_PATIENCE),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    use client::{CheckpointMeta, CheckpointRecorded, SlotAsks, SlotSecret};

    use super::*;
    use crate::clock::SystemClock;

    /// A master group whose leader takes `finding` to be found (as on a loaded machine during a
    /// failover): a heartbeat looking for it answers after that, the next ones at once, until
    /// `forget_leader` makes the next look again.
    struct SlowMaster {
        finding: Duration,
        found: AtomicBool,
        forgotten: AtomicU32,
    }

    impl SlotMaster for SlowMaster {
        async fn claim_slot(
            &self,
            _addr: &str,
            _desired: u32,
            _secret: SlotSecret,
        ) -> Result<Option<SlotLease>, ClientError> {
            Ok(None)
        }

        async fn slot_heartbeat(
            &self,
            _lease: &SlotLease,
            _addr: &str,
            _step: u64,
        ) -> Result<SlotHeartbeat, ClientError> {
            if !self.found.load(Ordering::Relaxed) {
                tokio::time::sleep(self.finding).await;
                self.found.store(true, Ordering::Relaxed);
            }
            Ok(SlotHeartbeat::Held(SlotAsks::default()))
        }

        async fn record_checkpoint(
            &self,
            _lease: &SlotLease,
            _meta: &CheckpointMeta,
        ) -> Result<CheckpointRecorded, ClientError> {
            unreachable!("the keeper records no checkpoint")
        }

        fn forget_leader(&self) {
            self.forgotten.fetch_add(1, Ordering::Relaxed);
            self.found.store(false, Ordering::Relaxed);
        }

        fn new_secret(&self) -> SlotSecret {
            SlotSecret::from_bits(1)
        }
    }

    /// The leader takes twice the lease to be found: the first heartbeat is cut off at the lease,
    /// which runs out, and the next waits for its answer (and so for the leader to be found)
    /// instead of being cut off at every lease for ever; the one after renews the lease.
    #[tokio::test(start_paused = true)]
    async fn a_lease_that_ran_out_waits_for_the_leader_to_be_found_and_is_renewed() {
        let lease_time = Duration::from_millis(500);
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let held = Arc::new(HeldSlot::granted(0, 1, lease_time, clock.clone(), clock.now()));
        let master = Arc::new(SlowMaster {
            finding: 2 * lease_time,
            found: AtomicBool::new(false),
            forgotten: AtomicU32::new(0),
        });
        let lease = SlotLease {
            slot: 0,
            generation: 1,
            secret: SlotSecret::from_bits(1),
            lease_ms: 500,
            checkpoint: None,
            job_id: 1,
            model_restore: 0,
        };
        let (stop, stopped) = watch::channel(false);
        let keeper = tokio::spawn(keep(master.clone(), held.clone(), lease, "a".into(), stopped));
        tokio::time::sleep(Duration::from_secs(2)).await;
        stop.send_replace(true);
        keeper.await.expect("keeper");
        assert!(held.check().is_ok(), "renewed once the leader was found");
        assert_eq!(master.forgotten.load(Ordering::Relaxed), 1, "only the first was cut off");
    }
}
