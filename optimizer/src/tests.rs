//! Each optimizer against values worked out by hand (the arithmetic is in the comments), and
//! the settings it refuses.

use super::*;

fn as_slices(slots: &mut [Vec<f32>]) -> Vec<&mut [f32]> {
    slots.iter_mut().map(Vec::as_mut_slice).collect()
}

/// Runs `gradients` through one block starting at `start`, returning the values after each
/// step.
fn run(
    kind: OptimizerKind,
    learning_rate: f32,
    start: &[f32],
    gradients: &[&[f32]],
) -> Vec<Vec<f32>> {
    let config = OptimizerConfig { learning_rate, kind };
    config.validate().expect("a valid setting");
    let mut values = start.to_vec();
    let mut slots = kind.initial_slots(values.len());
    let mut trace = Vec::new();
    for (update, gradient) in gradients.iter().enumerate() {
        apply(&config, &mut values, &mut as_slices(&mut slots), gradient, update as u64 + 1);
        trace.push(values.clone());
    }
    trace
}

fn check(
    kind: OptimizerKind,
    learning_rate: f32,
    start: &[f32],
    gradients: &[&[f32]],
    want: &[&[f32]],
) {
    let trace = run(kind, learning_rate, start, gradients);
    for (step, (got, want)) in trace.iter().zip(want).enumerate() {
        for (got, want) in got.iter().zip(want.iter()) {
            assert!(
                (got - want).abs() <= 1e-6,
                "{kind:?} step {}: got {got}, want {want}",
                step + 1
            );
        }
    }
}

#[test]
fn sgd_steps_against_the_gradient() {
    // w = [1, -2], g = [0.5, -1], lr 0.1: w - 0.1 g = [0.95, -1.9], then [0.9, -1.8].
    let gradient: &[f32] = &[0.5, -1.0];
    check(
        OptimizerKind::Sgd,
        0.1,
        &[1.0, -2.0],
        &[gradient, gradient],
        &[&[0.95, -1.9], &[0.9, -1.8]],
    );
}

#[test]
fn momentum_accumulates_velocity() {
    // mu 0.9, lr 0.1, w 1, g 1 each step: v = 1, 1.9, 2.71; w = 0.9, 0.71, 0.439.
    let kind = OptimizerKind::Momentum { momentum: 0.9, nesterov: false };
    let one: &[f32] = &[1.0];
    check(kind, 0.1, &[1.0], &[one, one, one], &[&[0.9], &[0.71], &[0.439]]);
}

#[test]
fn nesterov_looks_ahead() {
    // Direction g + mu v: 1.9, 2.71, 3.439; w = 1 - 0.19 = 0.81, 0.81 - 0.271 = 0.539,
    // 0.539 - 0.3439 = 0.1951.
    let kind = OptimizerKind::Momentum { momentum: 0.9, nesterov: true };
    let one: &[f32] = &[1.0];
    check(kind, 0.1, &[1.0], &[one, one, one], &[&[0.81], &[0.539], &[0.1951]]);
}

#[test]
fn adam_corrects_its_bias() {
    // lr 0.1, b1 0.9, b2 0.999, eps 1e-8, w 1. Step 1, g 2: m 0.2, v 0.004, m^ 2, v^ 4,
    // w = 1 - 0.1 * 2 / 2 = 0.9. Step 2, g -1: m 0.08, v 0.004996, m^ = 0.08 / 0.19,
    // v^ = 0.004996 / 0.001999, w = 0.9 - 0.1 * 0.421053 / 1.580902 = 0.873366.
    let first: &[f32] = &[2.0];
    let second: &[f32] = &[-1.0];
    check(OptimizerKind::ADAM_DEFAULT, 0.1, &[1.0], &[first, second], &[&[0.9], &[0.873_366_3]]);
}

#[test]
fn adagrad_steps_against_the_gradient() {
    // lr 0.1, a 0, w 1. g 2: a 4, w = 1 - 0.1 * 2 / 2 = 0.9. g 1: a 5,
    // w = 0.9 - 0.1 / sqrt(5) = 0.855279. A positive gradient lowers w (the Go pserver raised it).
    let first: &[f32] = &[2.0];
    let second: &[f32] = &[1.0];
    check(OptimizerKind::ADAGRAD_DEFAULT, 0.1, &[1.0], &[first, second], &[&[0.9], &[0.855_278_6]]);
    let negative: &[f32] = &[-3.0];
    check(OptimizerKind::ADAGRAD_DEFAULT, 0.1, &[1.0], &[negative], &[&[1.1]]);
}

#[test]
fn every_optimizer_descends_a_quadratic() {
    // f(w) = w^2 / 2 has gradient w: 200 steps from 1 must end near 0 for every rule.
    let kinds = [
        OptimizerKind::Sgd,
        OptimizerKind::MOMENTUM_DEFAULT,
        OptimizerKind::Momentum { momentum: 0.9, nesterov: true },
        OptimizerKind::ADAM_DEFAULT,
        OptimizerKind::ADAGRAD_DEFAULT,
    ];
    for kind in kinds {
        let config = OptimizerConfig { learning_rate: 0.05, kind };
        let mut values = vec![1.0_f32];
        let mut slots = kind.initial_slots(1);
        for update in 1..=200 {
            let gradient = values.clone();
            apply(&config, &mut values, &mut as_slices(&mut slots), &gradient, update);
        }
        assert!(values[0].abs() < 0.3, "{kind:?} ended at {}", values[0]);
    }
}

#[test]
fn settings_that_cannot_train_are_refused() {
    let refused = [
        (OptimizerKind::Sgd, 0.0, "learning_rate"),
        (OptimizerKind::Sgd, f32::NAN, "learning_rate"),
        (OptimizerKind::Sgd, 1.0e4, "learning_rate"),
        (OptimizerKind::Momentum { momentum: 1.0, nesterov: false }, 0.1, "momentum"),
        (OptimizerKind::Adam { beta1: 0.9, beta2: 1.0, epsilon: 1e-8 }, 0.1, "beta2"),
        (OptimizerKind::Adam { beta1: -0.1, beta2: 0.9, epsilon: 1e-8 }, 0.1, "beta1"),
        (OptimizerKind::Adagrad { epsilon: 0.0, initial_accumulator: 0.0 }, 0.1, "epsilon"),
        (
            OptimizerKind::Adagrad { epsilon: 1e-10, initial_accumulator: -1.0 },
            0.1,
            "initial_accumulator",
        ),
    ];
    for (kind, learning_rate, field) in refused {
        let error = OptimizerConfig { learning_rate, kind }.validate().expect_err("refused");
        assert_eq!(error.field, field, "{kind:?} at {learning_rate}");
    }
}
