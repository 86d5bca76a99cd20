//! Decoding and validating dataset records as `Example`s, with errors that name the file,
//! chunk and record.

use std::path::PathBuf;

use proto::example::Example;
use proto::Message as _;

use crate::batch::{BatchBuilder, SparseRow};
use crate::model::{ModelConfig, ModelKind};

/// Where a record is: file, chunk (its byte offset), record index in the chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordLocation {
    pub path: PathBuf,
    pub chunk_offset: u64,
    pub record: u32,
}

/// A record a model cannot train on.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("record {} of the chunk at byte {} of {}: {reason}", location.record, location.chunk_offset, location.path.display())]
pub struct InputError {
    pub location: RecordLocation,
    pub reason: String,
    /// The record is well formed but beyond this trainer's model (a label at or above its
    /// classes, another feature count): the model does not fit the data, which a trainer with
    /// another model could train on.
    pub model_mismatch: bool,
}

/// Why a record is refused: wrong in itself, or beyond the model.
#[derive(Debug, PartialEq)]
enum Refusal {
    Record(String),
    Model(String),
}

impl Refusal {
    fn at(self, location: &RecordLocation) -> InputError {
        let (reason, model_mismatch) = match self {
            Refusal::Record(reason) => (reason, false),
            Refusal::Model(reason) => (reason, true),
        };
        InputError { location: location.clone(), reason, model_mismatch }
    }
}

/// Decodes `bytes` and adds the example to `batch`, or says what is wrong with it.
pub fn add_record(
    config: &ModelConfig,
    bytes: &[u8],
    location: &RecordLocation,
    batch: &mut BatchBuilder,
) -> Result<(), InputError> {
    let refuse = |reason: String| Refusal::Record(reason).at(location);
    let beyond_model = |reason: String| Refusal::Model(reason).at(location);
    let example =
        Example::decode(bytes).map_err(|error| refuse(format!("not an Example: {error}")))?;
    check_label(config, example.label).map_err(|refusal| refusal.at(location))?;
    if example.dense.is_empty() && !example.sparse_index.is_empty() {
        let row = sparse_row(config, example.sparse_index, example.sparse_value)
            .map_err(|refusal| refusal.at(location))?;
        if config.kind == ModelKind::Mlp {
            return Err(beyond_model("the mlp model takes dense features only".into()));
        }
        if !batch.accepts(true) {
            return Err(refuse("sparse and dense examples mixed in one batch".into()));
        }
        batch.push_sparse(row, example.label);
        return Ok(());
    }
    if example.dense.len() != config.features {
        return Err(beyond_model(format!(
            "dense has {} features, the model expects {}",
            example.dense.len(),
            config.features
        )));
    }
    if let Some(position) = example.dense.iter().position(|value| !value.is_finite()) {
        return Err(refuse(format!("dense feature {position} is {}", example.dense[position])));
    }
    if !batch.accepts(false) {
        return Err(refuse("sparse and dense examples mixed in one batch".into()));
    }
    batch.push_dense(&example.dense, example.label);
    Ok(())
}

fn check_label(config: &ModelConfig, label: f32) -> Result<(), Refusal> {
    if !label.is_finite() {
        return Err(Refusal::Record(format!("label is {label}")));
    }
    let classes = match config.kind {
        ModelKind::Linear => return Ok(()),
        ModelKind::Logistic => 2,
        ModelKind::Softmax | ModelKind::Mlp => config.classes,
    };
    if label.fract() != 0.0 || label < 0.0 {
        return Err(Refusal::Record(format!("label {label} is not a class")));
    }
    if label >= classes as f32 {
        return Err(Refusal::Model(format!(
            "label {label} is not a class in 0..{classes} (the model's classes)"
        )));
    }
    Ok(())
}

fn sparse_row(
    config: &ModelConfig,
    indices: Vec<u32>,
    values: Vec<f32>,
) -> Result<SparseRow, Refusal> {
    if indices.len() != values.len() {
        return Err(Refusal::Record(format!(
            "{} sparse indices but {} values",
            indices.len(),
            values.len()
        )));
    }
    if let Some(pair) = indices.windows(2).find(|pair| pair[0] >= pair[1]) {
        return Err(Refusal::Record(format!(
            "sparse indices not strictly ascending ({} then {})",
            pair[0], pair[1]
        )));
    }
    if let Some(&index) = indices.iter().find(|&&index| index as usize >= config.features) {
        return Err(Refusal::Model(format!(
            "sparse index {index} is not below the model's {} features",
            config.features
        )));
    }
    if let Some(position) = values.iter().position(|value| !value.is_finite()) {
        return Err(Refusal::Record(format!("sparse value {position} is {}", values[position])));
    }
    Ok(SparseRow { indices, values })
}
