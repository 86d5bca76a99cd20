//! Loss heads over a batch of logits: squared error, binary cross-entropy on logits, softmax
//! cross-entropy with log-sum-exp. Each gives the mean loss, the gradient of the logits, and
//! the count of correct predictions for classifiers.

use ndarray::{Array2, ArrayView1, ArrayView2, Axis};

use super::ModelKind;

pub struct Head {
    pub loss: f32,
    /// d(mean loss)/d(logits), `[examples, outputs]`.
    pub gradient: Array2<f32>,
    pub correct: Option<u64>,
}

pub fn head(kind: ModelKind, logits: ArrayView2<'_, f32>, labels: ArrayView1<'_, f32>) -> Head {
    match kind {
        ModelKind::Linear => squared_error(logits, labels),
        ModelKind::Logistic => binary_cross_entropy(logits, labels),
        ModelKind::Softmax | ModelKind::Mlp => softmax_cross_entropy(logits, labels),
    }
}

/// 0.5 (y - yhat)^2 per example.
fn squared_error(logits: ArrayView2<'_, f32>, labels: ArrayView1<'_, f32>) -> Head {
    let count = labels.len().max(1) as f32;
    let residual = &logits.column(0) - &labels;
    let loss = residual.iter().map(|r| 0.5 * r * r).sum::<f32>() / count;
    let gradient = (residual / count).insert_axis(Axis(1));
    Head { loss, gradient, correct: None }
}

/// log(1 + e^z) - y z, written as max(z, 0) - y z + log1p(e^-|z|): finite for any z.
fn binary_cross_entropy(logits: ArrayView2<'_, f32>, labels: ArrayView1<'_, f32>) -> Head {
    let count = labels.len().max(1) as f32;
    let mut loss = 0.0_f64;
    let mut correct = 0;
    let mut gradient = Array2::zeros((labels.len(), 1));
    for ((&z, &y), slot) in logits.column(0).iter().zip(labels).zip(gradient.iter_mut()) {
        loss += f64::from(z.max(0.0) - y * z + (-z.abs()).exp().ln_1p());
        let probability = sigmoid(z);
        *slot = (probability - y) / count;
        correct += u64::from((z > 0.0) == (y > 0.5));
    }
    Head { loss: (loss / f64::from(count)) as f32, gradient, correct: Some(correct) }
}

/// log-sum-exp(z) - z_y per example, with the maximum subtracted first.
fn softmax_cross_entropy(logits: ArrayView2<'_, f32>, labels: ArrayView1<'_, f32>) -> Head {
    let count = labels.len().max(1) as f32;
    let mut gradient = logits.to_owned();
    let mut loss = 0.0_f64;
    let mut correct = 0;
    for ((mut row, logits_row), &label) in
        gradient.rows_mut().into_iter().zip(logits.rows()).zip(labels)
    {
        let class = label as usize;
        let (best, highest) =
            row.iter().enumerate().fold((0, f32::NEG_INFINITY), |(best, high), (index, &z)| {
                if z > high {
                    (index, z)
                } else {
                    (best, high)
                }
            });
        row.mapv_inplace(|z| (z - highest).exp());
        let total: f32 = row.sum();
        // From the logit itself: exp(z_y - max) may underflow to 0 for a confident mistake.
        loss += f64::from(total.ln() - (logits_row[class] - highest));
        row.mapv_inplace(|e| e / total / count);
        row[class] -= 1.0 / count;
        correct += u64::from(best == class);
    }
    Head { loss: (loss / f64::from(count)) as f32, gradient, correct: Some(correct) }
}

fn sigmoid(z: f32) -> f32 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}
