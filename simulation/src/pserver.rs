//! A simulated pserver, on the production `MasterClient`'s slot API: claims a slot, heartbeats
//! it every quarter lease, records a checkpoint now and then under its generation, stops
//! serving when the master says it lost the slot or when no heartbeat was confirmed for most
//! of a lease, and sometimes crashes and comes back (claiming again). What it is told of its
//! slot goes to the slot checker; its checkpoint records to the client-visible checker. Each
//! claim carries a secret drawn from a stream of its own (so the other draws, and with them
//! the schedules, stay as they were), and heartbeats and records carry it back.

use std::sync::Arc;
use std::time::Duration;

use client::{
    CheckpointMeta, CheckpointRecorded, ClientError, MasterClient, SlotLease, SlotSecret,
};

use crate::client::ClientContext;
use crate::config::SimulationConfig;
use crate::history::{Fact, SlotEvent};
use crate::rng::SimRng;

/// Ids of pservers in the history start here.
pub const PSERVER_ID_BASE: u64 = 2_000;
/// A pserver that heard no confirmation for this part of a lease stops serving.
const SELF_FENCE_PERCENT: u64 = 80;
/// Chance per heartbeat that the pserver crashes, and how long it stays down.
const CRASH_PERCENT: u64 = 2;
const DOWN_MS: (u64, u64) = (100, 3_000);
/// Every this many heartbeats, a checkpoint.
const CHECKPOINT_EVERY: u64 = 8;
const RETRY_MS: (u64, u64) = (50, 200);
/// The random streams of the pservers' claim secrets, far from every other component's.
const SECRET_STREAM_BASE: u64 = 1 << 40;

/// One pserver process slot (it restarts under the same address).
pub struct SimPServer {
    id: u64,
    addr: String,
    seq: u64,
    rng: SimRng,
    /// Draws the claims' secrets.
    secrets: SimRng,
    master: Arc<MasterClient>,
    context: ClientContext,
    slots: u32,
    lease_ms: u64,
    step: u64,
}

impl SimPServer {
    /// Pserver number `index` of the run.
    pub fn new(
        index: u64,
        config: &SimulationConfig,
        context: ClientContext,
    ) -> anyhow::Result<Self> {
        let master = Arc::new(context.master_client(config, config.seed ^ (0x9e55 + index))?);
        Ok(Self {
            id: PSERVER_ID_BASE + index,
            addr: format!("ps-{index}:9000"),
            seq: 0,
            rng: SimRng::derive(config.seed, 50 + index),
            secrets: SimRng::derive(config.seed, SECRET_STREAM_BASE + index),
            master,
            context,
            slots: config.pserver_slots,
            lease_ms: config.master.pserver_lease_ms,
            step: 0,
        })
    }

    /// Claims and serves until the run ends.
    pub async fn run(mut self) {
        loop {
            match self.claim().await {
                Some((lease, claimed_ms)) => self.serve(lease, claimed_ms).await,
                None => self.pause(RETRY_MS).await,
            }
        }
    }

    /// A granted slot, and when the claim was sent (the lease counts from then).
    async fn claim(&mut self) -> Option<(SlotLease, u64)> {
        let (master, invoked_ms) = (self.master.clone(), self.context.trace.now_ms());
        let bits =
            (u128::from(self.secrets.next_u64()) << 64) | u128::from(self.secrets.next_u64());
        let call = master.claim_slot(&self.addr, self.slots, SlotSecret::from_bits(bits));
        let what = format!("claim_slot {}", self.addr);
        let fact = |lease: &Option<SlotLease>| {
            lease
                .as_ref()
                .map(|lease| Fact::SlotGranted { index: lease.index, generation: lease.generation })
        };
        let lease = self.context.call(self.id, &mut self.seq, what, call, fact).await.ok()??;
        self.told(&lease, invoked_ms, true);
        // A grant that took most of a lease to arrive may already have been given away.
        let late = self.context.trace.now_ms() - invoked_ms > self.fence_ms();
        (!late).then_some((lease, invoked_ms))
    }

    /// A pserver serves for this long after sending a heartbeat the master confirmed.
    fn fence_ms(&self) -> u64 {
        self.lease_ms * SELF_FENCE_PERCENT / 100
    }

    /// Serves `lease` until the slot is lost, a crash, or self-fencing: trusts each
    /// confirmation from when its heartbeat (at first, the claim) was sent.
    async fn serve(&mut self, lease: SlotLease, claimed_ms: u64) {
        let mut confirmed_ms = claimed_ms;
        for beat in 1.. {
            tokio::time::sleep(Duration::from_millis(self.lease_ms / 4)).await;
            if self.rng.percent(CRASH_PERCENT) {
                self.context.trace.record(format!("pserver {} crashes", self.id));
                self.pause(DOWN_MS).await;
                return;
            }
            let invoked_ms = self.context.trace.now_ms();
            match self.heartbeat(&lease).await {
                Some(true) => {
                    self.told(&lease, invoked_ms, false);
                    confirmed_ms = invoked_ms;
                }
                Some(false) => return,
                None if self.context.trace.now_ms() - confirmed_ms > self.fence_ms() => {
                    self.context.trace.record(format!("pserver {} stops serving", self.id));
                    return;
                }
                None => {}
            }
            if beat % CHECKPOINT_EVERY == 0 && !self.checkpoint(&lease).await {
                return;
            }
        }
    }

    async fn heartbeat(&mut self, lease: &SlotLease) -> Option<bool> {
        let master = self.master.clone();
        let call = master.slot_heartbeat(lease, &self.addr, self.step);
        let what = format!("slot_heartbeat {} generation {}", lease.index, lease.generation);
        self.context.call(self.id, &mut self.seq, what, call, |_| None).await.ok()
    }

    /// Records a checkpoint; false once the master says the slot is not ours.
    async fn checkpoint(&mut self, lease: &SlotLease) -> bool {
        self.step += 1;
        let (index, generation, step) = (lease.index, lease.generation, self.step);
        let meta = CheckpointMeta {
            path: format!("ckpt/{}", storage::checkpoint::file_name(index, step, generation)),
            step,
            crc32: 0,
            created_ms: self.context.trace.now_ms(),
        };
        let master = self.master.clone();
        let call = master.record_checkpoint(lease, &meta);
        let what = format!("record_checkpoint {index} generation {generation} step {step}");
        let fact = move |recorded: &CheckpointRecorded| {
            (*recorded == CheckpointRecorded::Recorded).then_some(Fact::CheckpointRecorded {
                index,
                generation,
                step,
            })
        };
        let answered = self.context.call(self.id, &mut self.seq, what, call, fact).await;
        !matches!(answered, Err(ClientError::NotHolder { .. }))
    }

    fn told(&self, lease: &SlotLease, invoked_ms: u64, granted: bool) {
        self.context.history.slot_event(SlotEvent {
            index: lease.index,
            generation: lease.generation,
            pserver: self.id,
            invoked_ms,
            answered_ms: self.context.trace.now_ms(),
            granted,
        });
    }

    async fn pause(&mut self, range: (u64, u64)) {
        tokio::time::sleep(Duration::from_millis(self.rng.range(range.0, range.1))).await;
    }
}
