//! `RecordedMaster`: a simulated pserver's way to the masters, the `SlotMaster` the production
//! slot keeper and checkpoint record run on. Calls go through the production `MasterClient`
//! over the simulated network; each lands in the history as invoke, then ok or info (or
//! abandoned, when the pserver stops waiting: a crash, or a heartbeat past its lease), a grant
//! or a recorded checkpoint as an acknowledged fact, and what the pserver was told of its slot
//! (a grant, a heartbeat answered "held", with when it was sent) goes to the slot checker.
//! The claims' secrets come from a stream of their own, so the other draws, and with them the
//! schedules, stay as they were.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use client::{
    CheckpointMeta, CheckpointRecorded, ClientError, MasterClient, SlotHeartbeat, SlotLease,
    SlotSecret,
};
use pserver::slot_master::SlotMaster;

use crate::client::ClientContext;
use crate::history::{Fact, History, SlotEvent, SlotEventKind};
use crate::rng::SimRng;

/// One simulated pserver's master calls.
pub struct RecordedMaster {
    /// The pserver's id in the history.
    pserver: u64,
    /// The last call's sequence number.
    seq: AtomicU64,
    master: MasterClient,
    context: ClientContext,
    secrets: Mutex<SimRng>,
}

impl RecordedMaster {
    pub fn new(
        pserver: u64,
        master: MasterClient,
        context: ClientContext,
        secrets: SimRng,
    ) -> Self {
        let seq = AtomicU64::new(0);
        Self { pserver, seq, master, context, secrets: Mutex::new(secrets) }
    }

    /// Runs `call` as the next operation of the history.
    async fn call<T>(
        &self,
        what: String,
        call: impl Future<Output = Result<T, ClientError>>,
        fact: impl FnOnce(&T) -> Option<Fact>,
    ) -> Result<T, ClientError> {
        let mut seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let history = self.context.history.clone();
        let abandoned = Abandoned { history, client: self.pserver, seq: seq + 1, armed: true };
        let answered = self.context.call(self.pserver, &mut seq, what, call, fact).await;
        abandoned.disarm();
        answered
    }

    /// Records `meta` as `lease`'s file for progress checkpoint `progress` (the holder's
    /// answer to a heartbeat's ask; not one of `SlotMaster`'s, which production's checkpoint
    /// loop calls on its `MasterClient`).
    pub async fn tag_checkpoint(
        &self,
        lease: &SlotLease,
        progress: u64,
        meta: &CheckpointMeta,
    ) -> Result<bool, ClientError> {
        let what =
            format!("tag_checkpoint {} generation {} for {progress}", lease.slot, lease.generation);
        self.call(what, self.master.tag_checkpoint(lease, progress, meta), |_| None).await
    }

    /// Reports that `lease`'s slot reloaded its shard for restore `restore`.
    pub async fn report_reloaded(
        &self,
        lease: &SlotLease,
        restore: u64,
    ) -> Result<(), ClientError> {
        let what = format!(
            "report_reloaded {} generation {} restore {restore}",
            lease.slot, lease.generation
        );
        self.call(what, self.master.report_reloaded(lease, restore), |_| None).await
    }

    /// The pserver was told, by a call sent at `invoked_ms`, that `lease` holds its slot.
    fn told(&self, lease: &SlotLease, invoked_ms: u64, kind: SlotEventKind) {
        self.context.history.slot_event(SlotEvent {
            job: self.context.job.clone(),
            slot: lease.slot,
            generation: lease.generation,
            pserver: self.pserver,
            invoked_ms,
            answered_ms: self.context.trace.now_ms(),
            kind,
        });
    }
}

impl SlotMaster for RecordedMaster {
    async fn claim_slot(
        &self,
        addr: &str,
        desired: u32,
        secret: SlotSecret,
    ) -> Result<Option<SlotLease>, ClientError> {
        let invoked_ms = self.context.trace.now_ms();
        let fact = |lease: &Option<SlotLease>| {
            let lease = lease.as_ref()?;
            Some(Fact::SlotGranted { slot: lease.slot, generation: lease.generation })
        };
        let call = self.master.claim_slot(addr, desired, secret);
        let lease = self.call(format!("claim_slot {addr}"), call, fact).await?;
        if let Some(lease) = &lease {
            self.told(lease, invoked_ms, SlotEventKind::Granted);
        }
        Ok(lease)
    }

    async fn slot_heartbeat(
        &self,
        lease: &SlotLease,
        addr: &str,
        step: u64,
    ) -> Result<SlotHeartbeat, ClientError> {
        let invoked_ms = self.context.trace.now_ms();
        let what = format!("slot_heartbeat {} generation {}", lease.slot, lease.generation);
        let call = self.master.slot_heartbeat(lease, addr, step);
        let answer = self.call(what, call, |_| None).await?;
        if matches!(answer, SlotHeartbeat::Held(_)) {
            self.told(lease, invoked_ms, SlotEventKind::Confirmed);
        }
        Ok(answer)
    }

    async fn record_checkpoint(
        &self,
        lease: &SlotLease,
        meta: &CheckpointMeta,
    ) -> Result<CheckpointRecorded, ClientError> {
        let (slot, generation, step) = (lease.slot, lease.generation, meta.step);
        let what = format!("record_checkpoint {slot} generation {generation} step {step}");
        let fact = move |recorded: &CheckpointRecorded| {
            (*recorded == CheckpointRecorded::Recorded).then_some(Fact::CheckpointRecorded {
                slot,
                generation,
                step,
            })
        };
        self.call(what, self.master.record_checkpoint(lease, meta), fact).await
    }

    fn forget_leader(&self) {
        self.master.forget_leader();
    }

    fn new_secret(&self) -> SlotSecret {
        let mut secrets = self.secrets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        SlotSecret::from_bits(
            (u128::from(secrets.next_u64()) << 64) | u128::from(secrets.next_u64()),
        )
    }
}

/// Marks a call abandoned in the history if it is dropped before its answer came.
struct Abandoned {
    history: History,
    client: u64,
    seq: u64,
    armed: bool,
}

impl Abandoned {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if self.armed {
            self.history.abandon(self.client, self.seq);
        }
    }
}
