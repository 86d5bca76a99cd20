//! The job's dataset as first reported: its chunks, pass count and queue policy.

use serde::{Deserialize, Serialize};

/// The longest job name accepted.
pub const JOB_NAME_BYTES_MAX: usize = 256;
/// The most chunks one dataset may list; keeps a dataset report (one Raft entry) bounded.
pub const CHUNK_COUNT_MAX: usize = 1 << 20;
/// The longest chunk file path accepted.
pub const CHUNK_PATH_BYTES_MAX: usize = 4096;
/// The most chunks one task may hold; bounds every task assignment (a reply that client
/// sessions keep) whatever the leader's flags say.
pub const CHUNKS_PER_TASK_MAX: u32 = 1024;

/// One RecordIO chunk, located by the leader's scan of chunk headers.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ChunkRef {
    /// The RecordIO file holding the chunk.
    pub path: String,
    /// Where the chunk header starts in the file.
    pub offset: u64,
    /// The payload size from the header, so a reader can check it before reading.
    pub compressed_size: u32,
    /// The record count from the header, for progress and sanity checks.
    pub record_count: u32,
}

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
    pub(crate) chunks: Vec<ChunkRef>,
    pub(crate) passes: u32,
    pub(crate) policy: QueuePolicy,
}

impl Dataset {
    /// Validates a report; the error says what a person must fix.
    pub(crate) fn new(
        job: &str,
        chunks: &[ChunkRef],
        passes: u32,
        policy: QueuePolicy,
    ) -> Result<Self, String> {
        if job.len() > JOB_NAME_BYTES_MAX {
            return Err(format!("job name is longer than {JOB_NAME_BYTES_MAX} bytes"));
        }
        if chunks.is_empty() {
            return Err("the dataset has no chunks".to_string());
        }
        if chunks.len() > CHUNK_COUNT_MAX {
            return Err(format!(
                "{} chunks, more than the {CHUNK_COUNT_MAX} allowed",
                chunks.len()
            ));
        }
        if let Some(chunk) = chunks.iter().find(|chunk| chunk.path.len() > CHUNK_PATH_BYTES_MAX) {
            return Err(format!("chunk path {:?} is too long", chunk.path));
        }
        if passes == 0 {
            return Err("passes must be at least 1".to_string());
        }
        if policy.chunks_per_task == 0 || policy.chunks_per_task > CHUNKS_PER_TASK_MAX {
            return Err(format!("chunks_per_task must be 1 to {CHUNKS_PER_TASK_MAX}"));
        }
        Ok(Self { job: job.to_string(), chunks: chunks.to_vec(), passes, policy })
    }

    /// What differs between this dataset and a later report, or `None` if the report is the
    /// same job. The policy is not compared: it comes from the flags of whichever master leads,
    /// and the first one is kept.
    pub(crate) fn difference(&self, job: &str, chunks: &[ChunkRef], passes: u32) -> Option<String> {
        if self.job != job {
            return Some(format!("job name {job:?} differs from the reported {:?}", self.job));
        }
        if self.passes != passes {
            return Some(format!("passes {passes} differ from the reported {}", self.passes));
        }
        if self.chunks.len() != chunks.len() {
            let reported = self.chunks.len();
            return Some(format!("{} chunks differ from the {reported} reported", chunks.len()));
        }
        let index = self.chunks.iter().zip(chunks).position(|(first, later)| first != later)?;
        Some(format!("chunk {index} ({:?}) differs from the reported one", chunks[index].path))
    }

    /// How many tasks the chunks make: groups of `chunks_per_task`, the last one possibly short.
    pub(crate) fn task_count(&self) -> u64 {
        let per_task = self.chunks_per_task();
        u64::try_from(self.chunks.len().div_ceil(per_task)).expect("chunk count fits in u64")
    }

    /// The chunks of one task, `task < task_count()`.
    pub(crate) fn task_chunks(&self, task: u64) -> &[ChunkRef] {
        let per_task = self.chunks_per_task();
        let first =
            usize::try_from(task).expect("task id below task_count fits in usize") * per_task;
        let end = (first + per_task).min(self.chunks.len());
        &self.chunks[first..end]
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
        let dataset = Dataset::new("job", &chunks(chunk_count), 1, policy(chunks_per_task))
            .expect("valid dataset");
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
            assert!(Dataset::new("job", chunks, passes, policy).is_err(), "{what}");
        }
    }
}
