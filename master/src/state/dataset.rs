//! The job's dataset as first reported: its chunks, pass count and queue policy.

use serde::{Deserialize, Serialize};

use super::chunk_list::{ChunkList, ChunkSpan};

/// The longest job name accepted.
pub const JOB_NAME_BYTES_MAX: usize = 256;
/// The most chunks one dataset may list; keeps a dataset report (one Raft entry) bounded.
pub const CHUNK_COUNT_MAX: usize = 1 << 20;
/// The longest chunk file path accepted.
pub const CHUNK_PATH_BYTES_MAX: usize = 4096;
/// The most bytes of file paths one dataset may store (each file's path is stored once per
/// run of its chunks): with [`CHUNK_COUNT_MAX`] this bounds the state, so the largest admitted
/// dataset always fits a snapshot (`state_bytes_max` in `master_state.rs`).
pub const DATASET_PATH_BYTES_MAX: u64 = 32 << 20;
/// The most chunks one task may hold; bounds every task assignment (a reply that client
/// sessions keep) whatever the leader's flags say.
pub const CHUNKS_PER_TASK_MAX: u32 = 1024;

pub use client::ChunkRef;

/// How the queue cuts, times and retries tasks. Stamped by the leader from its flags into the
/// first dataset report, then fixed for the job so every replica agrees.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuePolicy {
    /// How many consecutive chunks make one task; at least one.
    pub chunks_per_task: u32,
    /// No task times out sooner than this after dispatch.
    pub task_timeout_min_ms: u64,
    /// k in `deadline = now + max(task_timeout_min_ms, k x average completion time)`.
    pub timeout_factor: u32,
    /// A task moves to `failed` once its failures plus timeouts in a pass exceed this.
    pub max_task_failures: u32,
    /// Whether failed tasks are tried again in the next pass (otherwise they stay failed).
    pub retry_failed_next_pass: bool,
}

/// The accepted dataset. Tasks are ranges of `chunks`, so chunks are stored once.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct Dataset {
    pub(crate) job: String,
    pub(crate) chunks: ChunkList,
    pub(crate) passes: u32,
    pub(crate) policy: QueuePolicy,
    /// [`chunks_digest`] of `chunks`: lets a repeated batched report be checked in O(1).
    pub(crate) digest: u64,
}

/// A 64-bit FNV-1a digest of a chunk list: the leader computes it over the whole list and every
/// batch carries it, so the state can check the assembled list and compare repeats cheaply.
pub fn chunks_digest(chunks: &[ChunkRef]) -> u64 {
    digest_of(chunks.iter().map(|chunk| {
        let span = ChunkSpan {
            file: 0,
            offset: chunk.offset,
            compressed_size: chunk.compressed_size,
            record_count: chunk.record_count,
        };
        (chunk.path.as_str(), span)
    }))
}

/// [`chunks_digest`] of a stored list, without building its [`ChunkRef`]s.
pub(crate) fn list_digest(chunks: &ChunkList) -> u64 {
    digest_of(chunks.iter().map(|(path, span)| (path, *span)))
}

fn digest_of<'a>(chunks: impl Iterator<Item = (&'a str, ChunkSpan)>) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut digest = OFFSET_BASIS;
    let mut feed = |bytes: &[u8]| {
        for byte in bytes {
            digest = (digest ^ u64::from(*byte)).wrapping_mul(PRIME);
        }
    };
    for (path, span) in chunks {
        feed(&(path.len() as u64).to_le_bytes());
        feed(path.as_bytes());
        feed(&span.offset.to_le_bytes());
        feed(&span.compressed_size.to_le_bytes());
        feed(&span.record_count.to_le_bytes());
    }
    digest
}

/// Checks what a report says about the job as a whole; the error says what a person must fix.
pub(crate) fn check_spec(
    job: &str,
    chunk_count: u64,
    passes: u32,
    policy: &QueuePolicy,
) -> Result<(), String> {
    if job.len() > JOB_NAME_BYTES_MAX {
        return Err(format!("job name is longer than {JOB_NAME_BYTES_MAX} bytes"));
    }
    if chunk_count == 0 {
        return Err("the dataset has no chunks".to_string());
    }
    if chunk_count > CHUNK_COUNT_MAX as u64 {
        return Err(format!("{chunk_count} chunks, more than the {CHUNK_COUNT_MAX} allowed"));
    }
    if passes == 0 {
        return Err("passes must be at least 1".to_string());
    }
    if policy.chunks_per_task == 0 || policy.chunks_per_task > CHUNKS_PER_TASK_MAX {
        return Err(format!("chunks_per_task must be 1 to {CHUNKS_PER_TASK_MAX}"));
    }
    Ok(())
}

/// Checks the chunks of a report (or of one batch of it): well formed, paths bounded.
pub(crate) fn check_chunks(chunks: &ChunkList) -> Result<(), String> {
    if !chunks.is_well_formed() {
        return Err("a chunk names a file the report does not list".to_string());
    }
    let longest = chunks.longest_path_bytes();
    if longest > CHUNK_PATH_BYTES_MAX {
        return Err(format!(
            "a chunk path is {longest} bytes, more than the {CHUNK_PATH_BYTES_MAX} allowed"
        ));
    }
    check_path_bytes(chunks.path_bytes())
}

/// The dataset's file paths together stay within [`DATASET_PATH_BYTES_MAX`].
pub(crate) fn check_path_bytes(path_bytes: u64) -> Result<(), String> {
    if path_bytes > DATASET_PATH_BYTES_MAX {
        return Err(format!(
            "the dataset's file paths take {path_bytes} bytes, more than the \
             {DATASET_PATH_BYTES_MAX} allowed (use fewer, larger files)"
        ));
    }
    Ok(())
}

impl Dataset {
    /// Validates a report; the error says what a person must fix.
    pub(crate) fn new(
        job: &str,
        chunks: ChunkList,
        passes: u32,
        policy: QueuePolicy,
    ) -> Result<Self, String> {
        check_spec(job, chunks.len() as u64, passes, &policy)?;
        check_chunks(&chunks)?;
        let digest = list_digest(&chunks);
        Ok(Self { job: job.to_string(), chunks, passes, policy, digest })
    }

    /// How many tasks the chunks make: groups of `chunks_per_task`, the last one possibly short.
    pub(crate) fn task_count(&self) -> u64 {
        let per_task = self.chunks_per_task();
        u64::try_from(self.chunks.len().div_ceil(per_task)).expect("chunk count fits in u64")
    }

    /// The chunks of one task, `task < task_count()`.
    pub(crate) fn task_chunks(&self, task: u64) -> Vec<ChunkRef> {
        let per_task = self.chunks_per_task();
        let first = usize::try_from(task).map_or(usize::MAX, |task| task.saturating_mul(per_task));
        let first = first.min(self.chunks.len());
        let end = first.saturating_add(per_task).min(self.chunks.len());
        self.chunks.refs(first..end)
    }

    fn chunks_per_task(&self) -> usize {
        usize::try_from(self.policy.chunks_per_task).expect("u32 fits in usize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(count: u64) -> Vec<ChunkRef> {
        (0..count)
            .map(|i| ChunkRef {
                path: "a.recordio".to_string(),
                offset: i * 100,
                compressed_size: 80,
                record_count: 10,
            })
            .collect()
    }

    fn policy(chunks_per_task: u32) -> QueuePolicy {
        QueuePolicy {
            chunks_per_task,
            task_timeout_min_ms: 1000,
            timeout_factor: 3,
            max_task_failures: 2,
            retry_failed_next_pass: false,
        }
    }

    /// Cuts `chunk_count` chunks by `chunks_per_task` and compares each task's chunk offsets.
    fn check(chunk_count: u64, chunks_per_task: u32, expected: &[&[u64]]) {
        let list = ChunkList::from_refs(&chunks(chunk_count));
        let dataset = Dataset::new("job", list, 1, policy(chunks_per_task)).expect("valid dataset");
        let actual: Vec<Vec<u64>> = (0..dataset.task_count())
            .map(|task| dataset.task_chunks(task).iter().map(|chunk| chunk.offset).collect())
            .collect();
        assert_eq!(actual, expected, "{chunk_count} chunks by {chunks_per_task}");
    }

    /// Tasks are the chunks cut in order into groups, the last group possibly shorter.
    #[test]
    fn tasks_cut_chunks_in_order() {
        check(1, 1, &[&[0]]);
        check(3, 1, &[&[0], &[100], &[200]]);
        check(5, 2, &[&[0, 100], &[200, 300], &[400]]);
        check(2, 7, &[&[0, 100]]);
    }

    /// Each malformed report is refused with a reason.
    #[test]
    fn invalid_reports_are_refused() {
        let cases: [(&str, &[ChunkRef], u32, QueuePolicy); 5] = [
            ("no chunks", &[], 1, policy(1)),
            ("zero passes", &chunks(2), 0, policy(1)),
            ("zero chunks per task", &chunks(2), 1, policy(0)),
            ("too many chunks per task", &chunks(2), 1, policy(CHUNKS_PER_TASK_MAX + 1)),
            (
                "long path",
                &[ChunkRef { path: "p".repeat(5000), ..chunks(1)[0].clone() }],
                1,
                policy(1),
            ),
        ];
        for (what, chunks, passes, policy) in cases {
            let list = ChunkList::from_refs(chunks);
            assert!(Dataset::new("job", list, passes, policy).is_err(), "{what}");
        }
    }
}
