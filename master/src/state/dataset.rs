//! The job's dataset as first reported: its name, pass count and queue policy, and its kind:
//! RecordIO chunks the leader scanned, or an index range the trainers read themselves.

use serde::{Deserialize, Serialize};

use super::chunk_list::{ChunkList, ChunkSpan};
use super::index_range::IndexRange;
use client::TaskData;

pub use super::dataset_limits::{
    CHUNKS_PER_TASK_MAX, CHUNK_COUNT_MAX, CHUNK_PATH_BYTES_MAX, DATASET_PATH_BYTES_MAX,
    JOB_NAME_BYTES_MAX, TASK_COUNT_MAX,
};
pub use client::ChunkRef;

/// How the queue cuts, times and retries tasks. Stamped by the leader from its flags into the
/// first dataset report, then fixed for the job so every replica agrees.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuePolicy {
    /// How many consecutive chunks make one task; at least one. Meaningless for an index
    /// dataset, whose report names its own shard size.
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

/// The policy the state's unit tests run jobs under: one chunk a task, a 1 s minimum timeout
/// doubled, three failures allowed, failed tasks left failed.
#[cfg(test)]
pub(crate) fn test_policy() -> QueuePolicy {
    QueuePolicy {
        chunks_per_task: 1,
        task_timeout_min_ms: 1000,
        timeout_factor: 2,
        max_task_failures: 3,
        retry_failed_next_pass: false,
    }
}

/// The accepted dataset. Tasks are derived from it by id, so what they cover is stored once.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct Dataset {
    pub(crate) job: String,
    pub(crate) passes: u32,
    pub(crate) policy: QueuePolicy,
    pub(crate) kind: DatasetKind,
}

/// What a dataset's tasks cover.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) enum DatasetKind {
    /// RecordIO chunks the leader scanned; task i is chunks `i * chunks_per_task` onwards.
    RecordIo {
        chunks: ChunkList,
        /// [`chunks_digest`] of `chunks`: lets a repeated batched report be checked in O(1).
        digest: u64,
    },
    /// The indices `[0, size)` in shards; the masters never read the data.
    IndexRange(IndexRange),
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

/// Checks what a RecordIO report says about the job as a whole; the error says what a person
/// must fix.
pub(crate) fn check_spec(
    job: &str,
    chunk_count: u64,
    passes: u32,
    policy: &QueuePolicy,
) -> Result<(), String> {
    if chunk_count == 0 {
        return Err("the dataset has no chunks".to_string());
    }
    if chunk_count > CHUNK_COUNT_MAX as u64 {
        return Err(format!("{chunk_count} chunks, more than the {CHUNK_COUNT_MAX} allowed"));
    }
    check_job(job, passes)?;
    if policy.chunks_per_task == 0 || policy.chunks_per_task > CHUNKS_PER_TASK_MAX {
        return Err(format!("chunks_per_task must be 1 to {CHUNKS_PER_TASK_MAX}"));
    }
    Ok(())
}

/// Checks what a report of either kind says about the job: its name and pass count.
pub(crate) fn check_job(job: &str, passes: u32) -> Result<(), String> {
    if job.len() > JOB_NAME_BYTES_MAX {
        return Err(format!("job name is longer than {JOB_NAME_BYTES_MAX} bytes"));
    }
    if passes == 0 {
        return Err("passes must be at least 1".to_string());
    }
    Ok(())
}

/// What differs between the accepted dataset's name and passes and a report's, if anything.
pub(crate) fn spec_difference(dataset: &Dataset, job: &str, passes: u32) -> Option<String> {
    if dataset.job != job {
        return Some(format!("job name {job:?} differs from the reported {:?}", dataset.job));
    }
    if dataset.passes != passes {
        return Some(format!("passes {passes} differ from the reported {}", dataset.passes));
    }
    None
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
    /// Validates a RecordIO report; the error says what a person must fix.
    pub(crate) fn recordio(
        job: &str,
        chunks: ChunkList,
        passes: u32,
        policy: QueuePolicy,
    ) -> Result<Self, String> {
        check_spec(job, chunks.len() as u64, passes, &policy)?;
        check_chunks(&chunks)?;
        let digest = list_digest(&chunks);
        let kind = DatasetKind::RecordIo { chunks, digest };
        Ok(Self { job: job.to_string(), passes, policy, kind })
    }

    /// Validates an index report; the error names the field a person must fix.
    pub(crate) fn index_range(
        job: &str,
        size: u64,
        shard_size: u64,
        passes: u32,
        policy: QueuePolicy,
    ) -> Result<Self, String> {
        check_job(job, passes)?;
        let kind = DatasetKind::IndexRange(IndexRange::new(size, shard_size)?);
        Ok(Self { job: job.to_string(), passes, policy, kind })
    }

    /// How many tasks the dataset makes: groups of `chunks_per_task` chunks or shards of
    /// indices, the last one possibly short.
    pub(crate) fn task_count(&self) -> u64 {
        match &self.kind {
            DatasetKind::RecordIo { chunks, .. } => {
                let per_task = self.chunks_per_task();
                u64::try_from(chunks.len().div_ceil(per_task)).expect("chunk count fits in u64")
            }
            DatasetKind::IndexRange(range) => range.task_count(),
        }
    }

    /// How many RecordIO chunks the dataset stores (none for an index range).
    pub(crate) fn chunk_count(&self) -> u64 {
        match &self.kind {
            DatasetKind::RecordIo { chunks, .. } => chunks.len() as u64,
            DatasetKind::IndexRange(_) => 0,
        }
    }

    /// The bytes of file paths the dataset stores (none for an index range).
    pub(crate) fn path_bytes(&self) -> u64 {
        match &self.kind {
            DatasetKind::RecordIo { chunks, .. } => chunks.path_bytes(),
            DatasetKind::IndexRange(_) => 0,
        }
    }

    /// What task `task < task_count()` covers: its chunks, or its indices.
    pub(crate) fn task_data(&self, task_id: u64) -> TaskData {
        match &self.kind {
            DatasetKind::RecordIo { chunks, .. } => {
                let per_task = self.chunks_per_task();
                let first = usize::try_from(task_id)
                    .map_or(usize::MAX, |task_id| task_id.saturating_mul(per_task));
                let first = first.min(chunks.len());
                let end = first.saturating_add(per_task).min(chunks.len());
                TaskData::Chunks(chunks.refs(first..end))
            }
            DatasetKind::IndexRange(range) => {
                let indices = range.task_range(task_id);
                TaskData::IndexRange { start: indices.start, end: indices.end }
            }
        }
    }

    fn chunks_per_task(&self) -> usize {
        usize::try_from(self.policy.chunks_per_task).expect("u32 fits in usize")
    }
}

impl DatasetKind {
    /// The kind for a person, in refusals that name what differs.
    pub(crate) fn describe(&self) -> String {
        match self {
            DatasetKind::RecordIo { chunks, .. } => {
                format!("RecordIO files ({} chunks)", chunks.len())
            }
            DatasetKind::IndexRange(range) => {
                format!("an index range (size {}, shard size {})", range.size, range.shard_size())
            }
        }
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
        let dataset =
            Dataset::recordio("job", list, 1, policy(chunks_per_task)).expect("valid dataset");
        let offsets = |task_id| match dataset.task_data(task_id) {
            TaskData::Chunks(chunks) => chunks.iter().map(|chunk| chunk.offset).collect(),
            other => panic!("a RecordIO task covers chunks, not {other:?}"),
        };
        let actual: Vec<Vec<u64>> = (0..dataset.task_count()).map(offsets).collect();
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
            assert!(Dataset::recordio("job", list, passes, policy).is_err(), "{what}");
        }
    }
}
