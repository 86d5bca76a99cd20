//! `ReportIndexDataset` on the leader: two numbers and a name, checked field by field, then
//! one entry through the proposer; nothing is scanned. The stamp is checked but not
//! replicated: the command is idempotent by itself (an identical repeat answers the accepted
//! sizes), so a retry needs no session, and the Python package's many workers, each
//! reporting as it starts, take none from the strangers' pool.

use super::conversions::stamp;
use super::proposer::Proposer;
use super::status_mapping::unexpected;
use crate::state::{Command, QueuePolicy, Response};
use proto::master as pb;
use tonic::Status;

/// Validates, proposes and answers one index report; `policy` is the leader's.
pub(crate) async fn report_index_dataset(
    proposer: &Proposer,
    policy: QueuePolicy,
    request: pb::ReportIndexDatasetRequest,
) -> Result<pb::ReportDatasetReply, Status> {
    stamp(request.stamp)?;
    validate(&request)?;
    super::admission::check_report(proposer.node(), &request.job, request.passes)?;
    let command = Command::ReportIndexDataset {
        job: request.job,
        size: request.size,
        shard_size: request.shard_size,
        passes: request.passes,
        policy,
    };
    let command = shuffled(command, request.shuffle_seed);
    match proposer.propose(None, command).await? {
        Response::DatasetAccepted { task_count, .. } => {
            Ok(pb::ReportDatasetReply { task_count, chunk_count: 0, record_count: 0 })
        }
        other => Err(unexpected("ReportIndexDataset", other)),
    }
}

/// `report` in a `ShuffledReport` envelope when it has a seed; an unshuffled report is
/// proposed as builds before shuffling proposed it, byte for byte.
pub(crate) fn shuffled(report: Command, shuffle_seed: Option<u64>) -> Command {
    match shuffle_seed {
        Some(seed) => Command::ShuffledReport { seed, report: Box::new(report) },
        None => report,
    }
}

/// The fields the state would refuse anyway, refused before anything is proposed. The task
/// limit is the state's to judge (it names the smallest shard size that fits).
fn validate(request: &pb::ReportIndexDatasetRequest) -> Result<(), Status> {
    if request.job.is_empty() {
        return Err(Status::invalid_argument("job: must name the job"));
    }
    if request.size == 0 {
        return Err(Status::invalid_argument("size: must be at least 1 (the number of samples)"));
    }
    if request.shard_size == 0 {
        return Err(Status::invalid_argument("shard_size: must be at least 1"));
    }
    if request.passes == 0 {
        return Err(Status::invalid_argument("passes: must be at least 1"));
    }
    Ok(())
}
