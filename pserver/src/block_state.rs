//! `BlockState`: one block's values, its optimizer state vectors and its update count.

use crate::f32_bytes::PayloadError;
use crate::optimizer::{self, OptimizerConfig};
use crate::payload::{Payload, VISIT_CHUNK_ELEMENTS};

/// Why a gradient may not be applied to a block.
#[derive(Debug, PartialEq)]
pub enum UpdateRefusal {
    /// The gradient itself holds NaN or an infinity.
    Gradient(PayloadError),
    /// Finite, but the result (a value or optimizer state) would not be.
    Result,
}

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

    /// Applies one gradient given as little-endian bytes (already checked by
    /// [`BlockState::check_update`]), decoding a stack buffer at a time from wherever the
    /// bytes are (a push is applied straight from the frames it arrived in).
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

    /// Whether [`BlockState::apply_payload`] may apply `gradient`: every element finite, and
    /// every value and state element it would leave finite. Nothing changes: each stretch of
    /// the update is computed on a copy of the stretch and dropped, so a refused push needs no
    /// copy of the block to fall back on. `apply_payload` then computes the same numbers (the
    /// same operations on the same inputs in the same stretches).
    pub fn check_update(
        &self,
        optimizer: &OptimizerConfig,
        gradient: &impl Payload,
    ) -> Result<(), UpdateRefusal> {
        assert_eq!(gradient.byte_len(), self.values.len() * 4, "a gradient matches its block");
        let mut buffer = [0.0_f32; VISIT_CHUNK_ELEMENTS];
        let mut values = [0.0_f32; VISIT_CHUNK_ELEMENTS];
        let mut slots = vec![[0.0_f32; VISIT_CHUNK_ELEMENTS]; self.slots.len()];
        let mut reader = gradient.reader();
        let mut start = 0;
        loop {
            let read = reader.read(&mut buffer);
            if read == 0 {
                return Ok(());
            }
            let (end, part) = (start + read, &buffer[..read]);
            if let Some(offset) = part.iter().position(|value| !value.is_finite()) {
                let error =
                    PayloadError::NotFinite { element: start + offset, value: part[offset] };
                return Err(UpdateRefusal::Gradient(error));
            }
            values[..read].copy_from_slice(&self.values[start..end]);
            for (copy, slot) in slots.iter_mut().zip(&self.slots) {
                copy[..read].copy_from_slice(&slot[start..end]);
            }
            let mut views: Vec<&mut [f32]> =
                slots.iter_mut().map(|copy| &mut copy[..read]).collect();
            optimizer::apply(optimizer, &mut values[..read], &mut views, part, self.updates + 1);
            let finite = |values: &[f32]| values.iter().all(|value| value.is_finite());
            if !finite(&values[..read]) || !views.iter().all(|view| finite(view)) {
                return Err(UpdateRefusal::Result);
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::f32_bytes;
    use crate::optimizer::OptimizerKind;
    use bytes::Bytes;
    use platform::unary::Segments;

    /// For every optimizer, over several stretches and a payload cut mid-value: the check
    /// passes a finite update, which the payload path then applies exactly as the plain one
    /// does; a gradient that overflows a value, or holds NaN, is refused and changes nothing.
    #[test]
    fn the_check_agrees_with_the_apply() {
        let kinds = [
            OptimizerKind::Sgd,
            OptimizerKind::MOMENTUM_DEFAULT,
            OptimizerKind::ADAM_DEFAULT,
            OptimizerKind::ADAGRAD_DEFAULT,
        ];
        let length = 2 * VISIT_CHUNK_ELEMENTS + 17;
        let gradient: Vec<f32> = (0..length).map(|i| (i % 13) as f32 * 0.25 - 1.5).collect();
        let encoded = Bytes::from(f32_bytes::encode(&gradient));
        let mut pieces = Segments::from(encoded.slice(..4097 * 4 + 2));
        pieces.push(encoded.slice(4097 * 4 + 2..));
        for kind in kinds {
            let optimizer = OptimizerConfig { learning_rate: 0.1, kind };
            let block =
                BlockState::fresh((0..length).map(|i| i as f32 * 0.01).collect(), &optimizer);
            assert_eq!(block.check_update(&optimizer, &pieces), Ok(()), "{kind:?}");
            let (mut plain, mut from_payload) = (block.clone(), block.clone());
            plain.apply(&optimizer, &gradient);
            from_payload.apply_payload(&optimizer, &pieces);
            assert_eq!(from_payload, plain, "{kind:?}");
        }
        let optimizer = OptimizerConfig { learning_rate: 1.0, kind: OptimizerKind::Sgd };
        let block = BlockState::fresh(vec![-3.0e38; 3], &optimizer);
        let overflow = f32_bytes::encode(&[0.0, 3.0e38, 0.0]);
        assert_eq!(
            block.check_update(&optimizer, &overflow.as_slice()),
            Err(UpdateRefusal::Result)
        );
        let nan = f32_bytes::encode(&[0.0, 0.0, f32::NAN]);
        let refusal = block.check_update(&optimizer, &nan.as_slice()).expect_err("refused");
        assert!(matches!(
            refusal,
            UpdateRefusal::Gradient(PayloadError::NotFinite { element: 2, .. })
        ));
        assert_eq!(block, BlockState::fresh(vec![-3.0e38; 3], &optimizer), "unchanged");
    }
}
