//! One affine layer, `inputs . W + b`, forward and backward, for dense and sparse inputs.
//! Sparse rows touch only their present features, both ways.

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis};

use crate::batch::Inputs;

/// `[examples, outputs]` = inputs `[examples, features]` . weight `[features, outputs]` + bias.
pub fn forward(
    inputs: &Inputs,
    weight: ArrayView2<'_, f32>,
    bias: ArrayView1<'_, f32>,
) -> Array2<f32> {
    let mut out = match inputs {
        Inputs::Dense(dense) => dense.dot(&weight),
        Inputs::Sparse(rows) => {
            let mut out = Array2::zeros((rows.len(), weight.ncols()));
            for (row, mut target) in rows.iter().zip(out.rows_mut()) {
                for (&index, &value) in row.indices.iter().zip(&row.values) {
                    target.scaled_add(value, &weight.row(index as usize));
                }
            }
            out
        }
    };
    out += &bias;
    out
}

/// The gradients of weight and bias given the gradient of the outputs `[examples, outputs]`.
pub fn backward(
    inputs: &Inputs,
    output_gradient: ArrayView2<'_, f32>,
    features: usize,
) -> (Array2<f32>, Array1<f32>) {
    let bias = output_gradient.sum_axis(Axis(0));
    let weight = match inputs {
        Inputs::Dense(dense) => dense.t().dot(&output_gradient),
        Inputs::Sparse(rows) => {
            let mut weight = Array2::zeros((features, output_gradient.ncols()));
            for (row, gradient) in rows.iter().zip(output_gradient.rows()) {
                for (&index, &value) in row.indices.iter().zip(&row.values) {
                    weight.row_mut(index as usize).scaled_add(value, &gradient);
                }
            }
            weight
        }
    };
    (weight, bias)
}
