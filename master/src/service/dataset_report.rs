//! `ReportDataset` on the leader: the scanned chunk list goes into the log as batches small
//! enough for one entry each, in order; the state machine seals the job with the last one.
//! Concurrent or restarted reports are safe: the state checks and skips repeated chunks.

use super::proposer::Proposer;
use crate::dataset_scan::{
    reported_files, scan_dataset, DataRoot, ScanBudget, ScanError, ScanLimits, ScannedDataset,
    PATTERN_BYTES_MAX, PATTERN_COUNT_MAX,
};
use crate::replicated_state::ReplicatedState;
use crate::state::{ChunkList, Command, QueuePolicy, ReportedFile, Response};
use consensus::ConsensusNode;
use proto::master as pb;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::runtime::{Handle, RuntimeFlavor};
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
    pub(crate) chunks: ChunkList,
    pub(crate) shuffle_seed: Option<u64>,
}

/// Refuses a report without a job name, patterns or passes, or with too many or too long
/// patterns, before anything is looked at.
pub(crate) fn validate_report(request: &pb::ReportDatasetRequest) -> Result<(), Status> {
    if request.job.is_empty() {
        return Err(Status::invalid_argument("job: must name the job"));
    }
    if request.patterns.is_empty() {
        return Err(Status::invalid_argument("patterns: name at least one RecordIO file or glob"));
    }
    if request.passes == 0 {
        return Err(Status::invalid_argument("passes: must be at least 1"));
    }
    validate_patterns(&request.patterns)
}

/// Refuses a report with too many or too long patterns before anything is looked at.
fn validate_patterns(patterns: &[String]) -> Result<(), Status> {
    if patterns.len() > PATTERN_COUNT_MAX {
        let count = patterns.len();
        let message = format!("patterns: {count} given, at most {PATTERN_COUNT_MAX} accepted");
        return Err(Status::invalid_argument(message));
    }
    match patterns.iter().position(|pattern| pattern.len() > PATTERN_BYTES_MAX) {
        Some(index) => Err(Status::invalid_argument(format!(
            "patterns[{index}]: longer than {PATTERN_BYTES_MAX} bytes"
        ))),
        None => Ok(()),
    }
}

/// Runs the leader's dataset scans on the blocking pool, under `--data-root` and the scan
/// limits, each stopped as soon as the request that asked for it is dropped.
#[derive(Clone, Debug)]
pub(crate) struct DatasetScanner {
    root: Option<Arc<DataRoot>>,
    limits: ScanLimits,
    /// Scans whose thread has not finished yet: what tests watch to see a dropped one end.
    running: Arc<AtomicUsize>,
}

/// Sets the scan's cancel flag when dropped: with the RPC's future (client gone, deadline
/// passed), or when the scan's answer arrived and the flag no longer matters.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Counts one scan as running until its blocking thread drops it.
struct Running(Arc<AtomicUsize>);

impl Running {
    fn start(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Running(count.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl DatasetScanner {
    pub(crate) fn new(root: Option<DataRoot>, limits: ScanLimits) -> Self {
        Self { root: root.map(Arc::new), limits, running: Arc::new(AtomicUsize::new(0)) }
    }

    /// Expands, confines and indexes the dataset `patterns` name.
    pub(crate) async fn scan(&self, patterns: Vec<String>) -> Result<ScannedDataset, ScanError> {
        self.on_blocking_pool(move |root, budget| scan_dataset(&patterns, root, budget)).await
    }

    /// The files `patterns` name and their sizes, expanded and confined as a scan does.
    pub(crate) async fn files(
        &self,
        patterns: Vec<String>,
    ) -> Result<Vec<ReportedFile>, ScanError> {
        self.on_blocking_pool(move |root, budget| reported_files(&patterns, root, budget)).await
    }

    async fn on_blocking_pool<T: Send + 'static>(
        &self,
        work: impl FnOnce(Option<&DataRoot>, &mut ScanBudget) -> Result<T, ScanError> + Send + 'static,
    ) -> Result<T, ScanError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let _cancel_on_drop = CancelOnDrop(cancel.clone());
        let (root, limits) = (self.root.clone(), self.limits);
        let running = Running::start(&self.running);
        let scan = move || {
            let _running = running;
            let result = work(root.as_deref(), &mut ScanBudget::new(limits, cancel));
            if matches!(result, Err(ScanError::Cancelled)) {
                tracing::info!("dataset scan stopped: its request was dropped");
            }
            result
        };
        // On a current-thread runtime (the simulation's) the scan runs inline: a blocking
        // thread finishes at a moment of the operating system's choosing, amid whatever the
        // runtime is running then, so a simulated run would not replay (seed 5 with two jobs
        // ran two schedules). Masters run a multi-thread runtime and scan on the blocking pool.
        if Handle::current().runtime_flavor() == RuntimeFlavor::CurrentThread {
            return scan();
        }
        // A scan that panicked is a bug; the client learns only that the report failed.
        let scanned = tokio::task::spawn_blocking(scan).await;
        scanned.map_err(|error| ScanError::Interrupted { reason: error.to_string() })?
    }

    #[cfg(test)]
    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }
}

/// A RecordIO dataset report (`ReportDataset`, or `SubmitJob` with RecordIO files) on the
/// leader, its request already validated: answered from the state when it repeats the
/// accepted dataset, else scanned and proposed in batches under `policy`.
pub(crate) async fn report_dataset(
    proposer: &Proposer,
    scanner: &DatasetScanner,
    request: pb::ReportDatasetRequest,
    policy: QueuePolicy,
) -> Result<pb::ReportDatasetReply, Status> {
    super::admission::check_report(proposer.node(), &request.job, request.passes)?;
    if let Some(reply) = repeated_report(proposer.node(), &policy, scanner, &request).await {
        return Ok(reply);
    }
    // Dropping this future (the client went away) stops the scan: see `DatasetScanner`.
    let scanned = scanner.scan(request.patterns.clone()).await.map_err(scan_status)?;
    let (chunk_count, record_count) = (scanned.chunks.len() as u64, scanned.record_count);
    // The stamp is checked but not replicated: batches are idempotent by themselves, and one
    // stamp cannot answer several entries.
    let report = DatasetReport {
        job: request.job,
        passes: request.passes,
        policy,
        chunks: scanned.chunks,
        shuffle_seed: request.shuffle_seed,
    };
    match report_in_batches(proposer, report).await? {
        Response::DatasetAccepted { task_count, .. } => {
            Ok(pb::ReportDatasetReply { task_count, chunk_count, record_count })
        }
        other => Err(super::status_mapping::unexpected("ReportDataset", other)),
    }
}

/// The status a client gets for a refused scan.
pub(crate) fn scan_status(error: ScanError) -> Status {
    match error {
        ScanError::Cancelled => Status::cancelled(error.to_string()),
        ScanError::Interrupted { .. } => Status::internal(error.to_string()),
        error => Status::invalid_argument(format!("dataset: {error}")),
    }
}

/// The reply to a report that repeats the accepted dataset, answered from this leader's state
/// after listing the files (no header read, nothing proposed); `None`: scan and propose.
pub(crate) async fn repeated_report(
    node: &ConsensusNode<ReplicatedState>,
    policy: &QueuePolicy,
    scanner: &DatasetScanner,
    request: &pb::ReportDatasetRequest,
) -> Option<pb::ReportDatasetReply> {
    // The first report scans anyway; listing its files first would only repeat the glob.
    let accepted = |replicated: &ReplicatedState| {
        replicated.state().job_named(&request.job).is_some_and(|job| job.dataset_accepted())
    };
    if !node.read(accepted) {
        return None;
    }
    // A listing that fails (outside the root, a cap passed) takes the full path, which
    // refuses it with the reason.
    let files = scanner.files(request.patterns.clone()).await.ok()?;
    let accepted = node.read(|replicated| {
        let job = replicated.state().job_named(&request.job)?;
        let spec = (request.passes, request.shuffle_seed);
        job.repeated_report(&request.job, spec, policy, &files)
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
    let digest = report.chunks.digest();
    let stored = proposer.node().read(|replicated| {
        let job = replicated.state().job_named(&report.job);
        job.map_or(0, |job| job.loading_received(&report.job, total_chunks, digest))
    });
    let mut response = Response::Rejected { reason: "the dataset has no chunks".to_string() };
    // Batches the state already holds are skipped; the first one proposed may overlap them,
    // which the state checks and skips.
    let pending = batches(&report.chunks).into_iter().filter(|batch| batch.end as u64 > stored);
    for batch in pending {
        let command = Command::ReportDatasetBatch {
            job: report.job.clone(),
            passes: report.passes,
            policy: report.policy,
            total_chunks,
            digest,
            first_chunk: batch.start as u64,
            chunks: report.chunks.slice(batch),
        };
        let command = super::index_report::shuffled(command, report.shuffle_seed);
        response = proposer.propose(None, command).await?;
        if !matches!(response, Response::DatasetLoading { .. }) {
            // Accepted (the job is defined, perhaps by an earlier report) or refused.
            return Ok(response);
        }
    }
    Ok(response)
}

/// Cuts the list into consecutive batches of at most `BATCH_BYTES_MAX` (at least one chunk).
/// A batch stores each run of chunks of one file with the path once (`ChunkList`).
fn batches(chunks: &ChunkList) -> Vec<std::ops::Range<usize>> {
    let mut batches = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    let mut previous_path = None;
    for (index, (path, _)) in chunks.iter().enumerate() {
        let new_run = index == start || previous_path != Some(path);
        let path_bytes = if new_run { path.len() + PATH_OVERHEAD_BYTES } else { 0 };
        let mut size = CHUNK_OVERHEAD_BYTES + path_bytes;
        if index > start && bytes + size > BATCH_BYTES_MAX {
            batches.push(start..index);
            (start, bytes) = (index, 0);
            size = CHUNK_OVERHEAD_BYTES + path.len() + PATH_OVERHEAD_BYTES;
        }
        bytes += size;
        previous_path = Some(path);
    }
    if start < chunks.len() {
        batches.push(start..chunks.len());
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ChunkRef;
    use std::time::Duration;

    /// Dropping a scan's future (what tonic does when the client resets the stream or its
    /// deadline passes) stops the scan thread: a `**` glob over 40 levels of directories, each
    /// linked three times from the level above (3^40 paths, no loop, within the glob's depth
    /// bound), with the entry and time caps lifted so only cancellation can end it, finishes
    /// once its task is aborted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_scan_stops() {
        let directory = tempfile::tempdir().expect("temporary directory");
        std::fs::create_dir(directory.path().join("level0")).expect("the top level");
        for level in 0..40 {
            let below = directory.path().join(format!("level{}", level + 1));
            std::fs::create_dir_all(&below).expect("a level");
            for link in ["a", "b", "c"] {
                let at = directory.path().join(format!("level{level}")).join(link);
                std::os::unix::fs::symlink(&below, at).expect("symlink");
            }
        }
        let root = DataRoot::open(directory.path()).expect("open the root");
        let limits =
            ScanLimits { entry_count_max: u64::MAX, scan_ms_max: u64::MAX, ..Default::default() };
        let scanner = DatasetScanner::new(Some(root), limits);
        let scan = tokio::spawn({
            let scanner = scanner.clone();
            async move { scanner.scan(vec!["**/*.rio".to_string()]).await }
        });
        wait_until("the scan starts", || scanner.running() == 1).await;
        scan.abort();
        assert!(scan.await.expect_err("aborted").is_cancelled());
        wait_until("the scan thread ends", || scanner.running() == 0).await;
    }

    /// Polls `condition` every 10 ms, for at most a minute (a liveness bound, not a timing
    /// assertion: the scan it waits for would otherwise run for ever).
    async fn wait_until(what: &str, condition: impl Fn() -> bool) {
        for _ in 0..6000 {
            if condition() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{what}: not within a minute");
    }

    fn chunk(path_bytes: usize) -> ChunkRef {
        ChunkRef { path: "p".repeat(path_bytes), offset: 0, compressed_size: 1, record_count: 1 }
    }

    /// Batches keep the order, cover every chunk once and stay under the byte budget; a chunk
    /// larger than the budget still travels, alone.
    #[test]
    fn batches_cover_the_list_within_the_budget() {
        let check = |chunks: Vec<ChunkRef>, expected_lengths: &[usize]| {
            let list = ChunkList::from_refs(&chunks);
            let lengths: Vec<usize> = batches(&list).iter().map(|batch| batch.len()).collect();
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
