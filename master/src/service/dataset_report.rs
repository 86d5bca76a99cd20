//! `ReportDataset` on the leader: the scanned chunk list goes into the log as batches small
//! enough for one entry each, in order; the state machine seals the job with the last one.
//! Concurrent or restarted reports are safe: the state checks and skips repeated chunks.

use super::proposer::Proposer;
use crate::dataset_scan::reported_files;
use crate::replicated_state::ReplicatedState;
use crate::state::{chunks_digest, ChunkList, ChunkRef, Command, QueuePolicy, Response};
use consensus::ConsensusNode;
use proto::master as pb;
use tonic::Status;

/// The encoded chunk bytes one batch carries at most: far below the log's entry limit.
pub(crate) const BATCH_BYTES_MAX: usize = 32 << 10;
/// Bytes a chunk takes in a batch besides its path (file index, offset, sizes as varints).
const CHUNK_OVERHEAD_BYTES: usize = 24;
/// Bytes a path takes in a batch besides its text (its length prefix), once per run of chunks.
const PATH_OVERHEAD_BYTES: usize = 8;

/// What a dataset report needs from the request, the leader's flags and the scan.
pub(crate) struct DatasetReport {
    pub(crate) job: String,
    pub(crate) passes: u32,
    pub(crate) policy: QueuePolicy,
    pub(crate) chunks: Vec<ChunkRef>,
}

/// The reply to a report that repeats the accepted dataset, answered from this leader's state
/// after listing the files (no header read, nothing proposed); `None`: scan and propose.
pub(crate) async fn repeated_report(
    node: &ConsensusNode<ReplicatedState>,
    policy: &QueuePolicy,
    request: &pb::ReportDatasetRequest,
) -> Option<pb::ReportDatasetReply> {
    // The first report scans anyway; listing its files first would only repeat the glob.
    if !node.read(|replicated| replicated.state().dataset_accepted()) {
        return None;
    }
    let patterns = request.patterns.clone();
    let files = tokio::task::spawn_blocking(move || reported_files(&patterns)).await.ok()??;
    let accepted = node.read(|replicated| {
        replicated.state().repeated_report(&request.job, request.passes, policy, &files)
    })?;
    Some(pb::ReportDatasetReply {
        task_count: accepted.task_count,
        chunk_count: accepted.chunk_count,
        record_count: accepted.record_count,
    })
}

/// Proposes the batches in order; returns the state's answer to the last one proposed.
pub(crate) async fn report_in_batches(
    proposer: &Proposer,
    report: DatasetReport,
) -> Result<Response, Status> {
    let total_chunks = report.chunks.len() as u64;
    let digest = chunks_digest(&report.chunks);
    let mut first_chunk = 0;
    let mut response = Response::Rejected { reason: "the dataset has no chunks".to_string() };
    for batch in batches(&report.chunks) {
        let command = Command::ReportDatasetBatch {
            job: report.job.clone(),
            passes: report.passes,
            policy: report.policy,
            total_chunks,
            digest,
            first_chunk,
            chunks: ChunkList::from_refs(batch),
        };
        response = proposer.propose(None, command).await?;
        if !matches!(response, Response::DatasetLoading { .. }) {
            // Accepted (the job is defined, perhaps by an earlier report) or refused.
            return Ok(response);
        }
        first_chunk += batch.len() as u64;
    }
    Ok(response)
}

/// Cuts the list into consecutive batches of at most `BATCH_BYTES_MAX` (at least one chunk).
/// A batch stores each run of chunks of one file with the path once (`ChunkList`).
fn batches(chunks: &[ChunkRef]) -> Vec<&[ChunkRef]> {
    let mut batches = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (index, chunk) in chunks.iter().enumerate() {
        let new_run = index == start || chunks[index - 1].path != chunk.path;
        let path_bytes = if new_run { chunk.path.len() + PATH_OVERHEAD_BYTES } else { 0 };
        let mut size = CHUNK_OVERHEAD_BYTES + path_bytes;
        if index > start && bytes + size > BATCH_BYTES_MAX {
            batches.push(&chunks[start..index]);
            (start, bytes) = (index, 0);
            size = CHUNK_OVERHEAD_BYTES + chunk.path.len() + PATH_OVERHEAD_BYTES;
        }
        bytes += size;
    }
    if start < chunks.len() {
        batches.push(&chunks[start..]);
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(path_bytes: usize) -> ChunkRef {
        ChunkRef { path: "p".repeat(path_bytes), offset: 0, compressed_size: 1, record_count: 1 }
    }

    /// Batches keep the order, cover every chunk once and stay under the byte budget; a chunk
    /// larger than the budget still travels, alone.
    #[test]
    fn batches_cover_the_list_within_the_budget() {
        let check = |chunks: Vec<ChunkRef>, expected_lengths: &[usize]| {
            let lengths: Vec<usize> = batches(&chunks).iter().map(|batch| batch.len()).collect();
            assert_eq!(lengths, expected_lengths);
        };
        // One file: its path is paid once per batch.
        let path = 8 + PATH_OVERHEAD_BYTES;
        let per_batch = (BATCH_BYTES_MAX - path) / CHUNK_OVERHEAD_BYTES;
        check(vec![], &[]);
        check(vec![chunk(8); 3], &[3]);
        check(vec![chunk(8); per_batch * 2 + 1], &[per_batch, per_batch, 1]);
        check(vec![chunk(8), chunk(BATCH_BYTES_MAX), chunk(8)], &[1, 1, 1]);
    }
}
