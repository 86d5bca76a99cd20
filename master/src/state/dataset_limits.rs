//! The bounds of a job's dataset, which every file that stores or checks a part of it shares:
//! kept apart from `dataset.rs` so that the dataset's parts (`index_range.rs`, `chunk_list.rs`)
//! need not import the file that imports them.

/// The longest job name accepted.
pub const JOB_NAME_BYTES_MAX: usize = 256;
/// The most chunks one dataset may list; keeps a dataset report (one Raft entry) bounded.
pub const CHUNK_COUNT_MAX: usize = 1 << 20;
/// The most tasks a job may have, whatever its kind: the queue stores a record per task, and
/// `limits.rs` measures the largest state with this many. A RecordIO job reaches it with one
/// chunk per task.
pub const TASK_COUNT_MAX: u64 = CHUNK_COUNT_MAX as u64;
/// The longest chunk file path accepted.
pub const CHUNK_PATH_BYTES_MAX: usize = 4096;
/// The most bytes of file paths one dataset may store (each file's path is stored once per
/// run of its chunks): with [`CHUNK_COUNT_MAX`] this bounds the state, so the largest admitted
/// dataset always fits a snapshot (`state_bytes_max` in `master_state.rs`).
pub const DATASET_PATH_BYTES_MAX: u64 = 32 << 20;
/// The most chunks one task may hold; bounds every task assignment (a reply that client
/// sessions keep) whatever the leader's flags say.
pub const CHUNKS_PER_TASK_MAX: u32 = client::CHUNKS_PER_TASK_MAX;
