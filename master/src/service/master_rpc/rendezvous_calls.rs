//! The rendezvous RPCs: one replicated write per call, and linearizable reads that wait (up to
//! a cap, and only as many as `RendezvousWaits` admits) for the keys they name.

use std::time::Duration;

use crate::service::conversions::stamp;
use crate::service::rendezvous_waits::WAIT_MS_MAX;
use crate::service::status_mapping::unexpected;
use crate::state::{check_run_id, Command, RendezvousOp, RendezvousReply, Response};
use proto::master as pb;
use tonic::Status;

use super::{MasterRpc, Reply};

/// The most keys one read names.
pub(crate) const READ_KEYS_MAX: usize = 1_024;

pub(super) async fn rendezvous_write(
    rpc: &MasterRpc,
    request: tonic::Request<pb::RendezvousWriteRequest>,
) -> Reply<pb::RendezvousWriteReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    let op = op(request.key, request.op)?;
    let command = Command::Rendezvous { run: request.run, op };
    match rpc.propose(Some(client), command).await? {
        Response::Rendezvous(reply) => Ok(tonic::Response::new(write_reply(reply))),
        Response::RendezvousFull { reason } => Err(Status::resource_exhausted(reason)),
        other => Err(unexpected("RendezvousWrite", other)),
    }
}

pub(super) async fn rendezvous_read(
    rpc: &MasterRpc,
    request: tonic::Request<pb::RendezvousReadRequest>,
) -> Reply<pb::RendezvousReadReply> {
    let request = request.into_inner();
    check_run_id(&request.run).map_err(|refusal| Status::invalid_argument(refusal.to_string()))?;
    if request.keys.len() > READ_KEYS_MAX {
        let count = request.keys.len();
        return Err(Status::invalid_argument(format!(
            "a read names at most {READ_KEYS_MAX} keys (got {count})"
        )));
    }
    rpc.linearizable().await?;
    let reply = read(rpc, &request);
    if request.wait_ms == 0 || all_present(&reply) {
        return Ok(tonic::Response::new(reply));
    }
    let _place = rpc.rendezvous_waits.admit(request.client_id)?;
    let wait = Duration::from_millis(request.wait_ms.min(WAIT_MS_MAX));
    wait_for_keys(rpc, &request, wait).await.map(tonic::Response::new)
}

/// Looks again after every applied entry (any job's) until every key exists or `wait` passed.
/// A look reads the applied state only; leadership is confirmed (a quorum round) once the keys
/// are there or the wait is over, before the answer, so task traffic does not cost a round per
/// waiting read.
async fn wait_for_keys(
    rpc: &MasterRpc,
    request: &pb::RendezvousReadRequest,
    wait: Duration,
) -> Result<pb::RendezvousReadReply, Status> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut metrics = rpc.node.metrics();
    loop {
        let changed = tokio::select! {
            changed = metrics.changed() => changed.is_ok(),
            () = tokio::time::sleep_until(deadline) => false,
        };
        if changed && !all_present(&read(rpc, request)) {
            continue;
        }
        rpc.linearizable().await?;
        let reply = read(rpc, request);
        if !changed || all_present(&reply) {
            return Ok(reply);
        }
    }
}

fn all_present(reply: &pb::RendezvousReadReply) -> bool {
    reply.entries.iter().all(|entry| entry.present)
}

fn read(rpc: &MasterRpc, request: &pb::RendezvousReadRequest) -> pb::RendezvousReadReply {
    rpc.node.read(|state| {
        let state = state.state();
        let entry = |key: &String| match state.rendezvous_entry(&request.run, key) {
            Some(entry) => pb::RendezvousEntry {
                key: key.clone(),
                present: true,
                value: entry.value.clone().into(),
                version: entry.version,
            },
            None => pb::RendezvousEntry { key: key.clone(), ..pb::RendezvousEntry::default() },
        };
        pb::RendezvousReadReply {
            entries: request.keys.iter().map(entry).collect(),
            key_count: state.rendezvous_key_count(&request.run),
        }
    })
}

pub(super) async fn list_rendezvous(
    rpc: &MasterRpc,
    _request: tonic::Request<pb::ListRendezvousRequest>,
) -> Reply<pb::ListRendezvousReply> {
    rpc.linearizable().await?;
    let now_ms = rpc.proposer.now_ms();
    let runs = rpc.node.read(|state| state.state().rendezvous_runs());
    let summary = |view: crate::state::RendezvousRunView| pb::RendezvousRunSummary {
        run: view.run,
        key_count: view.key_count,
        bytes: view.bytes,
        idle_ms: now_ms.saturating_sub(view.touched_ms),
        summary: view.summary,
    };
    let idle_expiry_ms = rpc.duties.rendezvous_idle_ms();
    let reply =
        pb::ListRendezvousReply { runs: runs.into_iter().map(summary).collect(), idle_expiry_ms };
    Ok(tonic::Response::new(reply))
}

pub(super) async fn delete_rendezvous(
    rpc: &MasterRpc,
    request: tonic::Request<pb::DeleteRendezvousRequest>,
) -> Reply<pb::DeleteRendezvousReply> {
    let request = request.into_inner();
    let client = stamp(request.stamp)?;
    check_run_id(&request.run).map_err(|refusal| Status::invalid_argument(refusal.to_string()))?;
    let command = Command::RemoveRendezvous { run: request.run, touched_ms: None };
    match rpc.propose(Some(client), command).await? {
        Response::RendezvousRemoved { existed } => {
            Ok(tonic::Response::new(pb::DeleteRendezvousReply { existed }))
        }
        other => Err(unexpected("DeleteRendezvous", other)),
    }
}

/// The operation a write request carries.
fn op(key: String, op: Option<pb::rendezvous_write_request::Op>) -> Result<RendezvousOp, Status> {
    use pb::rendezvous_write_request::Op;
    Ok(match op {
        Some(Op::Set(value)) => RendezvousOp::Set { key, value: value.to_vec() },
        Some(Op::CompareSet(cas)) => RendezvousOp::CompareSet {
            key,
            expected: cas.expected.to_vec(),
            value: cas.value.to_vec(),
        },
        Some(Op::CompareVersion(cv)) => {
            RendezvousOp::CompareVersion { key, version: cv.version, value: cv.value.to_vec() }
        }
        Some(Op::Add(delta)) => RendezvousOp::Add { key, delta },
        Some(Op::Delete(_)) => RendezvousOp::Delete { key },
        None => return Err(Status::invalid_argument("RendezvousWrite: no operation (op) given")),
    })
}

fn write_reply(reply: RendezvousReply) -> pb::RendezvousWriteReply {
    match reply {
        RendezvousReply::Written { entry, set } => {
            let present = entry.is_some();
            let (value, version) =
                entry.map(|entry| (entry.value, entry.version)).unwrap_or_default();
            let value = value.into();
            pb::RendezvousWriteReply { present, value, version, set, ..Default::default() }
        }
        RendezvousReply::Added { value, version } => pb::RendezvousWriteReply {
            present: true,
            value: value.to_string().into_bytes().into(),
            version,
            set: true,
            count: value,
            existed: false,
        },
        RendezvousReply::Deleted { existed } => {
            pb::RendezvousWriteReply { existed, ..Default::default() }
        }
    }
}
