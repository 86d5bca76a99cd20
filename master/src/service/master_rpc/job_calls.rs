//! The job RPCs of the master service that are one command or one read: the cluster and
//! status reads, submit and list (through `job_rpc.rs`), cancel, progress checkpoints and
//! restores.

use crate::service::conversions::stamp;
use crate::service::job_scope::for_job;
use crate::service::status_mapping::unexpected;
use crate::service::status_view::TrainerSoftState;
use crate::state::{Command, Response};
use proto::master as pb;

use super::{MasterRpc, Reply};

pub(super) async fn cluster_info(
    rpc: &MasterRpc,
    request: tonic::Request<proto::raft::ClusterInfoRequest>,
) -> Reply<proto::raft::ClusterInfoReply> {
    let mut reply = consensus::cluster_info_reply(&rpc.node.cluster_info());
    reply.group_feature_level = rpc.node.read(|state| state.state().feature_level());
    if request.get_ref().state_digest {
        let (index, digest) = rpc.node.read_applied(|state| fnv1a64(&state.state().encode()));
        reply.digest_applied_index = index;
        reply.state_digest = digest;
    }
    Ok(tonic::Response::new(reply))
}

pub(super) async fn status(
    rpc: &MasterRpc,
    request: tonic::Request<pb::StatusRequest>,
) -> Reply<pb::StatusReply> {
    if !crate::planted::active("stale-status") {
        rpc.linearizable().await?;
    }
    let mut cluster = consensus::cluster_info_reply(&rpc.node.cluster_info());
    cluster.group_feature_level = rpc.node.read(|state| state.state().feature_level());
    // Before any job exists, or with several and none named, the group still has a
    // status: its cluster, and no job (`ListJobs` sums up each).
    let name = &request.get_ref().job;
    let job = match rpc.job_id("Status", name) {
        Ok(job) => Some(job),
        Err(status) if status.code() == tonic::Code::FailedPrecondition => None,
        Err(status) if name.is_empty() && status.code() == tonic::Code::InvalidArgument => None,
        Err(status) => return Err(status),
    };
    let term = cluster.term;
    let soft = |trainer| TrainerSoftState {
        last_heartbeat_ms_ago: rpc
            .duties
            .trainer_heard_ago(term, trainer)
            .map(|ago| ago.as_millis() as u64),
        tasks_done: rpc.duties.trainer_tasks_done(term, trainer),
    };
    let reply =
        rpc.node.read(|state| crate::service::status_view::status_reply(state, job, cluster, soft));
    Ok(tonic::Response::new(reply))
}

pub(super) async fn submit_job(
    rpc: &MasterRpc,
    request: tonic::Request<pb::SubmitJobRequest>,
) -> Reply<pb::ReportDatasetReply> {
    let request = request.into_inner();
    let name = request.name.as_str();
    if request.restart {
        let client = stamp(request.stamp)?;
        rpc.require_leader()?;
        crate::service::job_scope::restart_if_asked(&rpc.proposer, name, client, true).await?;
    }
    let accepted = rpc.node.read(|state| state.state().job_named(name)?.policy());
    if let Some(accepted) = accepted {
        crate::service::job_rpc::check_overrides(name, &accepted, request.policy.as_ref())?;
    }
    crate::service::job_rpc::submit_job(&rpc.proposer, &rpc.scanner, rpc.policy, request)
        .await
        .map(tonic::Response::new)
}

pub(super) async fn list_jobs(
    rpc: &MasterRpc,
    _request: tonic::Request<pb::ListJobsRequest>,
) -> Reply<pb::ListJobsReply> {
    rpc.linearizable().await?;
    let retention_ms = rpc.duties.job_retention_ms();
    let failures = rpc.duties.reload_failures();
    let reply =
        rpc.node.read(|state| crate::service::job_rpc::list_jobs(state, retention_ms, failures));
    Ok(tonic::Response::new(reply))
}

pub(super) async fn cancel_job(
    rpc: &MasterRpc,
    request: tonic::Request<pb::CancelJobRequest>,
) -> Reply<pb::CancelJobReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    crate::service::admission::require_named(&request.job)?;
    match rpc.propose(Some(client), for_job(&request.job, Command::CancelJob)).await? {
        Response::Accepted => Ok(tonic::Response::new(pb::CancelJobReply {})),
        other => Err(unexpected("CancelJob", other)),
    }
}

pub(super) async fn checkpoint_job(
    rpc: &MasterRpc,
    request: tonic::Request<pb::CheckpointJobRequest>,
) -> Reply<pb::CheckpointJobReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    crate::service::admission::require_named(&request.job)?;
    let command = for_job(&request.job, Command::CheckpointProgress);
    match rpc.propose(Some(client), command).await? {
        Response::ProgressCheckpointed { id, pass, done } => {
            let asked = rpc.node.read(|state| state.pservers_asked(&request.job, id));
            let reply = pb::CheckpointJobReply {
                checkpoint_id: id,
                pass_index: pass,
                done,
                pservers_asked: asked,
            };
            Ok(tonic::Response::new(reply))
        }
        other => Err(unexpected("CheckpointJob", other)),
    }
}

pub(super) async fn restore_job(
    rpc: &MasterRpc,
    request: tonic::Request<pb::RestoreJobRequest>,
) -> Reply<pb::RestoreJobReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    crate::service::admission::require_named(&request.job)?;
    let (checkpoint, data_only) = (request.checkpoint_id, request.data_only);
    let command = Command::RestoreProgress { checkpoint, data_only };
    let response = rpc.propose(Some(client), for_job(&request.job, command)).await?;
    // The incarnation the name stands for once the restore applied.
    let job_id = rpc.job_id("RestoreJob", &request.job)?;
    let reply = match response {
        Response::ProgressRestored { pass, todo } => {
            pb::RestoreJobReply { pass_index: pass, todo, reloading: 0, job_id }
        }
        Response::RestoreWaiting { pass, pservers } => {
            pb::RestoreJobReply { pass_index: pass, todo: 0, reloading: pservers, job_id }
        }
        other => return Err(unexpected("RestoreJob", other)),
    };
    Ok(tonic::Response::new(reply))
}

/// FNV-1a, 64 bits: a digest replicas compare, not a defence against forgery.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
