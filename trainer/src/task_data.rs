//! Reading a task's records: each chunk the task names is read through `storage` and checked
//! against what the master recorded (payload size, record count, then the CRC), and each record
//! is validated into batches. Any problem is a `DataError` naming the file, chunk and record,
//! which the trainer reports with `TaskFailed` and the error's [`Fault`]: the data's, or this
//! trainer's view of it.

use std::path::Path;

use client::{ChunkRef, Fault};
use storage::recordio::{read_expected_chunk, DecodedChunk, RecordIoError};

use crate::batch::{Batch, BatchBuilder};
use crate::example_input::{add_record, InputError, RecordLocation};
use crate::model::ModelConfig;

/// Why a task's data cannot be trained on.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error(transparent)]
    Chunk(#[from] RecordIoError),
    #[error(transparent)]
    Record(#[from] InputError),
}

impl DataError {
    /// Whether the data is fine and this trainer's model does not fit it.
    pub fn is_model_mismatch(&self) -> bool {
        matches!(self, DataError::Record(error) if error.model_mismatch)
    }

    /// Whose fault the error is. The master scanned every chunk header when it accepted the
    /// dataset, so bytes this trainer cannot reach (an I/O error, a file now shorter than the
    /// recorded chunk, a header that no longer matches the scan) are this trainer's view of
    /// the data: another trainer may read them. Bytes that are there but wrong (a CRC, a
    /// payload or record that does not decode) would fail any trainer: the data's fault.
    ///
    /// A record beyond this trainer's model (`InputError::model_mismatch`) is this trainer's
    /// too: a trainer with another model may train on it, and a trainer whose model fits none
    /// of the data gives up after `--local-failures-max` tasks instead of failing them all.
    pub fn fault(&self) -> Fault {
        match self {
            DataError::Record(error) if error.model_mismatch => Fault::Local,
            DataError::Record(_) => Fault::Content,
            DataError::Chunk(error) => client::chunk_fault(error),
        }
    }
}

/// All of a task's examples in batches of at most `batch_size`.
pub fn read_task(
    config: &ModelConfig,
    chunks: &[ChunkRef],
    batch_size: usize,
) -> Result<Vec<Batch>, DataError> {
    let mut batches = Vec::new();
    let mut builder = BatchBuilder::new(config.features);
    let mut chunk = DecodedChunk::default();
    for reference in chunks {
        let path = Path::new(&reference.path);
        read_expected_chunk(
            path,
            reference.offset,
            reference.compressed_size,
            reference.record_count,
            &mut chunk,
        )?;
        add_chunk(config, &chunk, path, reference.offset, batch_size, &mut builder, &mut batches)?;
    }
    if !builder.is_empty() {
        batches.push(builder.take());
    }
    Ok(batches)
}

/// All of a task's examples in batches of at most `batch_size`, in the task's shuffled
/// order: `(seed, pass, task_id)` picks the permutation (`client::shuffle::sample_order`,
/// which the Python package follows too). Every chunk is read and checked first, then the
/// records are validated in that order, so a bad record is named as `read_task` names it.
pub fn read_shuffled_task(
    config: &ModelConfig,
    chunks: &[ChunkRef],
    batch_size: usize,
    (seed, pass, task_id): (u64, u32, u64),
) -> Result<Vec<Batch>, DataError> {
    let mut records = Vec::new();
    for reference in chunks {
        let path = Path::new(&reference.path);
        let mut chunk = DecodedChunk::default();
        read_expected_chunk(
            path,
            reference.offset,
            reference.compressed_size,
            reference.record_count,
            &mut chunk,
        )?;
        for (record, bytes) in chunk.records().enumerate() {
            let location = RecordLocation {
                path: path.to_path_buf(),
                chunk_offset: reference.offset,
                record: record as u32,
            };
            records.push((bytes.to_vec(), location));
        }
    }
    let order = match client::shuffle::sample_order(seed, pass, task_id, records.len() as u64) {
        Ok(order) => order,
        Err(error) => {
            let (_, location) = records.pop().expect("a task too large to shuffle has records");
            let reason = error.to_string();
            return Err(InputError { location, reason, model_mismatch: false }.into());
        }
    };
    let (mut batches, mut builder) = (Vec::new(), BatchBuilder::new(config.features));
    for offset in order {
        let (bytes, location) = &records[offset as usize];
        add_record(config, bytes, location, &mut builder)?;
        if builder.len() >= batch_size {
            batches.push(builder.take());
        }
    }
    if !builder.is_empty() {
        batches.push(builder.take());
    }
    Ok(batches)
}

/// Adds one decoded chunk's records to `builder`, cutting full batches into `batches`.
pub fn add_chunk(
    config: &ModelConfig,
    chunk: &DecodedChunk,
    path: &Path,
    offset: u64,
    batch_size: usize,
    builder: &mut BatchBuilder,
    batches: &mut Vec<Batch>,
) -> Result<(), InputError> {
    for (record, bytes) in chunk.records().enumerate() {
        let location = RecordLocation {
            path: path.to_path_buf(),
            chunk_offset: offset,
            record: record as u32,
        };
        add_record(config, bytes, &location, builder)?;
        if builder.len() >= batch_size {
            batches.push(builder.take());
        }
    }
    Ok(())
}
