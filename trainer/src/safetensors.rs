//! Saved models in the safetensors format, read and written with the `safetensors` crate (the
//! format's reference implementation, which validates an untrusted header: its length, the
//! JSON, every tensor's byte range against its shape and dtype, ranges that overlap or leave
//! gaps, a data section longer or shorter than the tensors). This file adds what a raftrain
//! model needs on top: f32 tensors only, a durable write (temporary file, fsync, rename), and
//! errors that name the file and say what is wrong in words. Loadable with Python's
//! `safetensors.numpy`.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensorError, SafeTensors};

use crate::model::Params;

/// A saved model that does not read or write; names the file and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum SafetensorsError {
    /// The I/O error is shown in the message, not chained as a source (printed once by `{:#}`).
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
}

/// One tensor to save: its name, shape and values.
pub struct NamedTensor<'a> {
    pub name: &'a str,
    pub shape: &'a [usize],
    pub values: &'a [f32],
}

/// Writes `tensors` and `metadata` to `path` (temporary file, fsync, rename).
pub fn write_safetensors(
    path: &Path,
    tensors: &[NamedTensor<'_>],
    metadata: &BTreeMap<String, String>,
) -> Result<(), SafetensorsError> {
    let invalid = |reason: String| SafetensorsError::Invalid { path: path.to_path_buf(), reason };
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|tensor| tensor.values.iter().flat_map(|value| value.to_le_bytes()).collect())
        .collect();
    let mut views = Vec::with_capacity(tensors.len());
    for (tensor, data) in tensors.iter().zip(&bytes) {
        let view = TensorView::new(Dtype::F32, tensor.shape.to_vec(), data)
            .map_err(|error| invalid(format!("tensor {}: {}", tensor.name, reason(&error))))?;
        views.push((tensor.name, view));
    }
    let info: HashMap<String, String> = metadata.clone().into_iter().collect();
    // The crate pads the header with spaces so the data starts 8-byte aligned.
    let serialized =
        safetensors::serialize(views, Some(info)).map_err(|error| invalid(reason(&error)))?;
    let dir =
        path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| invalid("not a file name".into()))?;
    let io = |error| SafetensorsError::Io { path: path.to_path_buf(), error };
    let mut file =
        storage::durable_file::DurableFile::create(dir, &name.to_string_lossy()).map_err(io)?;
    file.write_all(&serialized).map_err(io)?;
    file.commit().map_err(io)?;
    Ok(())
}

/// What a safetensors file holds: every tensor's flat values and shape, and the metadata.
#[derive(Debug, Default)]
pub struct SavedTensors {
    pub params: Params,
    pub shapes: BTreeMap<String, Vec<usize>>,
    pub metadata: BTreeMap<String, String>,
}

/// Reads a saved model; every tensor must be F32.
pub fn read_safetensors(path: &Path) -> Result<SavedTensors, SafetensorsError> {
    let bytes = std::fs::read(path)
        .map_err(|error| SafetensorsError::Io { path: path.to_path_buf(), error })?;
    let invalid = |reason: String| SafetensorsError::Invalid { path: path.to_path_buf(), reason };
    let (_, header) =
        SafeTensors::read_metadata(&bytes).map_err(|error| invalid(reason(&error)))?;
    let file = SafeTensors::deserialize(&bytes).map_err(|error| invalid(reason(&error)))?;
    let mut saved = SavedTensors {
        metadata: header.metadata().clone().unwrap_or_default().into_iter().collect(),
        ..SavedTensors::default()
    };
    for (name, view) in file.iter() {
        if view.dtype() != Dtype::F32 {
            return Err(invalid(format!("tensor {name}: dtype {} is not F32", view.dtype())));
        }
        let values = view
            .data()
            .chunks_exact(4)
            .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]));
        saved.params.insert(name.to_string(), values.collect());
        saved.shapes.insert(name.to_string(), view.shape().to_vec());
    }
    Ok(saved)
}

/// What `error` means for a file, in words.
fn reason(error: &SafeTensorError) -> String {
    match error {
        SafeTensorError::HeaderTooSmall => "shorter than the 8-byte header length".into(),
        SafeTensorError::HeaderTooLarge => {
            "the header length does not fit: over the format's 100,000,000-byte limit".into()
        }
        SafeTensorError::InvalidHeaderLength => {
            "the header length does not fit: past the end of the file".into()
        }
        SafeTensorError::InvalidHeader(error) => format!("the header is not UTF-8: {error}"),
        SafeTensorError::InvalidHeaderDeserialization(error) => {
            format!("the header is not a JSON object of tensors: {error}")
        }
        SafeTensorError::InvalidOffset(name) => format!(
            "tensor {name}: its data_offsets overlap another tensor's, leave a gap, or run \
             backwards"
        ),
        SafeTensorError::MetadataIncompleteBuffer => "the tensors' byte ranges do not cover \
             the data section exactly (the file was cut short or has bytes after the last \
             tensor)"
            .into(),
        SafeTensorError::TensorInvalidInfo => {
            "a tensor's byte range is not the size its shape and dtype make".into()
        }
        SafeTensorError::ValidationOverflow => "a tensor's shape overflows".into(),
        other => other.to_string(),
    }
}
