//! The MLP: `relu(x . W1 + b1) . W2 + b2`, softmax cross-entropy on top. Dense inputs only.

use ndarray::Array2;

use super::model_error::ModelError;
use super::{affine, flat, heads, matrix, vector, ModelConfig, Params};
use crate::batch::{Batch, Inputs};

struct Forward {
    /// Pre-activations of the hidden layer, `[examples, hidden]`.
    hidden_in: Array2<f32>,
    hidden_out: Array2<f32>,
    head: heads::Head,
}

fn forward(config: &ModelConfig, params: &Params, batch: &Batch) -> Result<Forward, ModelError> {
    if matches!(batch.inputs, Inputs::Sparse(_)) {
        return Err(ModelError::SparseInputs);
    }
    let w1 = matrix(params, "mlp.w1", config.features, config.hidden)?;
    let b1 = vector(params, "mlp.b1", config.hidden)?;
    let w2 = matrix(params, "mlp.w2", config.hidden, config.classes)?;
    let b2 = vector(params, "mlp.b2", config.classes)?;
    let hidden_in = affine::forward(&batch.inputs, w1, b1);
    let hidden_out = hidden_in.mapv(|z| z.max(0.0));
    let logits = hidden_out.dot(&w2) + b2;
    let head = heads::head(config.kind, logits.view(), batch.labels.view());
    Ok(Forward { hidden_in, hidden_out, head })
}

pub fn loss_and_gradient(
    config: &ModelConfig,
    params: &Params,
    batch: &Batch,
) -> Result<(f32, Params), ModelError> {
    let pass = forward(config, params, batch)?;
    let w2 = matrix(params, "mlp.w2", config.hidden, config.classes)?;
    let (w2_gradient, b2_gradient) =
        affine::backward(&Inputs::Dense(pass.hidden_out), pass.head.gradient.view(), config.hidden);
    let mut hidden_gradient = pass.head.gradient.dot(&w2.t());
    hidden_gradient.zip_mut_with(&pass.hidden_in, |gradient, &z| {
        if z <= 0.0 {
            *gradient = 0.0;
        }
    });
    let (w1_gradient, b1_gradient) =
        affine::backward(&batch.inputs, hidden_gradient.view(), config.features);
    let gradients = Params::from([
        ("mlp.w1".to_string(), flat(w1_gradient)),
        ("mlp.b1".to_string(), b1_gradient.to_vec()),
        ("mlp.w2".to_string(), flat(w2_gradient)),
        ("mlp.b2".to_string(), b2_gradient.to_vec()),
    ]);
    Ok((pass.head.loss, gradients))
}

pub fn evaluate(
    config: &ModelConfig,
    params: &Params,
    batch: &Batch,
) -> Result<(f32, Option<u64>), ModelError> {
    let pass = forward(config, params, batch)?;
    Ok((pass.head.loss, pass.head.correct))
}
