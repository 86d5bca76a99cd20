//! What a simulated job trains on, drawn from the seed: a RecordIO file of its own (the
//! masters scan it) or, for some seeds, an index range (two numbers; the masters read
//! nothing), and what each task of it must cover.

use std::ops::Range;
use std::path::PathBuf;

use client::TaskData;

use crate::rng::SimRng;

/// The name of a run's first (in most runs, only) job.
pub const SIMULATED_JOB: &str = "simulated";
/// The seed stream that draws the dataset.
const DATASET_STREAM: u64 = 6;
/// Seeds that run an index-range job instead of a RecordIO one.
const INDEX_RANGE_PERCENT: u64 = 35;
/// The largest shard size drawn: wide enough that shards cross no special boundary.
const SHARD_SIZE_MAX: u64 = 1_000;

/// A run's dataset. Both kinds make `task_count` tasks, so the rest of a run is alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimDataset {
    /// A RecordIO file of one-record chunks, one chunk per task.
    RecordIo,
    /// The indices `[0, size)` in shards of `shard_size`; the last shard is short unless the
    /// size happens to be a multiple.
    IndexRange { size: u64, shard_size: u64 },
}

impl SimDataset {
    /// The dataset of `seed`'s (first) job, of `task_count` tasks (at least one).
    pub fn draw(seed: u64, task_count: u64) -> Self {
        Self::draw_from(&mut SimRng::derive(seed, DATASET_STREAM), task_count)
    }

    /// A dataset of `task_count` tasks (at least one) drawn from `rng`.
    pub fn draw_from(rng: &mut SimRng, task_count: u64) -> Self {
        if !rng.percent(INDEX_RANGE_PERCENT) {
            return SimDataset::RecordIo;
        }
        let shard_size = rng.range(1, SHARD_SIZE_MAX + 1);
        let last_shard_size = rng.range(1, shard_size + 1);
        let size = (task_count.max(1) - 1) * shard_size + last_shard_size;
        SimDataset::IndexRange { size, shard_size }
    }

    /// Why `data`, handed out as task `task_id` of a job whose RecordIO file (if it has one)
    /// is `recordio_path`, is not what that task covers; `None` when it is: one one-record
    /// chunk of the job's own file, the task's shard of an index job.
    pub fn wrong_data(&self, recordio_path: &str, task_id: u64, data: &TaskData) -> Option<String> {
        match (self, data) {
            (SimDataset::RecordIo, TaskData::Chunks(chunks))
                if chunks.len() == 1 && chunks[0].record_count == 1 =>
            {
                (chunks[0].path != recordio_path).then(|| {
                    format!("a chunk of {}, not of the job's {recordio_path}", chunks[0].path)
                })
            }
            (SimDataset::IndexRange { size, shard_size }, TaskData::IndexRange { start, end }) => {
                let expected = shard(*size, *shard_size, task_id);
                (expected != (*start..*end))
                    .then(|| format!("indices {start}..{end}, but its shard is {expected:?}"))
            }
            (dataset, data) => Some(format!("{data:?} in a job of {dataset:?}")),
        }
    }
}

/// Where a RecordIO job named `job` of `task_count` tasks keeps its file: a path that depends
/// only on these (it is in the replicated dataset report, and a replayed seed must replicate
/// the same bytes).
pub fn recordio_path(job: &str, task_count: u64) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("raftrain-simulation-{task_count}-tasks"));
    dir.join(format!("{job}.recordio"))
}

/// Task `task_id`'s shard: `[id * shard_size, min(size, (id + 1) * shard_size))`, computed
/// here independently of the master.
fn shard(size: u64, shard_size: u64, task_id: u64) -> Range<u64> {
    let start = task_id.saturating_mul(shard_size);
    start..start.saturating_add(shard_size).min(size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::ChunkRef;

    /// Some seeds draw index jobs and others RecordIO; an index job makes `task_count` shards,
    /// its last one at most a shard long.
    #[test]
    fn seeds_draw_both_kinds_with_task_count_shards() {
        let drawn: Vec<SimDataset> = (0..100).map(|seed| SimDataset::draw(seed, 20)).collect();
        assert!(drawn.contains(&SimDataset::RecordIo));
        let ranges: Vec<(u64, u64)> = drawn
            .iter()
            .filter_map(|dataset| match dataset {
                SimDataset::IndexRange { size, shard_size } => Some((*size, *shard_size)),
                SimDataset::RecordIo => None,
            })
            .collect();
        assert!(!ranges.is_empty());
        for (size, shard_size) in ranges {
            assert_eq!(size.div_ceil(shard_size), 20, "{size} by {shard_size}");
        }
    }

    /// The right data passes; another shard, a chunk in an index job, a range in a RecordIO
    /// job, a chunk of another job's file and a chunk list of the wrong length are named.
    #[test]
    fn wrong_data_is_named() {
        let index = SimDataset::IndexRange { size: 25, shard_size: 10 };
        let range = |start, end| TaskData::IndexRange { start, end };
        let chunk = ChunkRef { path: "f".into(), offset: 0, compressed_size: 8, record_count: 1 };
        let wrong = |dataset: SimDataset, task_id, data| dataset.wrong_data("f", task_id, &data);
        assert_eq!(wrong(index, 0, range(0, 10)), None);
        assert_eq!(wrong(index, 2, range(20, 25)), None, "the short last shard");
        assert!(wrong(index, 2, range(20, 30)).is_some(), "past the size");
        assert!(wrong(index, 1, range(0, 10)).is_some(), "another task's shard");
        assert!(wrong(index, 0, TaskData::Chunks(vec![chunk.clone()])).is_some());
        let recordio = SimDataset::RecordIo;
        assert_eq!(wrong(recordio, 3, TaskData::Chunks(vec![chunk.clone()])), None);
        let elsewhere = recordio.wrong_data("g", 3, &TaskData::Chunks(vec![chunk.clone()]));
        assert!(elsewhere.is_some(), "another job's file");
        assert!(wrong(recordio, 3, TaskData::Chunks(vec![chunk.clone(), chunk])).is_some());
        assert!(wrong(recordio, 3, range(0, 1)).is_some());
    }
}
