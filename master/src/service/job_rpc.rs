//! The job RPCs that are more than one command: `SubmitJob` (a spec checked field by field,
//! then the same report paths as `ReportDataset` and `ReportIndexDataset` under the spec's
//! policy) and `ListJobs` (a summary of every job from the applied state).

use super::dataset_report::{report_dataset, validate_report, DatasetScanner};
use super::index_report::report_index_dataset;
use super::proposer::Proposer;
use crate::leader::ReloadFailures;
use crate::replicated_state::ReplicatedState;
use crate::state::{JobState, QueuePolicy};
use proto::master as pb;
use tonic::Status;

/// Submits a job: its dataset reported under the masters' policy with the spec's overrides.
pub(crate) async fn submit_job(
    proposer: &Proposer,
    scanner: &DatasetScanner,
    flags: QueuePolicy,
    request: pb::SubmitJobRequest,
) -> Result<pb::ReportDatasetReply, Status> {
    let policy = with_overrides(flags, request.policy.as_ref());
    super::admission::check_policy(&policy)?;
    // A restart was made by the caller (`job_scope::restart_if_asked`); the report after it
    // is an ordinary one.
    let (job, stamp, passes, restart) = (request.name, request.stamp, request.passes, false);
    let shuffle_seed = request.shuffle_seed;
    match request.dataset {
        Some(pb::submit_job_request::Dataset::Recordio(dataset)) => {
            let patterns = dataset.patterns;
            let report =
                pb::ReportDatasetRequest { stamp, job, patterns, passes, restart, shuffle_seed };
            super::conversions::stamp(report.stamp)?;
            validate_report(&report)?;
            report_dataset(proposer, scanner, report, policy).await
        }
        Some(pb::submit_job_request::Dataset::Index(dataset)) => {
            let (size, shard_size) = (dataset.size, dataset.shard_size);
            let report = pb::ReportIndexDatasetRequest {
                stamp,
                job,
                size,
                shard_size,
                passes,
                restart,
                shuffle_seed,
            };
            report_index_dataset(proposer, policy, report).await
        }
        None => Err(Status::invalid_argument(
            "dataset: give RecordIO files (recordio.patterns) or an index range (index.size)",
        )),
    }
}

/// Refuses a spec that sets a queue policy value other than job `job`'s (`accepted`), naming
/// the first such field: the same spec again is a repeat, a value given and different is not.
pub(crate) fn check_overrides(
    job: &str,
    accepted: &QueuePolicy,
    overrides: Option<&pb::QueuePolicyOverrides>,
) -> Result<(), Status> {
    let Some(spec) = overrides else { return Ok(()) };
    let given = [
        ("chunks-per-task", spec.chunks_per_task.map(u64::from), accepted.chunks_per_task.into()),
        ("task-timeout-min-ms", spec.task_timeout_min_ms, accepted.task_timeout_min_ms),
        ("timeout-factor", spec.timeout_factor.map(u64::from), accepted.timeout_factor.into()),
        (
            "max-task-failures",
            spec.max_task_failures.map(u64::from),
            accepted.max_task_failures.into(),
        ),
        (
            "retry-failed-next-pass",
            spec.retry_failed_next_pass.map(u64::from),
            accepted.retry_failed_next_pass.into(),
        ),
    ];
    match given.into_iter().find(|(_, asked, was)| asked.is_some_and(|asked| asked != *was)) {
        None => Ok(()),
        Some((field, asked, was)) => Err(Status::invalid_argument(format!(
            "job {job:?} exists with {field} {was}; this spec asks {}: submit it under another \
             name",
            asked.unwrap_or_default()
        ))),
    }
}

/// The masters' policy with what the spec overrides.
fn with_overrides(flags: QueuePolicy, overrides: Option<&pb::QueuePolicyOverrides>) -> QueuePolicy {
    let Some(spec) = overrides else { return flags };
    QueuePolicy {
        chunks_per_task: spec.chunks_per_task.unwrap_or(flags.chunks_per_task),
        task_timeout_min_ms: spec.task_timeout_min_ms.unwrap_or(flags.task_timeout_min_ms),
        timeout_factor: spec.timeout_factor.unwrap_or(flags.timeout_factor),
        max_task_failures: spec.max_task_failures.unwrap_or(flags.max_task_failures),
        retry_failed_next_pass: spec.retry_failed_next_pass.unwrap_or(flags.retry_failed_next_pass),
    }
}

/// Every job of the applied state, in id order.
/// Every job of the applied state, in id order, with what holders said of failed reloads.
pub(crate) fn list_jobs(
    state: &ReplicatedState,
    retention_ms: u64,
    failures: &ReloadFailures,
) -> pb::ListJobsReply {
    let clock_ms = state.state().clock_ms();
    let summarize = |(job_id, job): (u64, &JobState)| {
        let mut summary = summary(job_id, job, clock_ms);
        summary.reload_waits = reload_waits(job_id, job, failures);
        summary
    };
    let jobs = state.state().jobs().map(summarize).collect();
    pb::ListJobsReply { jobs, retention_ms }
}

/// The slots job `job_id`'s restore waits for whose holder said it cannot reload, with why.
fn reload_waits(job_id: u64, job: &JobState, failures: &ReloadFailures) -> Vec<pb::SlotReloadWait> {
    let said = |(slot, generation): (u32, u64)| {
        let reason = failures.reason((job_id, slot, generation))?;
        Some(pb::SlotReloadWait { slot, reason })
    };
    job.reload_waiting_holders().into_iter().filter_map(said).collect()
}

fn summary(job_id: u64, job: &JobState, clock_ms: u64) -> pb::JobSummary {
    use pb::job_summary::State;
    let status = job.status();
    let state = match job.ended() {
        Some(end) if end.cancelled => State::Cancelled,
        Some(_) => State::Finished,
        None if status.dataset.is_none() => State::Waiting,
        None => State::Running,
    };
    let eval = status.eval.as_ref().map(|eval| pb::Eval {
        pass_index: eval.pass,
        loss: eval.loss(),
        accuracy: eval.accuracy(),
    });
    pb::JobSummary {
        name: job.name().to_string(),
        state: state as i32,
        pass_index: status.pass,
        passes: status.passes,
        task_count: status.task_count,
        done: status.done_count,
        failed: status.failed_count,
        trainers: status.trainers.len() as u32,
        pservers: status.pservers.iter().filter(|slot| slot.holder.is_some()).count() as u32,
        ended_ms_ago: job.ended().map_or(0, |end| clock_ms.saturating_sub(end.at_ms)),
        newest_checkpoint: job.newest_progress_checkpoint().unwrap_or(0),
        eval,
        newest_model_checkpoint: job.newest_model_checkpoint().unwrap_or(0),
        reloads_waiting: job.reloads_waiting(),
        job_id,
        newest_checkpoint_data_only: job.newest_checkpoint_data_only(),
        reload_waits: Vec::new(),
    }
}
