//! How a job applies the commands of `model_checkpoints.rs`: a progress checkpoint that asks
//! pservers for theirs, their tags, a restore with the model and the holders' reloads, and
//! what a restore under way changes elsewhere (no task is handed out, a waiting slot's records
//! are refused, a slot that changes hands no longer waits).

use client::{SlotAsks, SlotSecret};

use super::command::Command;
use super::job_state::JobState;
use super::pserver_slots::CheckpointMeta;
use super::response::Response;

impl JobState {
    /// Applies a command about progress checkpoints and the model that goes with them.
    pub(crate) fn execute_progress(&mut self, command: &Command, now_ms: u64) -> Response {
        match command {
            Command::CheckpointJob | Command::CheckpointProgress if self.is_restoring() => {
                Response::Rejected {
                    reason: "a restore is under way: the pservers are reloading its model"
                        .to_string(),
                }
            }
            Command::CheckpointJob => self.checkpoint_progress(now_ms),
            Command::CheckpointProgress => self.checkpoint_with_model(now_ms),
            Command::RestoreJob { checkpoint } => self.restore_with_model(*checkpoint, true),
            Command::RestoreProgress { checkpoint, data_only } => {
                self.restore_with_model(*checkpoint, *data_only)
            }
            Command::TagSlotCheckpoint { slot, generation, progress, meta } => {
                self.tag_slot((*slot, *generation), *progress, meta)
            }
            Command::SlotReloaded { slot, generation, restore } => {
                self.slot_reloaded((*slot, *generation), *restore)
            }
            other => Response::Rejected {
                reason: format!("not a progress checkpoint command: {other:?}"),
            },
        }
    }

    /// Records a progress checkpoint and asks the job's pserver slots for theirs.
    pub(crate) fn checkpoint_with_model(&mut self, now_ms: u64) -> Response {
        let response = self.checkpoint_progress(now_ms);
        if let Response::ProgressCheckpointed { id, .. } = response {
            if self.pservers.desired.is_some() {
                let holders = self.pservers.holders.iter();
                self.models
                    .ask(id, holders.map(|(slot, holder)| (*slot, holder.generation)).collect());
            }
        }
        response
    }

    /// Restores progress checkpoint `id`: the data only when `data_only` or the job has no
    /// pserver slots, else the model first (refused unless every slot has its checkpoint).
    /// A restore under way is replaced.
    pub(crate) fn restore_with_model(&mut self, id: u64, data_only: bool) -> Response {
        if let Some(refusal) = self.refusal_if_ended() {
            return refusal;
        }
        let desired = match self.pservers.desired {
            Some(desired) if !data_only => desired,
            _ => {
                let response = self.restore_progress(id);
                if matches!(response, Response::ProgressRestored { .. }) {
                    self.models.restoring = None;
                }
                return response;
            }
        };
        if self.job.is_none() {
            return Response::NoDataset;
        }
        let Some(pass) = self.progress.get(id).map(|checkpoint| checkpoint.pass) else {
            let kept = self.progress.ids();
            let reason = format!("no progress checkpoint {id} is kept (kept: {kept:?})");
            return Response::Rejected { reason };
        };
        let files = match self.models.complete(id, &self.pservers, desired) {
            Ok(files) => files,
            Err(reason) => return Response::Rejected { reason },
        };
        match self.models.start_restore(id, files, &mut self.pservers) {
            0 => self.finish_restore(id),
            pservers => Response::RestoreWaiting { pass, pservers },
        }
    }

    /// Records the holder of `slot`'s checkpoint for progress checkpoint `progress`.
    pub(crate) fn tag_slot(
        &mut self,
        slot: (u32, u64),
        progress: u64,
        meta: &CheckpointMeta,
    ) -> Response {
        match self.models.tag(&self.pservers, slot, progress, meta) {
            Ok(true) => Response::Accepted,
            Ok(false) => Response::SlotNotHeld,
            Err(reason) => Response::Rejected { reason },
        }
    }

    /// The holder of `slot` under `generation` reloaded for restore `restore`; the last
    /// one puts the queue back. A report of another restore, or of a holder fenced off, changes
    /// nothing.
    pub(crate) fn slot_reloaded(
        &mut self,
        (slot, generation): (u32, u64),
        restore: u64,
    ) -> Response {
        if !self.pservers.holds(slot, generation) {
            return Response::SlotNotHeld;
        }
        let current =
            self.models.restoring.as_ref().is_some_and(|pending| pending.number == restore);
        if !current || !self.models.waits_for(slot) {
            return Response::Stale;
        }
        self.slot_stopped_waiting(slot).unwrap_or(Response::Accepted)
    }

    /// `slot` no longer waits (reloaded, claimed anew or released): when it was the
    /// last, the queue goes back, and the answer says so.
    pub(crate) fn slot_stopped_waiting(&mut self, slot: u32) -> Option<Response> {
        if !self.models.waits_for(slot) {
            return None;
        }
        let id = self.models.slot_done(slot)?;
        Some(self.finish_restore(id))
    }

    /// Puts the queue back to progress checkpoint `id` once the model is back.
    fn finish_restore(&mut self, id: u64) -> Response {
        self.models.restoring = None;
        self.restore_progress(id)
    }

    /// Whether a restore with the model holds the queue.
    pub(crate) fn is_restoring(&self) -> bool {
        self.models.restoring.is_some()
    }

    /// Releases `slot` from its holder of `generation`; a slot waiting for that holder
    /// to reload waits no more (nobody serves the model the restore replaces).
    pub(crate) fn release_slot(&mut self, slot: u32, generation: u64) -> Response {
        let response = self.pservers.release(slot, generation);
        if response == Response::Accepted {
            self.slot_stopped_waiting(slot);
        }
        response
    }

    /// Claims a slot; a claim of a slot waiting for its holder to reload ends the wait (the
    /// new holder restores from the file the restore set).
    pub(crate) fn claim_slot(
        &mut self,
        addr: &str,
        desired: u32,
        secret: Option<SlotSecret>,
    ) -> Response {
        let response = self.pservers.claim(addr, desired, secret);
        if let Response::SlotClaimed { slot, .. } = response {
            self.slot_stopped_waiting(slot);
        }
        response
    }

    /// What a heartbeat asks of `slot`'s holder: a checkpoint for the newest progress
    /// checkpoint it has none for, a reload for a restore, which tagged files may go.
    pub fn slot_asks(&self, slot: u32) -> SlotAsks {
        let generation = self.pservers.holders.get(&slot).map(|holder| holder.generation);
        self.models.asks(slot, generation, self.progress.next_id)
    }

    /// Whether the newest progress checkpoint restores the data only: a slot changed hands
    /// (or was unheld) before its holder recorded a checkpoint for it.
    pub fn newest_checkpoint_data_only(&self) -> bool {
        let (Some(id), Some(desired)) = (self.newest_progress_checkpoint(), self.pservers.desired)
        else {
            return false;
        };
        self.models.data_only(id, &self.pservers, desired)
    }

    /// The newest progress checkpoint every pserver slot recorded its checkpoint for (`None`
    /// for a job without slots: its progress checkpoints are the data only).
    pub fn newest_model_checkpoint(&self) -> Option<u64> {
        self.models.newest_complete(self.pservers.desired?)
    }

    /// Whether progress checkpoint `id` asks the pservers for their checkpoints.
    pub fn asks_pservers(&self, id: u64) -> bool {
        self.models.tagged.contains_key(&id)
    }

    /// The holders (slot, generation) a restore with the model still waits for.
    pub fn reload_waiting_holders(&self) -> Vec<(u32, u64)> {
        let Some(pending) = &self.models.restoring else { return Vec::new() };
        let holder = |slot: &u32| Some((*slot, self.pservers.holders.get(slot)?.generation));
        pending.waiting.keys().filter_map(holder).collect()
    }

    /// How many holders a restore with the model still waits for (0 when none is under way).
    pub fn reloads_waiting(&self) -> u32 {
        self.models.restoring.as_ref().map_or(0, |pending| pending.waiting.len() as u32)
    }
}
