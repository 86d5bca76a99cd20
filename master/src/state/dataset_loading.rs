//! A dataset too large for one log entry arrives as batches of chunks (entries stay far below
//! sled's 128 KiB blob threshold). `DatasetLoading` holds what has arrived until the batch that
//! completes the list seals the job. Reporting is idempotent: a batch that repeats chunks
//! already stored (a client's retry, or a new leader starting the report over) is checked
//! against them, and a repeat of the accepted dataset is checked by its digest.

use serde::{Deserialize, Serialize};

use super::dataset::{check_chunks, check_spec, chunks_digest, ChunkRef, Dataset, QueuePolicy};
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
    pub(crate) chunks: &'a [ChunkRef],
}

/// The chunks received so far of a dataset whose report is not complete.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct DatasetLoading {
    pub(crate) job: String,
    pub(crate) passes: u32,
    pub(crate) policy: QueuePolicy,
    pub(crate) total_chunks: u64,
    pub(crate) digest: u64,
    pub(crate) chunks: Vec<ChunkRef>,
}

/// Applies one batch: stores its new chunks, and seals the job when the list is complete.
pub(crate) fn apply_batch(
    job: &mut Option<Job>,
    loading: &mut Option<DatasetLoading>,
    batch: &Batch<'_>,
) -> Response {
    if let Some(existing) = job {
        return repeat_of_accepted(existing, batch);
    }
    if let Err(reason) = check_batch(batch) {
        return Response::Rejected { reason };
    }
    let current = match loading {
        Some(current) => current,
        None if batch.first_chunk == 0 => loading.insert(DatasetLoading::start(batch)),
        None => {
            let reason =
                format!("batch starts at chunk {}; a report starts at chunk 0", batch.first_chunk);
            return Response::Rejected { reason };
        }
    };
    if let Err(reason) = current.append(batch) {
        return Response::Rejected { reason };
    }
    let received = current.chunks.len() as u64;
    if received < current.total_chunks {
        return Response::DatasetLoading { received, total: current.total_chunks };
    }
    let complete = loading.take().expect("the loading dataset was just appended to");
    seal(job, complete)
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
    match difference(&existing.dataset, batch) {
        None => existing.accepted(),
        Some(difference) => Response::Rejected {
            reason: format!("a different dataset was already reported: {difference}"),
        },
    }
}

/// What differs between the accepted dataset and a batch, naming the first differing chunk
/// of the batch when there is one, else the digest of the whole list.
fn difference(dataset: &Dataset, batch: &Batch<'_>) -> Option<String> {
    if dataset.job != batch.job {
        return Some(format!(
            "job name {:?} differs from the reported {:?}",
            batch.job, dataset.job
        ));
    }
    if dataset.passes != batch.passes {
        return Some(format!(
            "passes {} differ from the reported {}",
            batch.passes, dataset.passes
        ));
    }
    let reported = dataset.chunks.len() as u64;
    if reported != batch.total_chunks {
        return Some(format!("{} chunks differ from the {reported} reported", batch.total_chunks));
    }
    let first = batch.first_chunk as usize;
    let stored = dataset.chunks.get(first..).unwrap_or_default();
    if let Some(index) = batch.chunks.iter().zip(stored).position(|(later, first)| later != first) {
        let chunk = &batch.chunks[index];
        return Some(format!(
            "chunk {} ({:?}) differs from the reported one",
            first + index,
            chunk.path
        ));
    }
    (dataset.digest != batch.digest)
        .then(|| "the chunk list differs (its digest does not match)".to_string())
}

fn seal(job: &mut Option<Job>, complete: DatasetLoading) -> Response {
    let digest = chunks_digest(&complete.chunks);
    if digest != complete.digest {
        let reason = format!(
            "the assembled chunk list has digest {digest:#x}, the report said {:#x}",
            complete.digest
        );
        return Response::Rejected { reason };
    }
    match Dataset::new(&complete.job, &complete.chunks, complete.passes, complete.policy) {
        Ok(dataset) => job.insert(Job::new(dataset)).accepted(),
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
            chunks: Vec::new(),
        }
    }

    /// Adds the batch's chunks that are new; the ones already stored must be equal.
    fn append(&mut self, batch: &Batch<'_>) -> Result<(), String> {
        if self.job != batch.job
            || self.passes != batch.passes
            || self.total_chunks != batch.total_chunks
            || self.digest != batch.digest
        {
            return Err(format!(
                "another dataset is being reported: job {:?}, {} passes, {} chunks",
                self.job, self.passes, self.total_chunks
            ));
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
        if let Some(index) =
            (0..overlap).find(|index| self.chunks[first + index] != batch.chunks[*index])
        {
            return Err(format!("chunk {} differs from the one already reported", first + index));
        }
        self.chunks.extend_from_slice(&batch.chunks[overlap..]);
        Ok(())
    }
}
