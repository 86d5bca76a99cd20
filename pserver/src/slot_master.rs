//! `SlotMaster`: the master calls that claim, keep and record under a pserver slot, and the
//! claims' fresh secrets. Production is `MasterClient` with secrets from the OS; the
//! simulation wraps its `MasterClient` to write each call into its history (invoke, then ok
//! or info, and what the pserver was told of its slot) and draws the secrets from its seed, so
//! that it runs the production slot keeper (`slot_keeper.rs`) and checkpoint record
//! (`checkpointer::record`) instead of a copy of them.

use std::future::Future;

use client::{
    new_slot_secret, CheckpointMeta, CheckpointRecorded, ClientError, MasterClient, SlotHeartbeat,
    SlotLease, SlotSecret,
};

/// What a pserver asks of the masters about its slot.
pub trait SlotMaster: Send + Sync + 'static {
    /// Claims the lowest free slot below `desired` for `addr`; `None` while all are held.
    fn claim_slot(
        &self,
        addr: &str,
        desired: u32,
        secret: SlotSecret,
    ) -> impl Future<Output = Result<Option<SlotLease>, ClientError>> + Send;

    /// Renews `lease`, reporting the shard's `step`: whether the slot is still held, or its
    /// job ended.
    fn slot_heartbeat(
        &self,
        lease: &SlotLease,
        addr: &str,
        step: u64,
    ) -> impl Future<Output = Result<SlotHeartbeat, ClientError>> + Send;

    /// Records a checkpoint under `lease`'s generation and secret.
    fn record_checkpoint(
        &self,
        lease: &SlotLease,
        meta: &CheckpointMeta,
    ) -> impl Future<Output = Result<CheckpointRecorded, ClientError>> + Send;

    /// The next call looks for the leader afresh (one went unanswered for a whole lease).
    fn forget_leader(&self);

    /// A fresh secret for one claim: only this pserver ever learns it.
    fn new_secret(&self) -> SlotSecret;
}

impl SlotMaster for MasterClient {
    fn claim_slot(
        &self,
        addr: &str,
        desired: u32,
        secret: SlotSecret,
    ) -> impl Future<Output = Result<Option<SlotLease>, ClientError>> + Send {
        MasterClient::claim_slot(self, addr, desired, secret)
    }

    fn slot_heartbeat(
        &self,
        lease: &SlotLease,
        addr: &str,
        step: u64,
    ) -> impl Future<Output = Result<SlotHeartbeat, ClientError>> + Send {
        MasterClient::slot_heartbeat(self, lease, addr, step)
    }

    fn record_checkpoint(
        &self,
        lease: &SlotLease,
        meta: &CheckpointMeta,
    ) -> impl Future<Output = Result<CheckpointRecorded, ClientError>> + Send {
        MasterClient::record_checkpoint(self, lease, meta)
    }

    fn forget_leader(&self) {
        MasterClient::forget_leader(self);
    }

    fn new_secret(&self) -> SlotSecret {
        new_slot_secret()
    }
}
