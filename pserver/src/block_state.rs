//! `BlockState`: one block's values, its optimizer state vectors and its update count.

use crate::optimizer::{self, OptimizerConfig};

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
        optimizer::apply(optimizer, &mut self.values, &mut self.slots, gradient, self.updates);
    }

    /// Whether the state vectors match the optimizer and the values' length (a restored
    /// block is checked with this).
    pub fn fits(&self, optimizer: &OptimizerConfig, length: usize) -> bool {
        self.values.len() == length
            && self.slots.len() == optimizer.kind.slot_count()
            && self.slots.iter().all(|slot| slot.len() == length)
    }
}
