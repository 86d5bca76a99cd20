//! What can be wrong with a model: its configuration ([`ModelConfigError`], what a user gave)
//! and the parameters or batch it is run on ([`ModelError`]).

use super::{CLASSES_MAX, FEATURES_MAX, HIDDEN_MAX};

/// A model kind or size that no model can have; `Display` names the flag.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelConfigError {
    #[error("unknown model {name:?}: use linear, logistic, softmax or mlp")]
    UnknownKind { name: String },
    #[error("--features {features} is outside 1..={FEATURES_MAX}")]
    Features { features: usize },
    #[error("--classes {classes} is outside 2..={CLASSES_MAX}")]
    Classes { classes: usize },
    #[error("--hidden {hidden} is outside 1..={HIDDEN_MAX}")]
    Hidden { hidden: usize },
}

/// Why a model cannot compute a loss on these parameters and this batch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The parameters lack a tensor the model needs.
    #[error("parameter {name} is missing")]
    MissingParameter { name: String },
    /// A weight matrix has a number of values its shape does not allow.
    #[error("parameter {name} has {values} values, not {rows} x {columns}")]
    MatrixShape { name: String, values: usize, rows: usize, columns: usize },
    /// A bias vector has another length than the model's.
    #[error("parameter {name} has {values} values, not {length}")]
    VectorLength { name: String, values: usize, length: usize },
    /// The MLP was given sparse features.
    #[error("the mlp model takes dense features only")]
    SparseInputs,
}
