//! Gradients against central finite differences for every model (dense, and sparse for the
//! one-layer models), hand-checked losses, stability on huge logits, and training that reaches
//! a stated quality (which proves the gradient's sign).

use ndarray::{Array1, Array2};

use super::*;
use crate::batch::{Inputs, SparseRow};

fn config(kind: ModelKind) -> ModelConfig {
    ModelConfig { kind, features: 3, classes: 3, hidden: 4 }
}

fn dense_batch(kind: ModelKind) -> Batch {
    let inputs = Array2::from_shape_vec(
        (4, 3),
        vec![0.5, -1.0, 2.0, 1.5, 0.3, -0.7, -2.0, 1.0, 0.1, 0.0, 0.4, -1.2],
    )
    .expect("shape");
    Batch { inputs: Inputs::Dense(inputs), labels: labels(kind) }
}

fn sparse_batch(kind: ModelKind) -> Batch {
    let rows = vec![
        SparseRow { indices: vec![0, 2], values: vec![0.5, 2.0] },
        SparseRow { indices: vec![1], values: vec![-1.5] },
        SparseRow { indices: vec![0, 1, 2], values: vec![1.0, 1.0, -1.0] },
        SparseRow { indices: vec![], values: vec![] },
    ];
    Batch { inputs: Inputs::Sparse(rows), labels: labels(kind) }
}

fn labels(kind: ModelKind) -> Array1<f32> {
    match kind {
        ModelKind::Linear => Array1::from(vec![1.5, -0.5, 2.0, 0.0]),
        ModelKind::Logistic => Array1::from(vec![1.0, 0.0, 1.0, 0.0]),
        ModelKind::Softmax | ModelKind::Mlp => Array1::from(vec![0.0, 2.0, 1.0, 2.0]),
    }
}

/// Parameters away from zero so every path (ReLU included) is exercised.
fn params(config: &ModelConfig) -> Params {
    let mut params = config.init(11);
    for (offset, values) in params.values_mut().enumerate() {
        for (index, value) in values.iter_mut().enumerate() {
            *value += 0.3 * (((index * 7 + offset * 3) % 11) as f32 / 11.0 - 0.4);
        }
    }
    params
}

/// Every analytic partial derivative within 2% (or 2e-3 absolute) of the central difference.
fn check_gradient(config: ModelConfig, batch: &Batch) {
    let params = params(&config);
    let (_, gradient) = config.loss_and_gradient(&params, batch).expect("gradient");
    for (name, values) in &params {
        for (index, analytic) in gradient[name].iter().enumerate().take(values.len()) {
            let loss_at = |delta: f32| {
                let mut moved = params.clone();
                moved.get_mut(name).expect("named")[index] += delta;
                f64::from(config.loss_and_gradient(&moved, batch).expect("loss").0)
            };
            let step = 1e-2;
            let numeric = (loss_at(step) - loss_at(-step)) / (2.0 * f64::from(step));
            let analytic = f64::from(*analytic);
            let tolerance = 2e-3_f64.max(0.02 * numeric.abs());
            assert!(
                (numeric - analytic).abs() <= tolerance,
                "{:?} {name}[{index}]: analytic {analytic}, numeric {numeric}",
                config.kind
            );
        }
    }
}

#[test]
fn gradients_match_finite_differences() {
    for kind in [ModelKind::Linear, ModelKind::Logistic, ModelKind::Softmax, ModelKind::Mlp] {
        check_gradient(config(kind), &dense_batch(kind));
    }
    for kind in [ModelKind::Linear, ModelKind::Logistic, ModelKind::Softmax] {
        check_gradient(config(kind), &sparse_batch(kind));
    }
}

#[test]
fn losses_are_the_hand_computed_values_and_stay_finite() {
    // Zero parameters: logistic gives ln 2 per example; softmax over 3 classes ln 3; linear
    // 0.5 * mean(y^2) = 0.5 * (2.25 + 0.25 + 4 + 0) / 4 = 0.8125.
    let zero = |config: &ModelConfig| {
        config
            .init(1)
            .into_iter()
            .map(|(name, values)| (name, vec![0.0; values.len()]))
            .collect::<Params>()
    };
    let loss = |kind| {
        let config = config(kind);
        config.loss_and_gradient(&zero(&config), &dense_batch(kind)).expect("loss").0
    };
    assert!((loss(ModelKind::Logistic) - std::f32::consts::LN_2).abs() < 1e-6);
    assert!((loss(ModelKind::Softmax) - 3.0_f32.ln()).abs() < 1e-6);
    assert!((loss(ModelKind::Linear) - 0.8125).abs() < 1e-6);
    for kind in [ModelKind::Logistic, ModelKind::Softmax] {
        let config = config(kind);
        let mut huge = zero(&config);
        huge.get_mut(&format!("{}.weight", kind.name()))
            .expect("weight")
            .iter_mut()
            .for_each(|w| *w = 100.0);
        let (loss, gradient) = config.loss_and_gradient(&huge, &dense_batch(kind)).expect("loss");
        assert!(
            loss.is_finite() && gradient.values().flatten().all(|g| g.is_finite()),
            "{kind:?}: {loss}"
        );
    }
}

/// Two well separated blobs per class in 3 features.
fn blobs(kind: ModelKind, count: usize) -> Batch {
    let classes = if kind == ModelKind::Logistic { 2 } else { 3 };
    let mut rng = SplitMix(5);
    let mut values = Vec::new();
    let mut labels = Vec::new();
    for index in 0..count {
        let class = index % classes;
        for feature in 0..3 {
            let center = if feature == class { 3.0 } else { -1.0 };
            values.push(center + (rng.unit() as f32 - 0.5));
        }
        labels.push(class as f32);
    }
    Batch {
        inputs: Inputs::Dense(Array2::from_shape_vec((count, 3), values).expect("shape")),
        labels: Array1::from(labels),
    }
}

#[test]
fn sgd_on_these_gradients_learns() {
    for kind in [ModelKind::Logistic, ModelKind::Softmax, ModelKind::Mlp] {
        let config = config(kind);
        let batch = blobs(kind, 120);
        let mut params = config.init(3);
        for _ in 0..300 {
            let (_, gradient) = config.loss_and_gradient(&params, &batch).expect("gradient");
            for (name, values) in params.iter_mut() {
                values.iter_mut().zip(&gradient[name]).for_each(|(value, g)| *value -= 0.1 * g);
            }
        }
        let accuracy =
            config.evaluate(&params, &batch).expect("eval").accuracy().expect("classifier");
        assert!(accuracy >= 0.95, "{kind:?}: {accuracy}");
    }
    // Linear regression recovers y = 2 x0 - x1 + 0.5 x2 + 1.
    let config = config(ModelKind::Linear);
    let mut batch = blobs(ModelKind::Softmax, 120);
    let Inputs::Dense(inputs) = &batch.inputs else { unreachable!("dense") };
    batch.labels =
        inputs.rows().into_iter().map(|x| 2.0 * x[0] - x[1] + 0.5 * x[2] + 1.0).collect();
    let mut params = config.init(3);
    for _ in 0..2000 {
        let (_, gradient) = config.loss_and_gradient(&params, &batch).expect("gradient");
        for (name, values) in params.iter_mut() {
            values.iter_mut().zip(&gradient[name]).for_each(|(value, g)| *value -= 0.05 * g);
        }
    }
    let weight = &params["linear.weight"];
    assert!(
        (weight[0] - 2.0).abs() < 0.05
            && (weight[1] + 1.0).abs() < 0.05
            && (weight[2] - 0.5).abs() < 0.05,
        "{weight:?}"
    );
    assert!((params["linear.bias"][0] - 1.0).abs() < 0.05, "{:?}", params["linear.bias"]);
}

#[test]
fn the_mlp_learns_xor_which_no_linear_model_can() {
    // Four points, labels x0 XOR x1: a one-layer model cannot exceed 75% accuracy.
    let inputs = Array2::from_shape_vec((4, 2), vec![0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0])
        .expect("shape");
    let batch =
        Batch { inputs: Inputs::Dense(inputs), labels: Array1::from(vec![0.0, 1.0, 1.0, 0.0]) };
    let accuracy_after = |kind: ModelKind, steps: usize| {
        let config = ModelConfig { kind, features: 2, classes: 2, hidden: 8 };
        let mut params = config.init(7);
        for _ in 0..steps {
            let (_, gradient) = config.loss_and_gradient(&params, &batch).expect("gradient");
            for (name, values) in params.iter_mut() {
                values.iter_mut().zip(&gradient[name]).for_each(|(value, g)| *value -= 0.5 * g);
            }
        }
        config.evaluate(&params, &batch).expect("eval").accuracy().expect("a classifier")
    };
    assert_eq!(accuracy_after(ModelKind::Mlp, 2000), 1.0);
    assert!(accuracy_after(ModelKind::Softmax, 2000) <= 0.75);
}

/// Parameters that do not fit the model, and sparse features for the MLP, are refused for
/// their own reason (the message names the tensor and both sizes); a bad size or kind names
/// the flag.
#[test]
fn wrong_parameters_and_inputs_are_refused_for_their_reason() {
    let softmax = config(ModelKind::Softmax);
    let mut missing = params(&softmax);
    missing.remove("softmax.bias");
    let mut short = params(&softmax);
    short.insert("softmax.weight".to_string(), vec![0.0; 8]);
    let mut long = params(&softmax);
    long.insert("softmax.bias".to_string(), vec![0.0; 4]);
    let mlp = config(ModelKind::Mlp);
    let rows: [(&ModelConfig, &Params, Batch, ModelError); 4] = [
        (
            &softmax,
            &missing,
            dense_batch(ModelKind::Softmax),
            ModelError::MissingParameter { name: "softmax.bias".to_string() },
        ),
        (
            &softmax,
            &short,
            dense_batch(ModelKind::Softmax),
            ModelError::MatrixShape {
                name: "softmax.weight".into(),
                values: 8,
                rows: 3,
                columns: 3,
            },
        ),
        (
            &softmax,
            &long,
            dense_batch(ModelKind::Softmax),
            ModelError::VectorLength { name: "softmax.bias".into(), values: 4, length: 3 },
        ),
        (&mlp, &params(&mlp), sparse_batch(ModelKind::Mlp), ModelError::SparseInputs),
    ];
    for (model, params, batch, error) in rows {
        assert_eq!(model.loss_and_gradient(params, &batch), Err(error.clone()), "{error}");
        assert_eq!(model.evaluate(params, &batch), Err(error));
    }
    let short_error = softmax.evaluate(&short, &dense_batch(ModelKind::Softmax));
    let message = short_error.expect_err("8 values are not 3 x 3").to_string();
    assert_eq!(message, "parameter softmax.weight has 8 values, not 3 x 3");

    let no_classes = ModelConfig { classes: 1, ..softmax };
    assert_eq!(no_classes.validate(), Err(ModelConfigError::Classes { classes: 1 }));
    let unknown = "xyz".parse::<ModelKind>();
    assert_eq!(unknown, Err(ModelConfigError::UnknownKind { name: "xyz".to_string() }));
}
