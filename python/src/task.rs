//! `Task` (native half): what the master handed out, as plain fields: RecordIO chunks, or an
//! index range `[start, end)` of an index dataset. The Python `Task` wraps it with
//! `records()`, `examples()`, `finish()`, `fail()` and the context manager.

use pyo3::prelude::*;

use crate::errors::Failure;

#[pyclass(module = "raftrain._native", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct Task {
    pub task_id: u64,
    /// Which dispatch of the task this is (the wire's epoch: a report counts only for it).
    pub dispatch: u64,
    pub pass_index: u32,
    /// Each chunk as (path, offset, compressed_size, record_count), as the master recorded it
    /// (empty for an index task).
    pub chunks: Vec<(String, u64, u32, u32)>,
    /// The index range `[start, end)` of an index task (`None` for a RecordIO task).
    pub start: Option<u64>,
    pub end: Option<u64>,
    /// When the master takes the task back (the state's clock, in ms; for display).
    pub deadline_ms: u64,
    /// The job's shuffle seed if it is shuffled: the task's samples are read in the order
    /// `sample_order(seed, pass_index, task_id, count)` gives.
    pub shuffle_seed: Option<u64>,
    /// Where the task comes in its pass: the masters hand a pass's tasks out by increasing
    /// rank (`client::shuffle::task_rank` in a shuffled job, else the task id), tasks taken
    /// back and handed out again aside.
    pub pass_rank: u64,
}

impl From<client::Task> for Task {
    fn from(task: client::Task) -> Self {
        let (chunks, start, end) = match task.data {
            client::TaskData::Chunks(chunks) => {
                let chunks = chunks
                    .into_iter()
                    .map(|chunk| {
                        (chunk.path, chunk.offset, chunk.compressed_size, chunk.record_count)
                    })
                    .collect();
                (chunks, None, None)
            }
            client::TaskData::IndexRange { start, end } => (Vec::new(), Some(start), Some(end)),
        };
        let pass_rank = match task.shuffle_seed {
            Some(seed) => client::shuffle::task_rank(seed, task.pass, task.task_id),
            None => task.task_id,
        };
        Self {
            pass_rank,
            task_id: task.task_id,
            dispatch: task.epoch,
            pass_index: task.pass,
            chunks,
            start,
            end,
            deadline_ms: task.deadline_ms,
            shuffle_seed: task.shuffle_seed,
        }
    }
}

/// The order to read the `count` samples of task `task_id` in pass `pass_index` of a job
/// shuffled with `seed`: a permutation of `0..count` (offsets into the task), the same in
/// every process (`client::shuffle::sample_order`, which the Rust trainer uses too).
#[pyfunction]
pub fn sample_order(seed: u64, pass_index: u32, task_id: u64, count: u64) -> PyResult<Vec<u64>> {
    client::shuffle::sample_order(seed, pass_index, task_id, count)
        .map_err(|error| Failure::invalid(error.to_string()).into())
}
