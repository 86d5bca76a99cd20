//! The task RPCs of the master service: dataset reports, trainers joining, heartbeating,
//! asking for tasks, reporting them and their evaluations, and leaving.

use crate::service::conversions::{stamp, task};
use crate::service::dataset_report::{self, validate_report};
use crate::service::index_report;
use crate::service::job_scope::{existing_job, for_job, restart_if_asked};
use crate::service::status_mapping::unexpected;
use crate::state::{Command, Fault, Response, FAILURE_REASON_BYTES_MAX};
use proto::master as pb;
use proto::master::get_task_reply::Outcome;
use tonic::Status;

use super::{MasterRpc, Reply};

pub(super) async fn report_dataset(
    rpc: &MasterRpc,
    request: tonic::Request<pb::ReportDatasetRequest>,
) -> Reply<pb::ReportDatasetReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    validate_report(&request)?;
    rpc.require_leader()?;
    restart_if_asked(&rpc.proposer, &request.job, client, request.restart).await?;
    let policy = rpc.job_policy(&request.job);
    dataset_report::report_dataset(&rpc.proposer, &rpc.scanner, request, policy)
        .await
        .map(tonic::Response::new)
}

pub(super) async fn report_index_dataset(
    rpc: &MasterRpc,
    request: tonic::Request<pb::ReportIndexDatasetRequest>,
) -> Reply<pb::ReportDatasetReply> {
    let request = request.into_inner();
    if request.restart {
        let client = stamp(request.stamp)?;
        restart_if_asked(&rpc.proposer, &request.job, client, true).await?;
    }
    let policy = rpc.job_policy(&request.job);
    let reply = index_report::report_index_dataset(&rpc.proposer, policy, request).await?;
    Ok(tonic::Response::new(reply))
}

pub(super) async fn register_trainer(
    rpc: &MasterRpc,
    request: tonic::Request<pb::RegisterTrainerRequest>,
) -> Reply<pb::RegisterTrainerReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    let command = for_job(&request.job, Command::RegisterTrainer { name: request.name });
    match rpc.propose(Some(client), command).await? {
        Response::TrainerRegistered { trainer } => {
            let job = rpc.job_id("RegisterTrainer", &request.job)?;
            rpc.duties.trainer_alive(rpc.node.term(), (job, trainer));
            let lease_ms = rpc.duties.trainer_lease_ms();
            Ok(tonic::Response::new(pb::RegisterTrainerReply { trainer_id: trainer, lease_ms }))
        }
        other => Err(unexpected("RegisterTrainer", other)),
    }
}

pub(super) async fn heartbeat(
    rpc: &MasterRpc,
    request: tonic::Request<pb::HeartbeatRequest>,
) -> Reply<pb::HeartbeatReply> {
    let request = request.into_inner();
    let trainer = request.trainer_id;
    let term = rpc.confirmed_leader().await?;
    let job = existing_job(&rpc.node, "Heartbeat", &request.job)?;
    if rpc.job_ended(job) {
        return Ok(tonic::Response::new(pb::HeartbeatReply { known: false, job_ended: true }));
    }
    let job = job.unwrap_or_default();
    let known = rpc.known_trainer(job, trainer).await?;
    if known {
        rpc.duties.trainer_alive(term, (job, trainer));
        rpc.duties.trainer_progress(term, (job, trainer), request.tasks_done);
    }
    Ok(tonic::Response::new(pb::HeartbeatReply { known, job_ended: false }))
}

pub(super) async fn get_task(
    rpc: &MasterRpc,
    request: tonic::Request<pb::GetTaskRequest>,
) -> Reply<pb::GetTaskReply> {
    ask_alone(rpc, request.into_inner()).await.map(tonic::Response::new)
}

/// One `GetTask`'s answer (sent alone, or on an ask stream).
pub(super) async fn ask_alone(
    rpc: &MasterRpc,
    request: pb::GetTaskRequest,
) -> Result<pb::GetTaskReply, Status> {
    let together = asks_together(request.together)?;
    answer_ask(rpc, request, together).await
}

/// One ask's answer, the ask one of `together` that reached the leader at once (their writes
/// wait for each other and share a log entry).
pub(super) async fn answer_ask(
    rpc: &MasterRpc,
    request: pb::GetTaskRequest,
    together: usize,
) -> Result<pb::GetTaskReply, Status> {
    let client = stamp(request.stamp)?;
    let command = hand_off_command(rpc, &request)?;
    let command = for_job(&request.job, command);
    let response = rpc.proposer.propose_together(Some(client), command, together).await?;
    let (finished_accepted, response) = finished_answers(response, request.finished.len());
    let job = || rpc.job_id("GetTask", &request.job);
    if !matches!(response, Response::UnknownTrainer | Response::NoDataset) {
        rpc.duties.trainer_alive(rpc.node.term(), (job()?, request.trainer_id));
    }
    let reply = |outcome: Outcome, task, current_pass| pb::GetTaskReply {
        outcome: outcome as i32,
        task,
        current_pass,
        finished_accepted: finished_accepted.clone(),
    };
    let reply = match response {
        Response::Task(assignment) => {
            metrics::counter!("raftrain_master_tasks_dispatched_total").increment(1);
            let job = job()?;
            let data = rpc.node.read(|state| {
                let job = state.job(job)?;
                Some((job.task_data(assignment.task_id)?, job.shuffle_seed()))
            });
            // The dataset is fixed once accepted, and a task answer needs one.
            let (data, seed) = data.ok_or_else(|| unexpected("GetTask", Response::NoDataset))?;
            reply(Outcome::Task, Some(task(&assignment, (&data, seed))), assignment.pass)
        }
        Response::PassBefore { current } => reply(Outcome::PassBefore, None, current),
        Response::PassAfter { current } => reply(Outcome::PassAfter, None, current),
        Response::NoMoreAvailable => reply(Outcome::NoMoreAvailable, None, request.pass_index),
        Response::JobFinished => reply(Outcome::JobFinished, None, request.pass_index),
        Response::NoDataset => reply(Outcome::NoDataset, None, 0),
        Response::UnknownTrainer => reply(Outcome::UnknownTrainer, None, 0),
        Response::JobCancelled => reply(Outcome::JobCancelled, None, request.pass_index),
        other => return Err(unexpected("GetTask", other)),
    };
    Ok(reply)
}

// What a client may say it sent together, the batcher waits for.
const _: () = assert!(client::ASKS_TOGETHER_MAX as usize <= consensus::TOGETHER_MAX);

/// How many asks the client sent with this one (`together`: 0 and 1 mean alone), at most
/// `client::ASKS_TOGETHER_MAX`.
fn asks_together(together: u32) -> Result<usize, Status> {
    if together > client::ASKS_TOGETHER_MAX {
        return Err(Status::invalid_argument(format!(
            "together: {together} asks sent at once; at most {} share a write",
            client::ASKS_TOGETHER_MAX
        )));
    }
    Ok(usize::try_from(together.max(1)).unwrap_or(1))
}

/// The ask as a command: with finished receipts, one `FinishedThenGetTask`. A group whose
/// feature level is below it refuses the request before anything is applied under its stamp
/// (`hand-off-unsupported`), so the client reports the receipts and asks in calls of their own:
/// answering the ask alone under the stamp would make a retry after the group's level rose a
/// different request under the same stamp.
fn hand_off_command(rpc: &MasterRpc, request: &pb::GetTaskRequest) -> Result<Command, Status> {
    let (trainer, pass) = (request.trainer_id, request.pass_index);
    if request.finished.len() > client::FINISHED_PER_ASK_MAX {
        return Err(Status::invalid_argument(format!(
            "finished: {} receipts in one ask; at most {} go with one",
            request.finished.len(),
            client::FINISHED_PER_ASK_MAX
        )));
    }
    let finished = request
        .finished
        .iter()
        .map(|receipt| {
            let epoch = reported_epoch(rpc, &request.job, (receipt.task_id, receipt.epoch))?;
            Ok((receipt.task_id, epoch))
        })
        .collect::<Result<Vec<_>, Status>>()?;
    let combined = Command::FinishedThenGetTask { finished, trainer, pass };
    if request.finished.is_empty() {
        return Ok(Command::GetTask { trainer, pass });
    }
    if !rpc.proposer.admits(&combined) {
        return Err(hand_off_unsupported(rpc));
    }
    Ok(combined)
}

/// The refusal of finished receipts by a group below the hand-off's feature level.
fn hand_off_unsupported(rpc: &MasterRpc) -> Status {
    let level = rpc.node.read(|state| state.state().feature_level());
    let mut status = Status::failed_precondition(format!(
        "GetTask: the group runs feature level {level}; finished tasks go with an ask from \
         level 3: report them with TaskFinished"
    ));
    let kind = tonic::metadata::MetadataValue::from_static(client::REFUSAL_HAND_OFF_UNSUPPORTED);
    status.metadata_mut().insert(client::REFUSAL_METADATA_KEY, kind);
    status
}

/// The epoch a finish report is applied under: the reported one (the planted
/// `skip-epoch-check` takes the task's pending one instead, as PaddlePaddle's master did).
fn reported_epoch(rpc: &MasterRpc, job: &str, (task_id, epoch): (u64, u64)) -> Result<u64, Status> {
    if !crate::planted::active("skip-epoch-check") {
        return Ok(epoch);
    }
    let job = rpc.job_id("TaskFinished", job)?;
    let pending = rpc.node.read(|state| state.job(job)?.pending_epoch(task_id));
    Ok(pending.unwrap_or(epoch))
}

/// Whether each of `receipts` finished receipts was accepted, and the ask's own answer.
fn finished_answers(response: Response, receipts: usize) -> (Vec<bool>, Response) {
    match response {
        Response::FinishedThenTask { finished, then } => {
            let accepted: Vec<bool> =
                finished.iter().map(|answer| *answer == Response::Accepted).collect();
            let count = accepted.iter().filter(|accepted| **accepted).count();
            metrics::counter!("raftrain_master_tasks_finished_total").increment(count as u64);
            (accepted, *then)
        }
        // The job was cancelled before the receipts were looked at: none was accepted.
        Response::JobCancelled => (vec![false; receipts], Response::JobCancelled),
        other => (Vec::new(), other),
    }
}

/// A task's holder is at work on it: its deadline moves to a whole timeout from now.
pub(super) async fn task_progress(
    rpc: &MasterRpc,
    request: tonic::Request<pb::TaskProgressRequest>,
) -> Reply<pb::TaskProgressReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    let command = Command::TaskProgress { task_id: request.task_id, epoch: request.epoch };
    let reply = |held, timeout_ms, job_cancelled| {
        Ok(tonic::Response::new(pb::TaskProgressReply { held, timeout_ms, job_cancelled }))
    };
    match rpc.propose(Some(client), for_job(&request.job, command)).await? {
        Response::TaskExtended { timeout_ms } => reply(true, timeout_ms, false),
        Response::Stale => reply(false, 0, false),
        Response::JobCancelled => reply(false, 0, true),
        other => Err(unexpected("TaskProgress", other)),
    }
}

pub(super) async fn task_finished(
    rpc: &MasterRpc,
    request: tonic::Request<pb::TaskFinishedRequest>,
) -> Reply<pb::TaskReportReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    let epoch = reported_epoch(rpc, &request.job, (request.task_id, request.epoch))?;
    let command = for_job(&request.job, Command::TaskFinished { task_id: request.task_id, epoch });
    if crate::planted::active("answer-before-commit") {
        let proposer = rpc.proposer.clone();
        tokio::spawn(async move { proposer.propose(Some(client), command).await });
        let reply = pb::TaskReportReply { accepted: true, job_cancelled: false };
        return Ok(tonic::Response::new(reply));
    }
    let reply = task_report("TaskFinished", rpc.propose(Some(client), command).await?)?;
    if reply.get_ref().accepted {
        metrics::counter!("raftrain_master_tasks_finished_total").increment(1);
    }
    Ok(reply)
}

pub(super) async fn task_failed(
    rpc: &MasterRpc,
    request: tonic::Request<pb::TaskFailedRequest>,
) -> Reply<pb::TaskReportReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    // Cut here, not refused: a long stack trace must still fail the task, and the state
    // keeps at most this much of it anyway.
    // An unknown fault code (a newer sender) counts as the data's fault, as before faults
    // were told apart: the budget still bounds the task's retries.
    let fault = match pb::task_failed_request::Fault::try_from(request.fault) {
        Ok(pb::task_failed_request::Fault::Local) => Fault::Local,
        Ok(pb::task_failed_request::Fault::Content) | Err(_) => Fault::Content,
    };
    let command = Command::TaskFailedWithFault {
        task_id: request.task_id,
        epoch: request.epoch,
        reason: crate::state::truncate_reason(&request.reason, FAILURE_REASON_BYTES_MAX),
        fault,
    };
    let response = rpc.propose(Some(client), for_job(&request.job, command)).await?;
    let reply = task_report("TaskFailed", response)?;
    if reply.get_ref().accepted {
        metrics::counter!("raftrain_master_tasks_failed_total").increment(1);
    }
    Ok(reply)
}

pub(super) async fn record_eval(
    rpc: &MasterRpc,
    request: tonic::Request<pb::RecordEvalRequest>,
) -> Reply<pb::RecordEvalReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    let command = Command::RecordEval {
        pass: request.pass_index,
        loss: request.loss,
        accuracy: request.accuracy,
    };
    match rpc.propose(Some(client), for_job(&request.job, command)).await? {
        Response::Accepted => Ok(tonic::Response::new(pb::RecordEvalReply {})),
        other => Err(unexpected("RecordEval", other)),
    }
}

/// A trainer's planned leave: the same command the leader proposes when its lease runs
/// out, so its tasks go back to the queue alike, only sooner.
pub(super) async fn leave_job(
    rpc: &MasterRpc,
    request: tonic::Request<pb::LeaveJobRequest>,
) -> Reply<pb::LeaveJobReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    let command = for_job(&request.job, Command::TrainerLost { trainer: request.trainer_id });
    let requeued = match rpc.propose(Some(client), command).await? {
        Response::TrainerRemoved { requeued } => requeued.len() as u64,
        Response::UnknownTrainer => 0,
        other => return Err(unexpected("LeaveJob", other)),
    };
    Ok(tonic::Response::new(pb::LeaveJobReply { requeued }))
}

fn task_report(call: &'static str, response: Response) -> Reply<pb::TaskReportReply> {
    let reply = |accepted, job_cancelled| {
        Ok(tonic::Response::new(pb::TaskReportReply { accepted, job_cancelled }))
    };
    match response {
        Response::Accepted => reply(true, false),
        Response::Stale => reply(false, false),
        Response::JobCancelled => reply(false, true),
        other => Err(unexpected(call, other)),
    }
}
