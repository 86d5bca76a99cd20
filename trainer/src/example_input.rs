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
}

/// Decodes `bytes` and adds the example to `batch`, or says what is wrong with it.
pub fn add_record(
    config: &ModelConfig,
    bytes: &[u8],
    location: &RecordLocation,
    batch: &mut BatchBuilder,
) -> Result<(), InputError> {
    let refuse = |reason: String| InputError { location: location.clone(), reason };
    let example =
        Example::decode(bytes).map_err(|error| refuse(format!("not an Example: {error}")))?;
    check_label(config, example.label).map_err(refuse)?;
    if example.dense.is_empty() && !example.sparse_index.is_empty() {
        let row = sparse_row(config, example.sparse_index, example.sparse_value).map_err(refuse)?;
        if config.kind == ModelKind::Mlp {
            return Err(refuse("the mlp model takes dense features only".into()));
        }
        if !batch.accepts(true) {
            return Err(refuse("sparse and dense examples mixed in one batch".into()));
        }
        batch.push_sparse(row, example.label);
        return Ok(());
    }
    if example.dense.len() != config.features {
        return Err(refuse(format!(
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

fn check_label(config: &ModelConfig, label: f32) -> Result<(), String> {
    if !label.is_finite() {
        return Err(format!("label is {label}"));
    }
    let classes = match config.kind {
        ModelKind::Linear => return Ok(()),
        ModelKind::Logistic => 2,
        ModelKind::Softmax | ModelKind::Mlp => config.classes,
    };
    if label.fract() != 0.0 || label < 0.0 || label >= classes as f32 {
        return Err(format!("label {label} is not a class in 0..{classes}"));
    }
    Ok(())
}

fn sparse_row(
    config: &ModelConfig,
    indices: Vec<u32>,
    values: Vec<f32>,
) -> Result<SparseRow, String> {
    if indices.len() != values.len() {
        return Err(format!("{} sparse indices but {} values", indices.len(), values.len()));
    }
    if let Some(pair) = indices.windows(2).find(|pair| pair[0] >= pair[1]) {
        return Err(format!(
            "sparse indices not strictly ascending ({} then {})",
            pair[0], pair[1]
        ));
    }
    if let Some(&index) = indices.iter().find(|&&index| index as usize >= config.features) {
        return Err(format!(
            "sparse index {index} is not below the model's {} features",
            config.features
        ));
    }
    if let Some(position) = values.iter().position(|value| !value.is_finite()) {
        return Err(format!("sparse value {position} is {}", values[position]));
    }
    Ok(SparseRow { indices, values })
}
