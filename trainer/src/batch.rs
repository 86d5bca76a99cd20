//! `Batch`: decoded examples as model inputs (dense rows in one matrix, or sparse rows) and
//! their labels.

use ndarray::{Array1, Array2};

/// One sparse example: feature indices (strictly ascending) and their values.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseRow {
    pub indices: Vec<u32>,
    pub values: Vec<f32>,
}

/// A batch's inputs.
#[derive(Clone, Debug, PartialEq)]
pub enum Inputs {
    /// `[examples, features]`.
    Dense(Array2<f32>),
    Sparse(Vec<SparseRow>),
}

/// Examples and labels, ready for a model.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub inputs: Inputs,
    pub labels: Array1<f32>,
}

impl Batch {
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}

/// Collects validated examples into batches of one kind (all dense or all sparse).
#[derive(Debug, Default)]
pub struct BatchBuilder {
    features: usize,
    dense: Vec<f32>,
    sparse: Vec<SparseRow>,
    labels: Vec<f32>,
}

impl BatchBuilder {
    pub fn new(features: usize) -> Self {
        Self { features, ..Self::default() }
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Adds a dense example of exactly `features` values.
    pub fn push_dense(&mut self, values: &[f32], label: f32) {
        assert_eq!(values.len(), self.features, "validated before");
        self.dense.extend_from_slice(values);
        self.labels.push(label);
    }

    /// Adds a sparse example.
    pub fn push_sparse(&mut self, row: SparseRow, label: f32) {
        self.sparse.push(row);
        self.labels.push(label);
    }

    /// The batch so far; the builder starts over. Mixed dense and sparse examples are kept
    /// apart by the caller (one batch holds one kind).
    pub fn take(&mut self) -> Batch {
        let labels = Array1::from(std::mem::take(&mut self.labels));
        let inputs = if self.sparse.is_empty() {
            let rows = labels.len();
            let dense = std::mem::take(&mut self.dense);
            Inputs::Dense(
                Array2::from_shape_vec((rows, self.features), dense)
                    .expect("rows x features values"),
            )
        } else {
            Inputs::Sparse(std::mem::take(&mut self.sparse))
        };
        Batch { inputs, labels }
    }

    /// Whether the next example of this kind may join the batch.
    pub fn accepts(&self, sparse: bool) -> bool {
        let holds_sparse = !self.sparse.is_empty();
        self.is_empty() || sparse == holds_sparse
    }
}
