//! The optimizers a job may choose, and the per-block state each keeps. Async SGD: a pserver
//! applies each pushed gradient to its block at once, with the block's own update count (Adam's
//! bias correction counts the updates this block has seen).
//!
//! Conventions (PyTorch's, written out so the hand-worked tests can be checked):
//! - SGD: `w -= lr * g`.
//! - Momentum: `v = mu * v + g`; `w -= lr * v`, or with Nesterov `w -= lr * (g + mu * v)`.
//! - Adam: `m = b1 * m + (1 - b1) * g`; `v = b2 * v + (1 - b2) * g^2`;
//!   `w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)`, `t` counting from 1.
//! - Adagrad: `a += g^2`; `w -= lr * g / (sqrt(a) + eps)`: the step goes against the
//!   gradient (PaddlePaddle's Go pserver added it).

mod step;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use step::apply;

/// Learning rates and constants outside these bounds are refused.
pub const LEARNING_RATE_MAX: f32 = 1.0e3;

/// A job's optimizer: its kind, learning rate and constants.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptimizerConfig {
    pub learning_rate: f32,
    pub kind: OptimizerKind,
}

/// The update rule and its constants.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum OptimizerKind {
    Sgd,
    Momentum { momentum: f32, nesterov: bool },
    Adam { beta1: f32, beta2: f32, epsilon: f32 },
    Adagrad { epsilon: f32, initial_accumulator: f32 },
}

/// An optimizer setting that cannot train.
#[derive(Debug, Error, PartialEq)]
#[error("optimizer: {field} = {value} is outside {allowed}")]
pub struct OptimizerError {
    pub field: &'static str,
    pub value: f32,
    pub allowed: &'static str,
}

impl OptimizerKind {
    /// Adam with the constants of its paper.
    pub const ADAM_DEFAULT: Self = Self::Adam { beta1: 0.9, beta2: 0.999, epsilon: 1.0e-8 };
    /// Adagrad as PyTorch defaults it (epsilon 1e-10, accumulator starting at 0).
    pub const ADAGRAD_DEFAULT: Self = Self::Adagrad { epsilon: 1.0e-10, initial_accumulator: 0.0 };
    /// Momentum 0.9, without Nesterov.
    pub const MOMENTUM_DEFAULT: Self = Self::Momentum { momentum: 0.9, nesterov: false };

    /// How many state vectors, each as long as the block, this optimizer keeps per block.
    pub fn slot_count(&self) -> usize {
        match self {
            Self::Sgd => 0,
            Self::Momentum { .. } | Self::Adagrad { .. } => 1,
            Self::Adam { .. } => 2,
        }
    }

    /// The state vectors of a fresh block of `elements` elements.
    pub fn initial_slots(&self, elements: usize) -> Vec<Vec<f32>> {
        match *self {
            Self::Adagrad { initial_accumulator, .. } => vec![vec![initial_accumulator; elements]],
            _ => vec![vec![0.0; elements]; self.slot_count()],
        }
    }
}

impl OptimizerConfig {
    /// Refuses settings that are not finite or leave the ranges their rules need.
    pub fn validate(&self) -> Result<(), OptimizerError> {
        let learning_rate = self.learning_rate;
        check("learning_rate", learning_rate, learning_rate > 0.0, "(0, 1000]")?;
        check("learning_rate", learning_rate, learning_rate <= LEARNING_RATE_MAX, "(0, 1000]")?;
        match self.kind {
            OptimizerKind::Sgd => Ok(()),
            OptimizerKind::Momentum { momentum, .. } => {
                check("momentum", momentum, (0.0..1.0).contains(&momentum), "[0, 1)")
            }
            OptimizerKind::Adam { beta1, beta2, epsilon } => {
                check("beta1", beta1, (0.0..1.0).contains(&beta1), "[0, 1)")?;
                check("beta2", beta2, (0.0..1.0).contains(&beta2), "[0, 1)")?;
                check("epsilon", epsilon, epsilon > 0.0 && epsilon < 1.0, "(0, 1)")
            }
            OptimizerKind::Adagrad { epsilon, initial_accumulator } => {
                check("epsilon", epsilon, epsilon > 0.0 && epsilon < 1.0, "(0, 1)")?;
                let accumulator_ok = initial_accumulator >= 0.0 && initial_accumulator.is_finite();
                check("initial_accumulator", initial_accumulator, accumulator_ok, "[0, inf)")
            }
        }
    }
}

fn check(
    field: &'static str,
    value: f32,
    ok: bool,
    allowed: &'static str,
) -> Result<(), OptimizerError> {
    // NaN fails every comparison above, so it lands here too.
    if ok && value.is_finite() {
        return Ok(());
    }
    Err(OptimizerError { field, value, allowed })
}

#[cfg(test)]
mod tests;
