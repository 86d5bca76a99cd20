//! `raftrain.example.v1.Example` encode and decode on the Rust types (prost), with NumPy-ready
//! little-endian buffers: the Python side wraps them with `numpy.frombuffer`, so no Python work
//! is done per element.

use proto::example::Example;
use proto::Message as _;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};

use crate::errors::{guarded, Failure};

/// An Example's fields as buffers: dense (f32), sparse_index (u32), sparse_value (f32), label.
type Fields<'py> = (Bound<'py, PyByteArray>, Bound<'py, PyByteArray>, Bound<'py, PyByteArray>, f32);

/// The bytes of an Example from little-endian buffers of its fields.
#[pyfunction]
pub fn encode_example<'py>(
    py: Python<'py>,
    dense: &[u8],
    sparse_index: &[u8],
    sparse_value: &[u8],
    label: f32,
) -> PyResult<Bound<'py, PyBytes>> {
    guarded("Example.encode", || {
        let example = Example {
            dense: floats("dense", dense)?,
            sparse_index: words("sparse_index", sparse_index)?,
            sparse_value: floats("sparse_value", sparse_value)?,
            label,
        };
        if example.sparse_index.len() != example.sparse_value.len() {
            return Err(Failure::invalid(format!(
                "sparse_index has {} entries and sparse_value {}: they are parallel arrays",
                example.sparse_index.len(),
                example.sparse_value.len()
            ))
            .into());
        }
        Ok(PyBytes::new(py, &example.encode_to_vec()))
    })
}

/// An Example's fields from its bytes.
#[pyfunction]
pub fn decode_example<'py>(py: Python<'py>, record: &[u8]) -> PyResult<Fields<'py>> {
    guarded("Example.decode", || {
        let example = Example::decode(record).map_err(|error| {
            Failure::data(format!("not an Example: {error}"), client::Fault::Content)
        })?;
        Ok((
            PyByteArray::new(py, &le_bytes(&example.dense, |value| value.to_le_bytes())),
            PyByteArray::new(py, &le_bytes(&example.sparse_index, |index| index.to_le_bytes())),
            PyByteArray::new(py, &le_bytes(&example.sparse_value, |value| value.to_le_bytes())),
            example.label,
        ))
    })
}

/// Dense Examples as one row-major f32 matrix and a label vector: (features, labels, rows,
/// columns). Every record must decode and have as many dense values as the first; the error
/// names the record's index in `records`.
#[pyfunction]
pub fn decode_dense<'py>(
    py: Python<'py>,
    records: Vec<Vec<u8>>,
) -> PyResult<(Bound<'py, PyByteArray>, Bound<'py, PyByteArray>, usize, usize)> {
    guarded("decode_dense", || {
        let decoded = py.detach(|| dense_matrix(&records));
        let (features, labels, columns) = decoded?;
        Ok((
            PyByteArray::new(py, &le_bytes(&features, |value| value.to_le_bytes())),
            PyByteArray::new(py, &le_bytes(&labels, |value| value.to_le_bytes())),
            records.len(),
            columns,
        ))
    })
}

fn dense_matrix(records: &[Vec<u8>]) -> Result<(Vec<f32>, Vec<f32>, usize), Failure> {
    let mut features = Vec::new();
    let mut labels = Vec::with_capacity(records.len());
    let mut columns = None;
    for (index, record) in records.iter().enumerate() {
        let example = Example::decode(record.as_slice()).map_err(|error| {
            Failure::data(
                format!("record {index}: not an Example: {error}"),
                client::Fault::Content,
            )
        })?;
        let width = *columns.get_or_insert(example.dense.len());
        if example.dense.len() != width || !example.sparse_index.is_empty() {
            return Err(Failure::data(
                format!(
                    "record {index}: {} dense values and {} sparse ones; the first record has {width} dense values and this reads dense data only",
                    example.dense.len(),
                    example.sparse_index.len()
                ),
                client::Fault::Content,
            ));
        }
        features.extend_from_slice(&example.dense);
        labels.push(example.label);
    }
    Ok((features, labels, columns.unwrap_or(0)))
}

fn le_bytes<T: Copy, const N: usize>(values: &[T], to_bytes: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(values.len() * N);
    for value in values {
        bytes.extend_from_slice(&to_bytes(*value));
    }
    bytes
}

/// Little-endian f32 values from `bytes`.
pub fn floats(field: &str, bytes: &[u8]) -> Result<Vec<f32>, Failure> {
    whole(field, bytes)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect())
}

fn words(field: &str, bytes: &[u8]) -> Result<Vec<u32>, Failure> {
    whole(field, bytes)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect())
}

fn whole(field: &str, bytes: &[u8]) -> Result<(), Failure> {
    match bytes.len() % 4 {
        0 => Ok(()),
        _ => Err(Failure::invalid(format!(
            "{field}: {} bytes is not a whole number of 4-byte values",
            bytes.len()
        ))),
    }
}
