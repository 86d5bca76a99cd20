//! How the service names a job: commands go into the log wrapped for the job the client named
//! (the state finds it when it applies them, `state/routing.rs`), and reads resolve the name to
//! the job's id in the applied state.

use super::proposer::Proposer;
use super::status_mapping::unexpected;
use crate::replicated_state::ReplicatedState;
use crate::state::{ClientStamp, Command, JobRef, Response};
use consensus::ConsensusNode;
use tonic::Status;

/// `command` for the job a client named (the empty name: the group's only job).
pub(crate) fn for_job(job: &str, command: Command) -> Command {
    Command::InJob { job: JobRef::Name(job.to_string()), command: Box::new(command) }
}

/// The id of the job name `job` means in the applied state, or the status a client gets:
/// NOT_FOUND for a name no job has, FAILED_PRECONDITION before any job exists,
/// INVALID_ARGUMENT for the empty name among several jobs.
pub(crate) fn job_id(
    node: &ConsensusNode<ReplicatedState>,
    call: &'static str,
    job: &str,
) -> Result<u64, Status> {
    node.read(|state| state.state().job_id(job)).map_err(|response| unexpected(call, response))
}

/// The id of the job name `job` means and its restores with the model asked so far, read together
/// (as `job_id` refuses).
pub(crate) fn job_restores(
    node: &ConsensusNode<ReplicatedState>,
    call: &'static str,
    job: &str,
) -> Result<(u64, u64), Status> {
    let read = |state: &ReplicatedState| {
        let job_id = state.state().job_id(job)?;
        let restores = state.state().job(job_id).map_or(0, |job| job.model_restores());
        Ok((job_id, restores))
    };
    node.read(read).map_err(|response| unexpected(call, response))
}

/// The job's id if it exists; `None` when it does not (never submitted, or removed): what a
/// member's heartbeat learns its job ended from. Other refusals are the client's error.
pub(crate) fn existing_job(
    node: &ConsensusNode<ReplicatedState>,
    call: &'static str,
    job: &str,
) -> Result<Option<u64>, Status> {
    match job_id(node, call, job) {
        Ok(job_id) => Ok(Some(job_id)),
        Err(status) if status.code() == tonic::Code::NotFound => Ok(None),
        Err(status) => Err(status),
    }
}

/// Before a report that asks to train again (`restart`): starts a new incarnation of job
/// `job` if it ended, one replicated `RestartJob` under the report's stamp (the report itself
/// is idempotent and goes unstamped), so a retried report finds the incarnation its first try
/// made. While the job runs, or when there is none, the report proceeds as an ordinary one.
pub(crate) async fn restart_if_asked(
    proposer: &Proposer,
    job: &str,
    client: ClientStamp,
    restart: bool,
) -> Result<(), Status> {
    if !restart {
        return Ok(());
    }
    client::check_job_name(job)
        .map_err(|message| Status::invalid_argument(format!("job: {message}")))?;
    match proposer.propose(Some(client), for_job(job, Command::RestartJob)).await? {
        Response::JobRestarted { job_id } => {
            tracing::info!(job, job_id, "a new incarnation of an ended job");
            Ok(())
        }
        Response::Accepted | Response::NoSuchJob { .. } => Ok(()),
        other => Err(unexpected("RestartJob", other)),
    }
}
