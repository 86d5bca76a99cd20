//! A dataset too large for one log entry arrives as batches of chunks (entries stay far below
//! sled's 128 KiB blob threshold). `DatasetLoading` holds what has arrived until the batch that
//! completes the list seals the job. Reporting is idempotent: a batch that repeats chunks
//! already stored (a client's retry, or a new leader starting the report over) is checked
//! against them, and a repeat of the accepted dataset is checked by its digest.
//!
//! A report that stops half-way (its leader crashed, its client gave up) must not block the
//! job forever: once no batch arrived for [`LOADING_IDLE_MS_MAX`] of state time, a different
//! report starting at chunk 0 replaces it.

use serde::{Deserialize, Serialize};

use super::chunk_list::ChunkList;
use super::dataset::{
    check_chunks, check_path_bytes, check_spec, list_digest, spec_difference, Dataset, DatasetKind,
    QueuePolicy,
};
use super::job::Job;
use super::response::Response;

/// One batch of a dataset report, as `Command::ReportDatasetBatch` carries it.
pub(crate) struct Batch<'a> {
    pub(crate) job: &'a str,
    pub(crate) passes: u32,
    pub(crate) policy: QueuePolicy,
    pub(crate) total_chunks: u64,
    pub(crate) digest: u64,
    pub(crate) first_chunk: u64,
    pub(crate) chunks: &'a ChunkList,
    /// The report's shuffle seed: the batch that completes the list fixes the job's.
    pub(crate) shuffle: Option<u64>,
}

/// How long an unfinished report keeps its place against a different one: far longer than a
/// client's retries of one report (`MasterClient`'s call deadline, 30 s) and a leader change.
pub const LOADING_IDLE_MS_MAX: u64 = 120_000;

/// The chunks received so far of a dataset whose report is not complete.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct DatasetLoading {
    pub(crate) job: String,
    pub(crate) passes: u32,
    pub(crate) policy: QueuePolicy,
    pub(crate) total_chunks: u64,
    pub(crate) digest: u64,
    pub(crate) chunks: ChunkList,
    /// When the last batch was applied (state clock): an idle report can be abandoned.
    pub(crate) last_batch_ms: u64,
}

/// Applies one batch: stores its new chunks, and seals the job when the list is complete.
pub(crate) fn apply_batch(
    job: &mut Option<Job>,
    loading: &mut Option<DatasetLoading>,
    batch: &Batch<'_>,
    now_ms: u64,
) -> Response {
    if let Some(existing) = job {
        return repeat_of_accepted(existing, batch);
    }
    if let Err(reason) = check_batch(batch) {
        return Response::Rejected { reason };
    }
    abandon_if_idle(loading, batch, now_ms);
    let current = match loading {
        Some(current) => current,
        None if batch.first_chunk == 0 => loading.insert(DatasetLoading::start(batch)),
        None => {
            let reason =
                format!("batch starts at chunk {}; a report starts at chunk 0", batch.first_chunk);
            return Response::Rejected { reason };
        }
    };
    if let Err(reason) = current.append(batch, now_ms) {
        return Response::Rejected { reason };
    }
    let received = current.chunks.len() as u64;
    if received < current.total_chunks {
        return Response::DatasetLoading { received, total: current.total_chunks };
    }
    let complete = loading.take().expect("the loading dataset was just appended to");
    seal(job, complete, batch.shuffle)
}

/// Drops an unfinished report of another dataset that has been idle for too long, when this
/// batch starts a report of its own.
fn abandon_if_idle(loading: &mut Option<DatasetLoading>, batch: &Batch<'_>, now_ms: u64) {
    let Some(current) = loading else { return };
    if batch.first_chunk == 0 && !current.same_spec(batch) && current.is_idle(now_ms) {
        *loading = None;
    }
}

fn check_batch(batch: &Batch<'_>) -> Result<(), String> {
    check_spec(batch.job, batch.total_chunks, batch.passes, &batch.policy)?;
    check_chunks(batch.chunks)?;
    let end = batch.first_chunk.checked_add(batch.chunks.len() as u64);
    if end.is_none_or(|end| end > batch.total_chunks) {
        return Err(format!(
            "batch of {} chunks at chunk {} runs past the {} chunks of the dataset",
            batch.chunks.len(),
            batch.first_chunk,
            batch.total_chunks
        ));
    }
    Ok(())
}

/// A report of a job that is already accepted succeeds only if it names the same dataset.
fn repeat_of_accepted(existing: &Job, batch: &Batch<'_>) -> Response {
    let difference = difference(&existing.dataset, batch);
    match difference.or_else(|| existing.shuffle_difference(batch.shuffle)) {
        None => existing.accepted(),
        Some(difference) => existing.refuse_other_dataset(&difference),
    }
}

/// What differs between the accepted dataset and a batch, naming the first differing chunk
/// of the batch when there is one, else the digest of the whole list.
fn difference(dataset: &Dataset, batch: &Batch<'_>) -> Option<String> {
    let DatasetKind::RecordIo { chunks, digest } = &dataset.kind else {
        return Some(format!(
            "the job's dataset is {}, and this report lists RecordIO files",
            dataset.kind.describe()
        ));
    };
    if let Some(difference) = spec_difference(dataset, batch.job, batch.passes) {
        return Some(difference);
    }
    let reported = chunks.len() as u64;
    if reported != batch.total_chunks {
        return Some(format!("{} chunks differ from the {reported} reported", batch.total_chunks));
    }
    let first = usize::try_from(batch.first_chunk).unwrap_or(usize::MAX);
    let differing = batch
        .chunks
        .iter()
        .enumerate()
        .find(|(index, chunk)| !chunks.matches(first.saturating_add(*index), *chunk));
    if let Some((index, (path, span))) = differing {
        let index = first + index;
        let reported = chunks.get(index).map_or_else(
            || "none".to_string(),
            |chunk| format!("{:?} at offset {}", chunk.path, chunk.offset),
        );
        return Some(format!(
            "chunk {index} ({path:?} at offset {}) differs from the reported one ({reported})",
            span.offset
        ));
    }
    (*digest != batch.digest)
        .then(|| "the chunk list differs (its digest does not match)".to_string())
}

fn seal(job: &mut Option<Job>, complete: DatasetLoading, shuffle: Option<u64>) -> Response {
    let digest = list_digest(&complete.chunks);
    if digest != complete.digest {
        let reason = format!(
            "the assembled chunk list has digest {digest:#x}, the report said {:#x}",
            complete.digest
        );
        return Response::Rejected { reason };
    }
    match Dataset::recordio(&complete.job, complete.chunks, complete.passes, complete.policy) {
        Ok(dataset) => job.insert(Job::new(dataset, shuffle)).accepted(),
        Err(reason) => Response::Rejected { reason },
    }
}

impl DatasetLoading {
    fn start(batch: &Batch<'_>) -> Self {
        Self {
            job: batch.job.to_string(),
            passes: batch.passes,
            policy: batch.policy,
            total_chunks: batch.total_chunks,
            digest: batch.digest,
            chunks: ChunkList::default(),
            last_batch_ms: 0,
        }
    }

    /// Whether no batch arrived for longer than [`LOADING_IDLE_MS_MAX`] of state time: a
    /// different report may then take its place.
    pub(crate) fn is_idle(&self, now_ms: u64) -> bool {
        now_ms.saturating_sub(self.last_batch_ms) > LOADING_IDLE_MS_MAX
    }

    /// Why a different report is refused while this one loads.
    pub(crate) fn in_progress(&self) -> String {
        format!(
            "another dataset is being reported: job {:?}, {} passes, {} chunks; it is \
             abandoned once no batch of it arrives for {LOADING_IDLE_MS_MAX} ms",
            self.job, self.passes, self.total_chunks
        )
    }

    fn same_spec(&self, batch: &Batch<'_>) -> bool {
        self.job == batch.job
            && self.passes == batch.passes
            && self.policy == batch.policy
            && self.total_chunks == batch.total_chunks
            && self.digest == batch.digest
    }

    /// Adds the batch's chunks that are new; the ones already stored must be equal.
    fn append(&mut self, batch: &Batch<'_>, now_ms: u64) -> Result<(), String> {
        if !self.same_spec(batch) {
            return Err(self.in_progress());
        }
        let received = self.chunks.len() as u64;
        if batch.first_chunk > received {
            return Err(format!(
                "batch starts at chunk {}, but only {received} chunks have arrived",
                batch.first_chunk
            ));
        }
        let first = batch.first_chunk as usize;
        let overlap = (self.chunks.len() - first).min(batch.chunks.len());
        let differing = batch
            .chunks
            .iter()
            .take(overlap)
            .enumerate()
            .find(|(index, chunk)| !self.chunks.matches(first + index, *chunk));
        if let Some((index, _)) = differing {
            return Err(format!("chunk {} differs from the one already reported", first + index));
        }
        check_path_bytes(self.chunks.path_bytes_after_extending(batch.chunks, overlap))?;
        self.chunks.extend_from(batch.chunks, overlap);
        self.last_batch_ms = now_ms;
        Ok(())
    }
}
