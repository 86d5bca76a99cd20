//! `Shard`: the blocks one slot serves, once initialized or restored. Each block has its own
//! lock, so pushes to different blocks run in parallel and a pull copies each block whole
//! (never half an update). A push is checked completely before any block changes.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::block_state::{BlockState, UpdateRefusal};
use crate::f32_bytes::PayloadError;
use crate::layout::JobLayout;
use crate::payload::{self, Payload};
use crate::placement::{slot_of, BlockId};
use crate::shard_error::ShardError;

/// A serving shard: the layout, this slot's blocks and the counters.
#[derive(Debug)]
pub struct Shard {
    layout: JobLayout,
    blocks: BTreeMap<BlockId, Mutex<BlockState>>,
    step: AtomicU64,
    nonfinite_refused: AtomicU64,
    /// The job's model restore these values come from (0: none yet): a push computed on
    /// values of another restore is refused.
    model_restore: u64,
    /// The elements of this slot's blocks, counted once: `Status` is polled often and must
    /// not walk the layout (0.25 s at 2^20 blocks).
    element_count: u64,
}

impl Shard {
    /// A shard from blocks that must be exactly the ones `layout` assigns to `slot`.
    pub fn new(
        layout: JobLayout,
        slot: u32,
        step: u64,
        blocks: BTreeMap<BlockId, BlockState>,
    ) -> Result<Self, ShardError> {
        let expected = layout.blocks_of_slot(slot);
        if let Some((id, _)) = expected.iter().find(|(id, _)| !blocks.contains_key(*id)) {
            return Err(ShardError::MissingBlock {
                id: id.clone(),
                missing: expected.len() - blocks.len().min(expected.len()),
            });
        }
        for (id, block) in &blocks {
            let Some(&length) = expected.get(id) else {
                return Err(ShardError::NotOwned { id: id.clone(), slot });
            };
            if !block.fits(&layout.optimizer, length) {
                return Err(ShardError::BlockShape { id: id.clone(), want: length });
            }
        }
        let element_count = expected.values().map(|&length| length as u64).sum();
        let blocks = blocks.into_iter().map(|(id, block)| (id, Mutex::new(block))).collect();
        let step = AtomicU64::new(step);
        let nonfinite_refused = AtomicU64::new(0);
        Ok(Self { layout, blocks, step, nonfinite_refused, model_restore: 0, element_count })
    }

    /// This shard as of the job's model restore `model_restore`.
    pub fn of_model_restore(mut self, model_restore: u64) -> Self {
        self.model_restore = model_restore;
        self
    }

    /// The job's model restore these values come from.
    pub fn model_restore(&self) -> u64 {
        self.model_restore
    }

    /// Refuses a push computed on values of another model restore than this shard's
    /// (`basis`; `None`: not known, taken as is).
    pub fn check_basis(&self, basis: Option<u64>) -> Result<(), ShardError> {
        if crate::planted::active("push-across-restore") {
            return Ok(());
        }
        match basis {
            Some(basis) if basis != self.model_restore => {
                Err(ShardError::ModelRestored { basis, shard: self.model_restore })
            }
            _ => Ok(()),
        }
    }

    pub fn layout(&self) -> &JobLayout {
        &self.layout
    }

    /// Gradients applied in all (pushes, not blocks).
    pub fn step(&self) -> u64 {
        self.step.load(Ordering::SeqCst)
    }

    /// Moves the step up to at least `step` (never down): a master already recorded a
    /// checkpoint of this slot at a step this shard has not reached (one whose answer was
    /// lost, or a predecessor's), and the next checkpoint must be newer and named anew.
    pub fn adopt_step(&self, step: u64) {
        self.step.fetch_max(step, Ordering::SeqCst);
    }

    pub fn nonfinite_refused(&self) -> u64 {
        self.nonfinite_refused.load(Ordering::SeqCst)
    }

    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// O(1): counted when the shard was made.
    pub fn element_count(&self) -> u64 {
        self.element_count
    }

    /// Applies one push, all or nothing: every block is checked first (known, served here,
    /// the right length, named once); then the push's blocks are locked in (name, index)
    /// order (so concurrent pushes cannot deadlock), each gradient is checked finite and so is
    /// the result it would leave (finite gradients can still overflow a parameter to
    /// infinity), and only if every block passes is any applied.
    pub fn push<P: Payload>(&self, gradients: &[(BlockId, P)]) -> Result<u64, ShardError> {
        let refused = |error: ShardError| {
            let nonfinite = matches!(
                error,
                ShardError::Payload { error: PayloadError::NotFinite { .. }, .. }
                    | ShardError::NotFiniteResult { .. }
            );
            if nonfinite {
                self.nonfinite_refused.fetch_add(1, Ordering::SeqCst);
            }
            error
        };
        let mut checked = self.check_all(gradients).map_err(refused)?;
        checked.sort_by(|left, right| left.0.cmp(right.0));
        let mut locked: Vec<_> = checked.iter().map(|(id, _)| lock(&self.blocks[*id])).collect();
        let optimizer = &self.layout.optimizer;
        for ((id, gradient), block) in checked.iter().zip(&locked) {
            block.check_update(optimizer, *gradient).map_err(|refusal| {
                let id = (*id).clone();
                refused(match refusal {
                    UpdateRefusal::Gradient(error) => ShardError::Payload { id, error },
                    UpdateRefusal::Result => ShardError::NotFiniteResult { id },
                })
            })?;
        }
        for ((_, gradient), block) in checked.iter().zip(locked.iter_mut()) {
            block.apply_payload(optimizer, *gradient);
            debug_assert!(block.is_finite(), "the checked update left the block finite");
        }
        Ok(self.step.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// Copies of the asked blocks (all of this slot's when `ids` is empty), each taken whole
    /// under its lock.
    pub fn pull(&self, ids: &[BlockId]) -> Result<Vec<(BlockId, Vec<f32>)>, ShardError> {
        self.pull_with(ids, <[f32]>::to_vec)
    }

    /// Like [`Shard::pull`], each block's copy made by `copy` under its lock (the service
    /// encodes straight into the reply's bytes: one copy, not two).
    pub fn pull_with<T>(
        &self,
        ids: &[BlockId],
        copy: impl Fn(&[f32]) -> T,
    ) -> Result<Vec<(BlockId, T)>, ShardError> {
        if ids.is_empty() {
            let copies =
                self.blocks.iter().map(|(id, block)| (id.clone(), copy(&lock(block).values)));
            return Ok(copies.collect());
        }
        let mut copies = Vec::with_capacity(ids.len());
        for id in ids {
            let block = self.served(id)?;
            copies.push((id.clone(), copy(&lock(block).values)));
        }
        Ok(copies)
    }

    /// The payload bytes a pull of `ids` (all blocks when empty) would return, computed from
    /// the layout before anything is copied.
    pub fn pull_bytes(&self, ids: &[BlockId]) -> Result<usize, ShardError> {
        let layout_bytes =
            |id: &BlockId| self.layout.block_length(id).map_or(0, |length| length * 4);
        if ids.is_empty() {
            return Ok(self.blocks.keys().map(layout_bytes).sum());
        }
        let mut bytes = 0;
        for id in ids {
            self.served(id)?;
            bytes += layout_bytes(id);
        }
        Ok(bytes)
    }

    /// Calls `visit` with a consistent copy of each block in (name, index) order; for
    /// checkpoints, which must not hold a block's lock while writing to disk.
    pub fn visit_blocks<E>(
        &self,
        mut visit: impl FnMut(&BlockId, BlockState) -> Result<(), E>,
    ) -> Result<(), E> {
        for (id, block) in &self.blocks {
            let copy = lock(block).clone();
            visit(id, copy)?;
        }
        Ok(())
    }

    /// Checks every block of a push (served here, the right length, named once) without
    /// reading its values: those are checked under the blocks' locks, with the update.
    fn check_all<'a, P: Payload>(
        &self,
        gradients: &'a [(BlockId, P)],
    ) -> Result<Vec<(&'a BlockId, &'a P)>, ShardError> {
        let mut seen = HashSet::with_capacity(gradients.len());
        let mut checked = Vec::with_capacity(gradients.len());
        for (id, bytes) in gradients {
            let length = lock(self.served(id)?).values.len();
            if !seen.insert(id) {
                return Err(ShardError::DuplicateBlock { id: id.clone() });
            }
            payload::check_length(bytes, length)
                .map_err(|error| ShardError::Payload { id: id.clone(), error })?;
            checked.push((id, bytes));
        }
        Ok(checked)
    }

    fn served(&self, id: &BlockId) -> Result<&Mutex<BlockState>, ShardError> {
        if let Some(block) = self.blocks.get(id) {
            return Ok(block);
        }
        match self.layout.block_length(id) {
            None => Err(ShardError::UnknownBlock { id: id.clone() }),
            Some(_) => Err(ShardError::NotOwned {
                id: id.clone(),
                slot: slot_of(&id.name, id.index, self.layout.slot_count),
            }),
        }
    }
}

/// A block's lock; a panic while holding it cannot leave a half-applied update behind
/// (updates are plain arithmetic on owned memory), so a poisoned lock is taken over.
fn lock(block: &Mutex<BlockState>) -> MutexGuard<'_, BlockState> {
    block.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{ParamSpec, SLOT_WALKS};
    use crate::optimizer::{OptimizerConfig, OptimizerKind};

    /// `Status`'s counters (blocks, elements) are kept, not recomputed: reading them walks
    /// the layout's blocks zero times, however often they are polled.
    #[test]
    fn status_counters_do_not_walk_the_layout() {
        let params = vec![ParamSpec { name: "w".into(), shape: vec![1_000] }];
        let optimizer = OptimizerConfig { learning_rate: 0.1, kind: OptimizerKind::Sgd };
        let layout = JobLayout { params, block_elements: 3, slot_count: 2, optimizer };
        let blocks: BTreeMap<BlockId, BlockState> = layout
            .blocks_of_slot(1)
            .into_iter()
            .map(|(id, length)| (id, BlockState::fresh(vec![0.5; length], &optimizer)))
            .collect();
        let expected: u64 = layout.blocks_of_slot(1).values().map(|&length| length as u64).sum();
        let shard = Shard::new(layout, 1, 0, blocks).expect("a valid shard");
        SLOT_WALKS.with(|walks| walks.set(0));
        for _ in 0..8 {
            assert_eq!(shard.element_count(), expected);
            assert!(shard.block_count() > 0);
        }
        assert_eq!(SLOT_WALKS.with(|walks| walks.get()), 0, "a status read walked the layout");
    }
}
