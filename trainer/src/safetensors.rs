//! Saved models in the safetensors format, by hand (no extra crate): an 8-byte little-endian
//! header length, a JSON header naming each tensor's dtype, shape and byte range (plus
//! `__metadata__`), then the little-endian data. Loadable with Python's `safetensors.numpy`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::model::Params;

/// A header larger than this is refused (safetensors' own limit is 100 MB).
const HEADER_BYTES_MAX: u64 = 100_000_000;

/// A saved model that does not read; names the file and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum SafetensorsError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
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
    let io = |source| SafetensorsError::Io { path: path.to_path_buf(), source };
    let mut header = Map::new();
    header.insert("__metadata__".into(), json!(metadata));
    let mut offset = 0_usize;
    for tensor in tensors {
        assert_eq!(
            tensor.shape.iter().product::<usize>(),
            tensor.values.len(),
            "{}: shape and values agree",
            tensor.name
        );
        let end = offset + tensor.values.len() * 4;
        header.insert(
            tensor.name.to_string(),
            json!({"dtype": "F32", "shape": tensor.shape, "data_offsets": [offset, end]}),
        );
        offset = end;
    }
    let mut header = Value::Object(header).to_string().into_bytes();
    // Pad with spaces so the data starts 8-byte aligned, as the format recommends.
    header.resize(header.len().div_ceil(8) * 8, b' ');
    let dir =
        path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| SafetensorsError::Invalid {
        path: path.to_path_buf(),
        reason: "not a file name".into(),
    })?;
    let mut file =
        storage::durable_file::DurableFile::create(dir, &name.to_string_lossy()).map_err(io)?;
    file.write_all(&(header.len() as u64).to_le_bytes()).map_err(io)?;
    file.write_all(&header).map_err(io)?;
    for tensor in tensors {
        let bytes: Vec<u8> = tensor.values.iter().flat_map(|value| value.to_le_bytes()).collect();
        file.write_all(&bytes).map_err(io)?;
    }
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

/// Reads a saved model.
pub fn read_safetensors(path: &Path) -> Result<SavedTensors, SafetensorsError> {
    let bytes = std::fs::read(path)
        .map_err(|source| SafetensorsError::Io { path: path.to_path_buf(), source })?;
    let invalid = |reason: String| SafetensorsError::Invalid { path: path.to_path_buf(), reason };
    let length = bytes
        .get(..8)
        .map(|word| u64::from_le_bytes(word.try_into().expect("8 bytes")))
        .ok_or_else(|| invalid("shorter than the 8-byte header length".into()))?;
    if length > HEADER_BYTES_MAX || 8 + length > bytes.len() as u64 {
        return Err(invalid(format!(
            "header length {length} does not fit the {}-byte file",
            bytes.len()
        )));
    }
    let header: Map<String, Value> = serde_json::from_slice(&bytes[8..8 + length as usize])
        .map_err(|error| invalid(format!("header is not a JSON object: {error}")))?;
    let data = &bytes[8 + length as usize..];
    let mut params = Params::new();
    let mut shapes = BTreeMap::new();
    let mut metadata = BTreeMap::new();
    let mut ranges = Vec::new();
    for (name, entry) in header {
        if name == "__metadata__" {
            metadata = serde_json::from_value(entry)
                .map_err(|error| invalid(format!("__metadata__: {error}")))?;
            continue;
        }
        let (shape, begin, end) = tensor_entry(&entry, data.len())
            .map_err(|reason| invalid(format!("tensor {name}: {reason}")))?;
        let values = data[begin..end]
            .chunks_exact(4)
            .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
            .collect();
        ranges.push((begin, end, name.clone()));
        shapes.insert(name.clone(), shape);
        params.insert(name, values);
    }
    check_ranges(ranges, data.len()).map_err(invalid)?;
    Ok(SavedTensors { params, shapes, metadata })
}

/// A tensor's shape and byte range, checked against the data section.
fn tensor_entry(entry: &Value, data_bytes: usize) -> Result<(Vec<usize>, usize, usize), String> {
    if entry["dtype"] != "F32" {
        return Err(format!("dtype {} is not F32", entry["dtype"]));
    }
    let shape: Vec<usize> = serde_json::from_value(entry["shape"].clone())
        .map_err(|error| format!("shape: {error}"))?;
    let offsets: [usize; 2] = serde_json::from_value(entry["data_offsets"].clone())
        .map_err(|error| format!("data_offsets: {error}"))?;
    let [begin, end] = offsets;
    if begin > end || end > data_bytes {
        return Err(format!("data_offsets [{begin}, {end}] outside the {data_bytes}-byte data"));
    }
    let elements = shape
        .iter()
        .try_fold(1_usize, |count, &dim| count.checked_mul(dim))
        .ok_or("shape overflows")?;
    if elements.checked_mul(4) != Some(end - begin) {
        return Err(format!(
            "shape {shape:?} needs {elements} values, the range holds {} bytes",
            end - begin
        ));
    }
    Ok((shape, begin, end))
}

/// The tensors' ranges cover the data exactly, without overlap.
fn check_ranges(mut ranges: Vec<(usize, usize, String)>, data_bytes: usize) -> Result<(), String> {
    ranges.sort();
    let mut next = 0;
    for (begin, end, name) in ranges {
        if begin != next {
            return Err(format!(
                "tensor {name} starts at {begin}, expected {next} (gap or overlap)"
            ));
        }
        next = end;
    }
    if next != data_bytes {
        return Err(format!("{} bytes after the last tensor", data_bytes - next));
    }
    Ok(())
}
