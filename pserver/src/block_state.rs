//! `BlockState`: one block's values, its optimizer state vectors and its update count.

use crate::f32_bytes;
use crate::optimizer::{self, OptimizerConfig};

/// Gradient elements converted from bytes at a time (16 KiB on the stack).
const APPLY_CHUNK_ELEMENTS: usize = 4096;

/// One block as a pserver holds it; guarded by its own lock inside the shard.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockState {
    pub values: Vec<f32>,
    /// The optimizer's state vectors, each as long as `values`.
    pub slots: Vec<Vec<f32>>,
    /// Gradients applied to this block so far.
    pub updates: u64,
}

impl BlockState {
    /// A block at its initial values with fresh optimizer state.
    pub fn fresh(values: Vec<f32>, optimizer: &OptimizerConfig) -> Self {
        let slots = optimizer.kind.initial_slots(values.len());
        Self { values, slots, updates: 0 }
    }

    /// Applies one gradient of the block's length.
    pub fn apply(&mut self, optimizer: &OptimizerConfig, gradient: &[f32]) {
        self.updates += 1;
        let mut slots: Vec<&mut [f32]> = self.slots.iter_mut().map(Vec::as_mut_slice).collect();
        optimizer::apply(optimizer, &mut self.values, &mut slots, gradient, self.updates);
    }

    /// Applies one gradient given as little-endian bytes (already checked: the block's length,
    /// finite), converting a stack buffer at a time instead of allocating the whole gradient.
    pub fn apply_bytes(&mut self, optimizer: &OptimizerConfig, gradient: &[u8]) {
        assert_eq!(gradient.len(), self.values.len() * 4, "a gradient matches its block");
        self.updates += 1;
        let mut buffer = [0.0_f32; APPLY_CHUNK_ELEMENTS];
        for (chunk, bytes) in gradient.chunks(APPLY_CHUNK_ELEMENTS * 4).enumerate() {
            let start = chunk * APPLY_CHUNK_ELEMENTS;
            let part = &mut buffer[..bytes.len() / 4];
            f32_bytes::decode_into(bytes, part).expect("lengths were checked");
            let end = start + part.len();
            let mut slots: Vec<&mut [f32]> =
                self.slots.iter_mut().map(|slot| &mut slot[start..end]).collect();
            optimizer::apply(
                optimizer,
                &mut self.values[start..end],
                &mut slots,
                part,
                self.updates,
            );
        }
    }

    /// Whether every value and optimizer state element is finite.
    pub fn is_finite(&self) -> bool {
        let finite = |values: &[f32]| values.iter().all(|value| value.is_finite());
        finite(&self.values) && self.slots.iter().all(|slot| finite(slot))
    }

    /// Whether the state vectors match the optimizer and the values' length (a restored
    /// block is checked with this).
    pub fn fits(&self, optimizer: &OptimizerConfig, length: usize) -> bool {
        self.values.len() == length
            && self.slots.len() == optimizer.kind.slot_count()
            && self.slots.iter().all(|slot| slot.len() == length)
    }
}
