//! The model evaluation of the highest pass a trainer reported, kept for status.

use serde::{Deserialize, Serialize};

/// An evaluation result. The floats are stored as their bits: the state machine only copies
/// them, and bit equality keeps `JobState: PartialEq` exact even for NaN.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvalRecord {
    /// The pass the model was evaluated after.
    pub pass: u32,
    loss_bits: u32,
    accuracy_bits: u32,
}

impl EvalRecord {
    pub fn new(pass: u32, loss: f32, accuracy: f32) -> Self {
        Self { pass, loss_bits: loss.to_bits(), accuracy_bits: accuracy.to_bits() }
    }

    pub fn loss(&self) -> f32 {
        f32::from_bits(self.loss_bits)
    }

    pub fn accuracy(&self) -> f32 {
        f32::from_bits(self.accuracy_bits)
    }
}
