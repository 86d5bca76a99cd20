//! The model half of a progress checkpoint: each pserver slot's own checkpoint taken for it
//! (asked by heartbeats, recorded by `TagSlotCheckpoint`), and a restore that puts the model
//! back with the data.
//!
//! A restore with the model does not move the queue at once. It points every slot's restore
//! file at the tagged checkpoint, asks each holder to reload it (heartbeats say so), and hands
//! out no task until every holder has (`SlotReloaded`) or its slot changed hands (a new holder
//! restores from the tagged file anyway); only then does the queue go back. So no push of a
//! task dispatched after the restore reaches a model that is about to be replaced, and every
//! task done at the checkpoint is in the model it restores: the model was written after the
//! progress checkpoint was recorded, and trainers report a task only once its pushes were
//! answered. Tasks done after the checkpoint may be in that model and are done again: the
//! data is seen at least once, as the at-least-once restore promises.
//!
//! That holds only for the holder each slot had when the progress checkpoint was taken: a
//! holder that claimed the slot later restored an older file, which may miss tasks done at
//! the checkpoint. So each progress checkpoint records every slot's generation when it was
//! taken and accepts only that holder's tag; a slot that changed hands (or was unheld) before
//! tagging leaves the checkpoint data-only, and `job list` says so.
//!
//! Bounds: the newest [`MODEL_TAGS_KEPT`] progress checkpoints of a job ask for tags, each
//! at most one path of [`CHECKPOINT_PATH_BYTES_MAX`] per slot (`limits.rs` measures the
//! largest group with them).

use std::collections::BTreeMap;

use client::{SlotAsks, SlotReload};
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::pserver_slots::CHECKPOINT_PATH_BYTES_MAX;
use super::pserver_slots::{check_checkpoint_path, CheckpointMeta, PServerSlots};

/// How many of a job's newest progress checkpoints keep pserver checkpoints.
pub const MODEL_TAGS_KEPT: usize = 4;

/// A job's tagged pserver checkpoints and its restore under way.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub(crate) struct ModelCheckpoints {
    /// Progress checkpoint id to the pserver checkpoint each slot took for it.
    pub(crate) tagged: BTreeMap<u64, ProgressTags>,
    /// A restore waiting for holders to reload its model.
    pub(crate) restoring: Option<PendingRestore>,
    /// Restores with the model asked so far: numbers them, so a pserver reloads once each.
    pub(crate) restores_asked: u64,
}

/// The pserver checkpoints of one progress checkpoint.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub(crate) struct ProgressTags {
    /// Each held slot's generation when the progress checkpoint was taken: only that holder's
    /// model surely has every task done by then.
    pub(crate) holders: BTreeMap<u32, u64>,
    /// The checkpoint each slot's holder took for it.
    pub(crate) files: BTreeMap<u32, CheckpointMeta>,
}

impl ProgressTags {
    /// Whether `slot` can still get a tag: its holder then holds it under `generation`
    /// now (`None`: unheld now).
    fn awaits(&self, slot: u32, generation: Option<u64>) -> bool {
        !self.files.contains_key(&slot)
            && generation.is_some_and(|now| self.holders.get(&slot) == Some(&now))
    }

    /// Whether every one of `desired` slots has its tag.
    fn complete(&self, desired: u32) -> bool {
        (0..desired).all(|slot| self.files.contains_key(&slot))
    }
}

/// A restore whose queue goes back once every slot left in `waiting` reloaded.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct PendingRestore {
    /// The progress checkpoint restored.
    pub(crate) checkpoint: u64,
    /// This restore's number (`ModelCheckpoints::restores_asked` when it was asked).
    pub(crate) number: u64,
    /// Slot to the file its holder reloads, for every holder that has not yet.
    pub(crate) waiting: BTreeMap<u32, CheckpointMeta>,
}

impl ModelCheckpoints {
    /// Progress checkpoint `id` asks every slot held now (by `holders`' generations) for a
    /// checkpoint; the oldest beyond [`MODEL_TAGS_KEPT`] stop asking and their tags are
    /// forgotten.
    pub(crate) fn ask(&mut self, id: u64, holders: BTreeMap<u32, u64>) {
        self.tagged.insert(id, ProgressTags { holders, files: BTreeMap::new() });
        while self.tagged.len() > MODEL_TAGS_KEPT {
            self.tagged.pop_first();
        }
    }

    /// Records `meta` as `slot`'s checkpoint for progress checkpoint `id`, taken by the
    /// holder of `generation`. The first tag of a slot stays (a retry repeats it).
    pub(crate) fn tag(
        &mut self,
        slots: &PServerSlots,
        (slot, generation): (u32, u64),
        id: u64,
        meta: &CheckpointMeta,
    ) -> Result<bool, String> {
        check_checkpoint_path(slot, generation, meta)?;
        if !slots.holds(slot, generation) {
            return Ok(false);
        }
        let Some(tags) = self.tagged.get_mut(&id) else {
            let kept: Vec<u64> = self.tagged.keys().copied().collect();
            return Err(format!(
                "progress checkpoint {id} keeps no pserver checkpoints (those of {kept:?} do)"
            ));
        };
        if tags.holders.get(&slot) != Some(&generation) {
            return Err(format!(
                "slot {slot} was not held by generation {generation} when progress checkpoint \
                 {id} was taken: its model may miss tasks done by then (the checkpoint \
                 restores the data only)"
            ));
        }
        tags.files.entry(slot).or_insert_with(|| meta.clone());
        Ok(true)
    }

    /// The tags of progress checkpoint `id` if every one of `desired` slots has one.
    pub(crate) fn complete(
        &self,
        id: u64,
        slots: &PServerSlots,
        desired: u32,
    ) -> Result<Vec<CheckpointMeta>, String> {
        let tags = self.tagged.get(&id);
        let missing: Vec<u32> = (0..desired)
            .filter(|slot| !tags.is_some_and(|tags| tags.files.contains_key(slot)))
            .collect();
        if !missing.is_empty() {
            let orphaned = |tags: &ProgressTags| -> Vec<u32> {
                let generation = |slot: &u32| slots.holders.get(slot).map(|h| h.generation);
                missing
                    .iter()
                    .copied()
                    .filter(|slot| !tags.awaits(*slot, generation(slot)))
                    .collect()
            };
            let why = match tags {
                None => "it keeps no pserver checkpoints (taken before the pservers joined, or \
                         older than the newest few)"
                    .to_string(),
                Some(tags) if !orphaned(tags).is_empty() => format!(
                    "slots {:?} changed hands (or were unheld) before their holders recorded \
                     theirs, so it is data-only",
                    orphaned(tags)
                ),
                Some(_) => format!("slots {missing:?} of {desired} have not recorded theirs"),
            };
            return Err(format!(
                "progress checkpoint {id} cannot restore the model: {why}; restore the data \
                 only (--data-only), or take a new checkpoint"
            ));
        }
        Ok(tags.map(|tags| tags.files.values().cloned().collect()).unwrap_or_default())
    }

    /// Starts restoring progress checkpoint `id` with `files` (one per slot, in slot order):
    /// each slot restores from its file from now on, and each held slot waits for its holder.
    pub(crate) fn start_restore(
        &mut self,
        id: u64,
        files: Vec<CheckpointMeta>,
        slots: &mut PServerSlots,
    ) -> u32 {
        self.restores_asked += 1;
        let mut waiting = BTreeMap::new();
        for (slot, meta) in (0u32..).zip(files) {
            slots.restore_from(slot, meta.clone());
            if slots.holders.contains_key(&slot) {
                waiting.insert(slot, meta);
            }
        }
        let count = waiting.len() as u32;
        self.restoring =
            Some(PendingRestore { checkpoint: id, number: self.restores_asked, waiting });
        count
    }

    /// `slot` no longer waits (its holder reloaded, or it changed hands); the restored
    /// progress checkpoint's id when that was the last one.
    pub(crate) fn slot_done(&mut self, slot: u32) -> Option<u64> {
        let pending = self.restoring.as_mut()?;
        pending.waiting.remove(&slot);
        let id = pending.checkpoint;
        pending.waiting.is_empty().then(|| {
            self.restoring = None;
            id
        })
    }

    /// Whether `slot` waits for its holder to reload (its records are then refused:
    /// they would be of the model the restore replaces).
    pub(crate) fn waits_for(&self, slot: u32) -> bool {
        self.restoring.as_ref().is_some_and(|pending| pending.waiting.contains_key(&slot))
    }

    /// What a heartbeat asks of `slot`'s holder (of `generation`, `None` when unheld).
    pub(crate) fn asks(
        &self,
        slot: u32,
        generation: Option<u64>,
        next_progress_id: u64,
    ) -> SlotAsks {
        let reload = self.restoring.as_ref().and_then(|pending| {
            let from = pending.waiting.get(&slot)?.clone();
            Some(SlotReload { restore: pending.number, from })
        });
        // While a restore is under way, the model is about to change: nothing is tagged.
        let newest = self.tagged.iter().next_back().filter(|_| self.restoring.is_none());
        let tag_for = newest.filter(|(_, tags)| tags.awaits(slot, generation)).map(|(id, _)| *id);
        let tags_from = self.tagged.keys().next().copied().unwrap_or(next_progress_id);
        SlotAsks { tag_for, reload, tags_from }
    }

    /// The newest progress checkpoint every one of `desired` slots has a tag for.
    pub(crate) fn newest_complete(&self, desired: u32) -> Option<u64> {
        self.tagged.iter().rev().find(|(_, tags)| tags.complete(desired)).map(|(id, _)| *id)
    }

    /// Whether progress checkpoint `id` can never restore the model: some slot below
    /// `desired` has no tag and its holder then no longer holds it (or nobody did).
    pub(crate) fn data_only(&self, id: u64, slots: &PServerSlots, desired: u32) -> bool {
        let Some(tags) = self.tagged.get(&id) else { return false };
        let generation = |slot: u32| slots.holders.get(&slot).map(|holder| holder.generation);
        (0..desired)
            .any(|slot| !tags.files.contains_key(&slot) && !tags.awaits(slot, generation(slot)))
    }
}
