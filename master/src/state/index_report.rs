//! `ReportIndexDataset`: an index dataset arrives whole in one command (two numbers), so there
//! is nothing to load. The first report of either kind wins: an identical repeat gets the
//! accepted answer, anything else is refused naming what differs. A RecordIO report still
//! loading in batches keeps its place as it does against another RecordIO report, until it
//! has been idle for `LOADING_IDLE_MS_MAX`.

use super::dataset::{spec_difference, Dataset, DatasetKind, QueuePolicy};
use super::dataset_loading::DatasetLoading;
use super::job::Job;
use super::response::Response;

/// One index report, as `Command::ReportIndexDataset` carries it.
pub(crate) struct IndexReport<'a> {
    pub(crate) job: &'a str,
    pub(crate) size: u64,
    pub(crate) shard_size: u64,
    pub(crate) passes: u32,
    pub(crate) policy: QueuePolicy,
    pub(crate) shuffle: Option<u64>,
}

/// Defines the job from `report`, or answers a repeat, or refuses.
pub(crate) fn apply_index_report(
    job: &mut Option<Job>,
    loading: &mut Option<DatasetLoading>,
    report: &IndexReport<'_>,
    now_ms: u64,
) -> Response {
    if let Some(existing) = job {
        let difference = difference(&existing.dataset, report);
        return match difference.or_else(|| existing.shuffle_difference(report.shuffle)) {
            None => existing.accepted(),
            Some(difference) => existing.refuse_other_dataset(&difference),
        };
    }
    let (size, shard_size) = (report.size, report.shard_size);
    let dataset =
        match Dataset::index_range(report.job, size, shard_size, report.passes, report.policy) {
            Ok(dataset) => dataset,
            Err(reason) => return Response::Rejected { reason },
        };
    if let Some(current) = loading {
        if !current.is_idle(now_ms) {
            return Response::Rejected { reason: current.in_progress() };
        }
        *loading = None;
    }
    job.insert(Job::new(dataset, report.shuffle)).accepted()
}

/// What differs between the accepted dataset and an index report; `None` when it repeats it.
/// The policy is the leader's, not the reporter's, so it is not compared (as for RecordIO).
fn difference(dataset: &Dataset, report: &IndexReport<'_>) -> Option<String> {
    let DatasetKind::IndexRange(range) = &dataset.kind else {
        return Some(format!(
            "the job's dataset is {}, and this report is an index range",
            dataset.kind.describe()
        ));
    };
    if let Some(difference) = spec_difference(dataset, report.job, report.passes) {
        return Some(difference);
    }
    if range.size != report.size {
        return Some(format!("size {} differs from the reported {}", report.size, range.size));
    }
    if range.shard_size() != report.shard_size {
        return Some(format!(
            "shard_size {} differs from the reported {}",
            report.shard_size,
            range.shard_size()
        ));
    }
    None
}
