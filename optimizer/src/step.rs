//! One optimizer step on one block: pure arithmetic over slices, no allocation.

use super::{OptimizerConfig, OptimizerKind};

/// Applies `gradient` to `values` with the block's state vectors `slots` (as many as
/// [`OptimizerKind::slot_count`]); `update` is the block's update count including this one
/// (1 for the first), for Adam's bias correction.
pub fn apply(
    config: &OptimizerConfig,
    values: &mut [f32],
    slots: &mut [&mut [f32]],
    gradient: &[f32],
    update: u64,
) {
    assert_eq!(values.len(), gradient.len(), "a gradient matches its block");
    assert!(slots.iter().all(|slot| slot.len() == values.len()), "state vectors match the block");
    assert_eq!(slots.len(), config.kind.slot_count(), "one state vector per optimizer slot");
    assert!(update >= 1, "updates count from 1");
    let rate = config.learning_rate;
    match (config.kind, slots) {
        (OptimizerKind::Sgd, []) => sgd(rate, values, gradient),
        (OptimizerKind::Momentum { momentum, nesterov }, [velocity]) => {
            heavy_ball(rate, momentum, nesterov, values, velocity, gradient)
        }
        (OptimizerKind::Adam { beta1, beta2, epsilon }, [first, second]) => {
            let constants = AdamStep::new(rate, beta1, beta2, epsilon, update);
            constants.apply(values, first, second, gradient)
        }
        (OptimizerKind::Adagrad { epsilon, .. }, [accumulator]) => {
            adagrad(rate, epsilon, values, accumulator, gradient)
        }
        _ => unreachable!("the slot count was asserted above"),
    }
}

fn sgd(rate: f32, values: &mut [f32], gradient: &[f32]) {
    for (value, grad) in values.iter_mut().zip(gradient) {
        *value -= rate * grad;
    }
}

fn heavy_ball(
    rate: f32,
    momentum: f32,
    nesterov: bool,
    values: &mut [f32],
    velocity: &mut [f32],
    gradient: &[f32],
) {
    for ((value, speed), grad) in values.iter_mut().zip(velocity.iter_mut()).zip(gradient) {
        *speed = momentum * *speed + grad;
        let direction = if nesterov { grad + momentum * *speed } else { *speed };
        *value -= rate * direction;
    }
}

fn adagrad(rate: f32, epsilon: f32, values: &mut [f32], accumulator: &mut [f32], gradient: &[f32]) {
    for ((value, sum), grad) in values.iter_mut().zip(accumulator.iter_mut()).zip(gradient) {
        *sum += grad * grad;
        *value -= rate * grad / (sum.sqrt() + epsilon);
    }
}

/// Adam's constants for one update, bias corrections computed once per block in f64.
struct AdamStep {
    rate: f32,
    beta1: f32,
    beta2: f32,
    epsilon: f32,
    first_correction: f32,
    second_correction: f32,
}

impl AdamStep {
    fn new(rate: f32, beta1: f32, beta2: f32, epsilon: f32, update: u64) -> Self {
        // powi takes an i32; past 2^31 updates the powers are 0 to f64 precision anyway.
        let exponent = i32::try_from(update).unwrap_or(i32::MAX);
        let first_correction = (1.0 - f64::from(beta1).powi(exponent)) as f32;
        let second_correction = (1.0 - f64::from(beta2).powi(exponent)) as f32;
        Self { rate, beta1, beta2, epsilon, first_correction, second_correction }
    }

    fn apply(&self, values: &mut [f32], first: &mut [f32], second: &mut [f32], gradient: &[f32]) {
        let moments = first.iter_mut().zip(second.iter_mut());
        for ((value, (mean, square)), grad) in values.iter_mut().zip(moments).zip(gradient) {
            *mean = self.beta1 * *mean + (1.0 - self.beta1) * grad;
            *square = self.beta2 * *square + (1.0 - self.beta2) * grad * grad;
            let mean_hat = *mean / self.first_correction;
            let square_hat = *square / self.second_correction;
            *value -= self.rate * mean_hat / (square_hat.sqrt() + self.epsilon);
        }
    }
}
