//! The models: linear regression (squared error), logistic regression, softmax regression and an
//! MLP with one ReLU hidden layer, on ndarray with analytic gradients and numerically stable
//! losses. Parameters are named flat f32 tensors (what pservers store), row-major.

mod affine;
mod heads;
mod mlp;
pub mod model_error;

use std::collections::BTreeMap;
use std::str::FromStr;

use ndarray::{ArrayView1, ArrayView2};

use crate::batch::Batch;
use model_error::{ModelConfigError, ModelError};

/// Parameter name -> flat row-major values.
pub type Params = BTreeMap<String, Vec<f32>>;

pub const HIDDEN_MAX: usize = 65_536;
pub const FEATURES_MAX: usize = 1 << 24;
pub const CLASSES_MAX: usize = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    Linear,
    Logistic,
    Softmax,
    Mlp,
}

impl FromStr for ModelKind {
    type Err = ModelConfigError;

    fn from_str(text: &str) -> Result<Self, ModelConfigError> {
        match text {
            "linear" => Ok(Self::Linear),
            "logistic" => Ok(Self::Logistic),
            "softmax" => Ok(Self::Softmax),
            "mlp" => Ok(Self::Mlp),
            other => Err(ModelConfigError::UnknownKind { name: other.to_string() }),
        }
    }
}

impl ModelKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Linear => "linear",
            Self::Logistic => "logistic",
            Self::Softmax => "softmax",
            Self::Mlp => "mlp",
        }
    }

    /// Whether accuracy means anything (classification).
    pub fn classifies(self) -> bool {
        self != Self::Linear
    }
}

/// A model's kind and sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelConfig {
    pub kind: ModelKind,
    pub features: usize,
    pub classes: usize,
    pub hidden: usize,
}

/// Loss and accuracy over some examples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    pub loss: f64,
    /// Correct predictions out of `examples` (classification only).
    pub correct: Option<u64>,
    pub examples: u64,
}

impl Evaluation {
    pub fn accuracy(&self) -> Option<f64> {
        self.correct.map(|correct| correct as f64 / self.examples.max(1) as f64)
    }

    /// Sums two evaluations (loss weighted by examples).
    pub fn merge(self, other: Evaluation) -> Evaluation {
        let examples = self.examples + other.examples;
        let loss = (self.loss * self.examples as f64 + other.loss * other.examples as f64)
            / examples.max(1) as f64;
        let correct =
            self.correct.zip(other.correct).map(|(a, b)| a + b).or(self.correct).or(other.correct);
        Evaluation { loss, correct, examples }
    }
}

impl ModelConfig {
    /// Refuses sizes a model cannot have, naming the flag.
    pub fn validate(&self) -> Result<(), ModelConfigError> {
        if !(1..=FEATURES_MAX).contains(&self.features) {
            return Err(ModelConfigError::Features { features: self.features });
        }
        if matches!(self.kind, ModelKind::Softmax | ModelKind::Mlp)
            && !(2..=CLASSES_MAX).contains(&self.classes)
        {
            return Err(ModelConfigError::Classes { classes: self.classes });
        }
        if self.kind == ModelKind::Mlp && !(1..=HIDDEN_MAX).contains(&self.hidden) {
            return Err(ModelConfigError::Hidden { hidden: self.hidden });
        }
        Ok(())
    }

    /// Outputs of the last layer: 1 for linear and logistic, `classes` otherwise.
    fn outputs(&self) -> usize {
        match self.kind {
            ModelKind::Linear | ModelKind::Logistic => 1,
            ModelKind::Softmax | ModelKind::Mlp => self.classes,
        }
    }

    /// Every parameter's name and shape, in a fixed order.
    pub fn param_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let name = |part: &str| format!("{}.{part}", self.kind.name());
        match self.kind {
            ModelKind::Linear | ModelKind::Logistic => {
                vec![(name("weight"), vec![self.features]), (name("bias"), vec![1])]
            }
            ModelKind::Softmax => vec![
                (name("weight"), vec![self.features, self.classes]),
                (name("bias"), vec![self.classes]),
            ],
            ModelKind::Mlp => vec![
                (name("w1"), vec![self.features, self.hidden]),
                (name("b1"), vec![self.hidden]),
                (name("w2"), vec![self.hidden, self.classes]),
                (name("b2"), vec![self.classes]),
            ],
        }
    }

    /// Initial parameters, the same for a seed on every machine: zeros for the one-layer
    /// models (their losses are convex), He-scaled uniform weights for the MLP.
    pub fn init(&self, seed: u64) -> Params {
        let mut rng = SplitMix(seed);
        let mut params = Params::new();
        for (name, shape) in self.param_shapes() {
            let count: usize = shape.iter().product();
            let is_weight = shape.len() == 2 && self.kind == ModelKind::Mlp;
            let scale = if is_weight { (6.0 / shape[0] as f64).sqrt() } else { 0.0 };
            let values = (0..count).map(|_| (scale * (2.0 * rng.unit() - 1.0)) as f32).collect();
            params.insert(name, values);
        }
        params
    }

    /// Mean loss over the batch and the gradient of every parameter.
    pub fn loss_and_gradient(
        &self,
        params: &Params,
        batch: &Batch,
    ) -> Result<(f32, Params), ModelError> {
        match self.kind {
            ModelKind::Mlp => mlp::loss_and_gradient(self, params, batch),
            _ => self
                .one_layer(params, batch, true)
                .map(|(loss, gradient, _)| (loss, gradient.expect("asked for"))),
        }
    }

    /// Loss and accuracy on the batch.
    pub fn evaluate(&self, params: &Params, batch: &Batch) -> Result<Evaluation, ModelError> {
        let (loss, correct) = match self.kind {
            ModelKind::Mlp => mlp::evaluate(self, params, batch)?,
            _ => {
                let (loss, _, correct) = self.one_layer(params, batch, false)?;
                (loss, correct)
            }
        };
        Ok(Evaluation { loss: f64::from(loss), correct, examples: batch.len() as u64 })
    }

    /// Linear, logistic and softmax: one affine layer and a loss head.
    fn one_layer(
        &self,
        params: &Params,
        batch: &Batch,
        gradient: bool,
    ) -> Result<(f32, Option<Params>, Option<u64>), ModelError> {
        let (weight_name, bias_name) =
            (format!("{}.weight", self.kind.name()), format!("{}.bias", self.kind.name()));
        let weight = matrix(params, &weight_name, self.features, self.outputs())?;
        let bias = vector(params, &bias_name, self.outputs())?;
        let logits = affine::forward(&batch.inputs, weight, bias);
        let head = heads::head(self.kind, logits.view(), batch.labels.view());
        if !gradient {
            return Ok((head.loss, None, head.correct));
        }
        let (weight_gradient, bias_gradient) =
            affine::backward(&batch.inputs, head.gradient.view(), self.features);
        let gradients = Params::from([
            (weight_name, flat(weight_gradient)),
            (bias_name, bias_gradient.to_vec()),
        ]);
        Ok((head.loss, Some(gradients), head.correct))
    }
}

/// A matrix's values in row-major order.
fn flat(array: ndarray::Array2<f32>) -> Vec<f32> {
    if array.is_standard_layout() {
        return array.into_raw_vec_and_offset().0;
    }
    array.iter().copied().collect()
}

/// The named parameter as a `[rows, columns]` matrix.
fn matrix<'a>(
    params: &'a Params,
    name: &str,
    rows: usize,
    columns: usize,
) -> Result<ArrayView2<'a, f32>, ModelError> {
    let values = parameter(params, name)?;
    ArrayView2::from_shape((rows, columns), values).map_err(|_| ModelError::MatrixShape {
        name: name.to_string(),
        values: values.len(),
        rows,
        columns,
    })
}

/// The named parameter as a vector of `length`.
fn vector<'a>(
    params: &'a Params,
    name: &str,
    length: usize,
) -> Result<ArrayView1<'a, f32>, ModelError> {
    let values = parameter(params, name)?;
    if values.len() != length {
        let (name, values) = (name.to_string(), values.len());
        return Err(ModelError::VectorLength { name, values, length });
    }
    Ok(ArrayView1::from(values.as_slice()))
}

/// The named parameter's values.
fn parameter<'a>(params: &'a Params, name: &str) -> Result<&'a Vec<f32>, ModelError> {
    params.get(name).ok_or_else(|| ModelError::MissingParameter { name: name.to_string() })
}

/// splitmix64: initial values fixed by the seed on every machine.
struct SplitMix(u64);

impl SplitMix {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut value = self.0;
        value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((value ^ (value >> 31)) >> 11) as f64 / (1_u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests;
