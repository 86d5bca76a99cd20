//! The pserver-slot RPCs of the master service: claims, heartbeats (with what they ask of a
//! holder), the slot table and its watch, checkpoint records, reload reports and releases.

use client::checkpoint_to_proto;

use crate::service::conversions::{checkpoint_from_proto, generation, secret, stamp};
use crate::service::job_scope::{existing_job, for_job};
use crate::service::status_mapping::unexpected;
use crate::state::{check_pserver_addr, Command, Response, SlotSecret};
use proto::master as pb;
use tonic::Status;

use super::{MasterRpc, Reply};

pub(super) async fn claim_p_server_slot(
    rpc: &MasterRpc,
    request: tonic::Request<pb::ClaimPServerSlotRequest>,
) -> Reply<pb::ClaimPServerSlotReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    check_pserver_addr(&request.addr)
        .map_err(|reason| Status::invalid_argument(format!("addr: {reason}")))?;
    if request.desired == 0 {
        return Err(Status::invalid_argument("desired: must be at least 1"));
    }
    let secret = secret(&request.secret)?;
    let lease_ms = rpc.duties.pserver_lease_ms();
    let command = Command::ClaimPServerSlotWithSecret {
        addr: request.addr,
        desired: request.desired,
        secret,
    };
    let reply = match rpc.propose(Some(client), for_job(&request.job, command)).await? {
        Response::SlotClaimed { slot, generation, checkpoint } => {
            let (job, model_restore) = rpc.job_restores("ClaimPServerSlot", &request.job)?;
            rpc.duties.pserver_granted(rpc.node.term(), (job, slot, generation));
            let checkpoint = checkpoint.as_ref().map(checkpoint_to_proto);
            pb::ClaimPServerSlotReply {
                granted: true,
                index: slot,
                lease_ms,
                checkpoint,
                generation,
                job_id: told_incarnation(job),
                model_restore,
            }
        }
        Response::SlotsFull { .. } => pb::ClaimPServerSlotReply {
            granted: false,
            index: 0,
            lease_ms,
            checkpoint: None,
            generation: 0,
            job_id: 0,
            model_restore: 0,
        },
        other => return Err(unexpected("ClaimPServerSlot", other)),
    };
    Ok(tonic::Response::new(reply))
}

pub(super) async fn p_server_heartbeat(
    rpc: &MasterRpc,
    request: tonic::Request<pb::PServerHeartbeatRequest>,
) -> Reply<pb::PServerHeartbeatReply> {
    let request = request.into_inner();
    let generation = generation(request.generation)?;
    let not_held = |job_ended| {
        let reply =
            pb::PServerHeartbeatReply { holds_slot: false, job_ended, ..Default::default() };
        Ok(tonic::Response::new(reply))
    };
    // No secret (a pserver older than this master) or a wrong one (a forgery from the
    // public fields of `ListPServers`): not the holder, and no lease is renewed.
    let Some(secret) = SlotSecret::from_bytes(&request.secret) else { return not_held(false) };
    // The term is read before leadership is confirmed: a lease is judged in a term this
    // node led in at the confirmation or before, never in a later one it has not reached.
    let term = rpc.node.term();
    rpc.current_leader().await?;
    let job = existing_job(&rpc.node, "PServerHeartbeat", &request.job)?;
    if rpc.job_ended(job) {
        return not_held(true);
    }
    let (job, slot) = (job.unwrap_or_default(), request.index);
    let held = rpc.node.read(|state| state.slot_held(job, slot, generation, secret));
    // The lease is checked after the state: a slot whose lease ran out is not confirmed,
    // even while its release is still on its way through the log.
    let holds_slot = held && rpc.duties.pserver_alive(term, (job, slot, generation));
    if !holds_slot {
        return not_held(false);
    }
    rpc.steps.heard((job, slot), generation, request.step);
    rpc.steps.forget_gone_jobs(|job| rpc.node.read(|state| state.job(job).is_some()));
    let asks = rpc.node.read(|state| state.job(job).map(|job| job.slot_asks(slot)));
    Ok(tonic::Response::new(crate::service::slot_model::heartbeat_reply(asks.unwrap_or_default())))
}

pub(super) async fn list_p_servers(
    rpc: &MasterRpc,
    request: tonic::Request<pb::ListPServersRequest>,
) -> Reply<pb::ListPServersReply> {
    rpc.linearizable().await?;
    let job = &request.get_ref().job;
    let table = rpc.node.read(|state| {
        let job_id = crate::service::watch::watched_job(state, job)?;
        Ok::<_, Status>(crate::service::watch::pserver_table(state, job_id))
    })?;
    Ok(tonic::Response::new(table))
}

pub(super) async fn watch_p_servers(
    rpc: &MasterRpc,
    request: tonic::Request<pb::ListPServersRequest>,
) -> Reply<crate::service::watch::PServerStream> {
    rpc.linearizable().await?;
    let job = request.into_inner().job;
    rpc.node.read(|state| crate::service::watch::watched_job(state, &job))?;
    Ok(tonic::Response::new(crate::service::watch::watch_pservers(rpc.node.clone(), job)))
}

pub(super) async fn record_checkpoint(
    rpc: &MasterRpc,
    request: tonic::Request<pb::RecordCheckpointRequest>,
) -> Reply<pb::RecordCheckpointReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    let meta = checkpoint_from_proto(request.meta)?;
    let slot = request.index;
    let holder = (slot, request.generation, request.secret.as_ref());
    let (job, generation) = rpc.checked_holder("RecordCheckpoint", &request.job, holder).await?;
    let steps = &rpc.steps;
    steps.check((job, slot), generation, meta.step).map_err(Status::invalid_argument)?;
    let command = match request.for_progress {
        0 => Command::RecordCheckpoint { slot, generation, meta },
        progress => Command::TagSlotCheckpoint { slot, generation, progress, meta },
    };
    let command = Command::in_job(job, command);
    let recorded = match rpc.propose(Some(client), command).await? {
        Response::Accepted => true,
        Response::Stale => false,
        other => return Err(unexpected("RecordCheckpoint", other)),
    };
    let recorded_step = rpc.node.read(|state| state.recorded_step(job, slot));
    Ok(tonic::Response::new(pb::RecordCheckpointReply { recorded, recorded_step }))
}

pub(super) async fn report_reloaded(
    rpc: &MasterRpc,
    request: tonic::Request<pb::ReportReloadedRequest>,
) -> Reply<pb::ReportReloadedReply> {
    let request = request.into_inner();
    let slot = request.index;
    let holder = (slot, request.generation, request.secret.as_ref());
    if !request.failure.is_empty() {
        rpc.confirmed_leader().await?;
        let (job, generation) = rpc.checked_holder("ReportReloaded", &request.job, holder).await?;
        rpc.duties.reload_failures().report((job, slot, generation), &request.failure);
        return Ok(tonic::Response::new(pb::ReportReloadedReply {}));
    }
    let client = stamp(request.stamp)?;
    let (job, generation) = rpc.checked_holder("ReportReloaded", &request.job, holder).await?;
    let command = Command::SlotReloaded { slot, generation, restore: request.restore };
    let command = Command::in_job(job, command);
    match rpc.propose(Some(client), command).await? {
        Response::Accepted | Response::Stale | Response::ProgressRestored { .. } => {
            Ok(tonic::Response::new(pb::ReportReloadedReply {}))
        }
        other => Err(unexpected("ReportReloaded", other)),
    }
}

/// A holder's planned release: the same command the leader proposes when a lease runs
/// out, so a restore waiting for the slot and the table's watchers see it alike.
pub(super) async fn release_p_server_slot(
    rpc: &MasterRpc,
    request: tonic::Request<pb::ReleasePServerSlotRequest>,
) -> Reply<pb::ReleasePServerSlotReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    let slot = request.index;
    let holder = (slot, request.generation, request.secret.as_ref());
    let (job, generation) = rpc.checked_holder("ReleasePServerSlot", &request.job, holder).await?;
    let command = Command::ReleasePServerSlot { slot, generation };
    let command = Command::in_job(job, command);
    let released = match rpc.propose(Some(client), command).await? {
        Response::Accepted => true,
        Response::SlotNotHeld => false,
        other => return Err(unexpected("ReleasePServerSlot", other)),
    };
    Ok(tonic::Response::new(pb::ReleasePServerSlotReply { released }))
}

/// The incarnation id a granted claim names: the job's own (planted bug
/// `claim-another-incarnation`: the next one).
fn told_incarnation(job: u64) -> u64 {
    match crate::planted::active("claim-another-incarnation") {
        true => job + 1,
        false => job,
    }
}
