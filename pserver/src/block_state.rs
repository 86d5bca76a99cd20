//! `BlockState`: one block's values, its optimizer state vectors and its update count.

use crate::optimizer::{self, OptimizerConfig};
use crate::payload::{Payload, VISIT_CHUNK_ELEMENTS};

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
    /// finite), decoding a stack buffer at a time from wherever the bytes are (a push is
    /// applied straight from the frames it arrived in) instead of allocating the gradient.
    pub fn apply_payload(&mut self, optimizer: &OptimizerConfig, gradient: &impl Payload) {
        assert_eq!(gradient.byte_len(), self.values.len() * 4, "a gradient matches its block");
        self.updates += 1;
        let mut buffer = [0.0_f32; VISIT_CHUNK_ELEMENTS];
        let mut reader = gradient.reader();
        let mut start = 0;
        loop {
            let read = reader.read(&mut buffer);
            if read == 0 {
                break;
            }
            let end = start + read;
            let mut slots: Vec<&mut [f32]> =
                self.slots.iter_mut().map(|slot| &mut slot[start..end]).collect();
            let part = &buffer[..read];
            optimizer::apply(
                optimizer,
                &mut self.values[start..end],
                &mut slots,
                part,
                self.updates,
            );
            start = end;
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
