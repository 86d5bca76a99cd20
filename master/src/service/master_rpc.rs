//! The master gRPC service: each RPC validates its fields, turns into one replicated command
//! (stamped with the leader's clock and the client's stamp), and maps the state machine's
//! answer back to a reply. Reads are linearizable; heartbeats touch only leader soft state.

use client::checkpoint_to_proto;

use super::conversions::{checkpoint_from_proto, generation, secret, stamp, task};
use super::dataset_report::{
    repeated_report, report_in_batches, scan_status, validate_report, DatasetReport, DatasetScanner,
};
use super::index_report::report_index_dataset;
use super::proposer::Proposer;
use super::reported_steps::ReportedSteps;
use super::status_mapping::{not_leader, unexpected, write_error, wrong_secret};
use super::status_view::TrainerSoftState;
use crate::dataset_scan::{DataRoot, ScanLimits};
use crate::leader::LeaderDuties;
use crate::replicated_state::ReplicatedState;
use crate::state::{
    check_pserver_addr, ClientStamp, Command, Fault, QueuePolicy, Response, SlotSecret,
    FAILURE_REASON_BYTES_MAX,
};
use consensus::ConsensusNode;
use proto::master as pb;
use proto::master::get_task_reply::Outcome;
use std::sync::Arc;
use tonic::Status;

type Reply<T> = Result<tonic::Response<T>, Status>;

/// The master service of one replica (served by `run`, or in process by the simulation).
#[derive(Clone)]
pub struct MasterRpc {
    node: ConsensusNode<ReplicatedState>,
    proposer: Proposer,
    duties: Arc<LeaderDuties>,
    policy: QueuePolicy,
    /// Scans reported datasets, under `--data-root` when given.
    scanner: DatasetScanner,
    /// The step each slot's holder last reported (leader soft state).
    steps: Arc<ReportedSteps>,
}

impl MasterRpc {
    pub(crate) fn new(
        proposer: Proposer,
        duties: Arc<LeaderDuties>,
        policy: QueuePolicy,
        data_root: Option<DataRoot>,
    ) -> Self {
        let scanner = DatasetScanner::new(data_root, ScanLimits::default());
        let steps = Arc::new(ReportedSteps::default());
        Self { node: proposer.node().clone(), proposer, duties, policy, scanner, steps }
    }

    /// Replicates one command and returns the state machine's answer.
    async fn propose(
        &self,
        client: Option<ClientStamp>,
        command: Command,
    ) -> Result<Response, Status> {
        self.proposer.propose(client, command).await
    }

    fn require_leader(&self) -> Result<(), Status> {
        if self.node.is_leader() {
            return Ok(());
        }
        // A leaving leader still names itself as leader until the handoff completes: send the
        // client to rediscover instead of back here.
        let leader_addr = self.node.cluster_info().leader_addr.filter(|_| !self.node.is_leaving());
        Err(not_leader(leader_addr.as_deref()))
    }

    /// Answers that grant or confirm ownership (heartbeats) come only from a leader whose
    /// leadership a quorum confirmed recently: a deposed leader that has not noticed yet must
    /// not tell a pserver it still holds a slot that the new leader gave away. The term it
    /// leads in.
    async fn confirmed_leader(&self) -> Result<u64, Status> {
        if crate::planted::active("deposed-heartbeats") {
            return self.require_leader().map(|()| self.node.term());
        }
        self.node.confirm_leadership().await.map_err(write_error)
    }

    /// Slot ownership is confirmed only by a leader a quorum confirmed that has applied
    /// everything committed before the call: a new leader that has not applied a release yet
    /// must not confirm the slot's previous holder.
    async fn current_leader(&self) -> Result<(), Status> {
        if crate::planted::active("deposed-heartbeats") {
            return self.require_leader();
        }
        self.linearizable().await
    }

    async fn linearizable(&self) -> Result<(), Status> {
        self.node.ensure_linearizable().await.map_err(write_error)
    }

    /// Whether slot `index` is held under `generation` by the claimer of `secret`, judged by a
    /// state that applied everything committed when the applied one says no (see
    /// [`registered`]: a new leader may not have applied the claim yet).
    async fn holder_with_secret(
        &self,
        index: u32,
        generation: u64,
        secret: SlotSecret,
    ) -> Result<bool, Status> {
        let read = || self.node.read(|state| state.slot_held(index, generation, secret));
        registered(read, self.linearizable()).await
    }

    /// Whether `trainer` is registered (see [`registered`]).
    async fn known_trainer(&self, trainer: u64) -> Result<bool, Status> {
        let read = || self.node.read(|state| state.knows_trainer(trainer));
        registered(read, self.linearizable()).await
    }
}

/// Whether a trainer is registered, by `read` of the applied state; "unknown" only after
/// `catch_up` made that state hold everything committed. A new leader's applied state may lag
/// its log, and "unknown" from a state that has not applied the trainer's registration yet
/// would make the trainer register again and its task be trained twice. "Known" needs no such
/// wait: a registration, once applied, is undone only by `TrainerLost`, and a trainer told
/// "known" by a lagging state learns of its loss from its next `GetTask`.
async fn registered(
    read: impl Fn() -> bool,
    catch_up: impl std::future::Future<Output = Result<(), Status>>,
) -> Result<bool, Status> {
    if read() {
        return Ok(true);
    }
    catch_up.await?;
    Ok(read())
}

#[tonic::async_trait]
impl pb::master_service_server::MasterService for MasterRpc {
    async fn report_dataset(
        &self,
        request: tonic::Request<pb::ReportDatasetRequest>,
    ) -> Reply<pb::ReportDatasetReply> {
        let request = request.into_inner();
        stamp(request.stamp)?;
        validate_report(&request)?;
        self.require_leader()?;
        let (policy, scanner) = (&self.policy, &self.scanner);
        if let Some(reply) = repeated_report(&self.node, policy, scanner, &request).await {
            return Ok(tonic::Response::new(reply));
        }
        // Dropping this future (the client went away) stops the scan: see `DatasetScanner`.
        let scanned = self.scanner.scan(request.patterns.clone()).await.map_err(scan_status)?;
        let (chunk_count, record_count) = (scanned.chunks.len() as u64, scanned.record_count);
        // The stamp is checked but not replicated: batches are idempotent by themselves (see
        // `dataset_report`), and one stamp cannot answer several entries.
        let report = DatasetReport {
            job: request.job,
            passes: request.passes,
            policy: self.policy,
            chunks: scanned.chunks,
        };
        match report_in_batches(&self.proposer, report).await? {
            Response::DatasetAccepted { task_count, .. } => {
                Ok(tonic::Response::new(pb::ReportDatasetReply {
                    task_count,
                    chunk_count,
                    record_count,
                }))
            }
            other => Err(unexpected("ReportDataset", other)),
        }
    }

    async fn report_index_dataset(
        &self,
        request: tonic::Request<pb::ReportIndexDatasetRequest>,
    ) -> Reply<pb::ReportDatasetReply> {
        let request = request.into_inner();
        let reply = report_index_dataset(&self.proposer, self.policy, request).await?;
        Ok(tonic::Response::new(reply))
    }

    async fn register_trainer(
        &self,
        request: tonic::Request<pb::RegisterTrainerRequest>,
    ) -> Reply<pb::RegisterTrainerReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        match self.propose(Some(client), Command::RegisterTrainer { name: request.name }).await? {
            Response::TrainerRegistered { trainer } => {
                self.duties.trainer_alive(self.node.term(), trainer);
                let lease_ms = self.duties.trainer_lease_ms();
                Ok(tonic::Response::new(pb::RegisterTrainerReply { trainer_id: trainer, lease_ms }))
            }
            other => Err(unexpected("RegisterTrainer", other)),
        }
    }

    async fn heartbeat(
        &self,
        request: tonic::Request<pb::HeartbeatRequest>,
    ) -> Reply<pb::HeartbeatReply> {
        let request = request.into_inner();
        let trainer = request.trainer_id;
        let term = self.confirmed_leader().await?;
        let known = self.known_trainer(trainer).await?;
        if known {
            self.duties.trainer_alive(term, trainer);
            self.duties.trainer_progress(term, trainer, request.tasks_done);
        }
        Ok(tonic::Response::new(pb::HeartbeatReply { known }))
    }

    async fn get_task(
        &self,
        request: tonic::Request<pb::GetTaskRequest>,
    ) -> Reply<pb::GetTaskReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        let command = Command::GetTask { trainer: request.trainer_id, pass: request.pass };
        let response = self.propose(Some(client), command).await?;
        if !matches!(response, Response::UnknownTrainer) {
            self.duties.trainer_alive(self.node.term(), request.trainer_id);
        }
        let reply = |outcome: Outcome, task, current_pass| pb::GetTaskReply {
            outcome: outcome as i32,
            task,
            current_pass,
        };
        let reply = match response {
            Response::Task(assignment) => {
                metrics::counter!("raftrain_master_tasks_dispatched_total").increment(1);
                let data = self.node.read(|state| state.state().task_data(assignment.task));
                // The dataset is fixed once accepted, and a task answer needs one.
                let data = data.ok_or_else(|| unexpected("GetTask", Response::NoDataset))?;
                reply(Outcome::Task, Some(task(&assignment, &data)), assignment.pass)
            }
            Response::PassBefore { current } => reply(Outcome::PassBefore, None, current),
            Response::PassAfter { current } => reply(Outcome::PassAfter, None, current),
            Response::NoMoreAvailable => reply(Outcome::NoMoreAvailable, None, request.pass),
            Response::JobFinished => reply(Outcome::JobFinished, None, request.pass),
            Response::NoDataset => reply(Outcome::NoDataset, None, 0),
            Response::UnknownTrainer => reply(Outcome::UnknownTrainer, None, 0),
            other => return Err(unexpected("GetTask", other)),
        };
        Ok(tonic::Response::new(reply))
    }

    async fn task_finished(
        &self,
        request: tonic::Request<pb::TaskFinishedRequest>,
    ) -> Reply<pb::TaskReportReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        let mut epoch = request.epoch;
        if crate::planted::active("skip-epoch-check") {
            let pending = self.node.read(|state| state.state().pending_epoch(request.task_id));
            epoch = pending.unwrap_or(epoch);
        }
        let command = Command::TaskFinished { task: request.task_id, epoch };
        if crate::planted::active("answer-before-commit") {
            let proposer = self.proposer.clone();
            tokio::spawn(async move { proposer.propose(Some(client), command).await });
            return Ok(tonic::Response::new(pb::TaskReportReply { accepted: true }));
        }
        let reply = task_report("TaskFinished", self.propose(Some(client), command).await?)?;
        if reply.get_ref().accepted {
            metrics::counter!("raftrain_master_tasks_finished_total").increment(1);
        }
        Ok(reply)
    }

    async fn task_failed(
        &self,
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
            task: request.task_id,
            epoch: request.epoch,
            reason: crate::state::truncate_reason(&request.reason, FAILURE_REASON_BYTES_MAX),
            fault,
        };
        let reply = task_report("TaskFailed", self.propose(Some(client), command).await?)?;
        if reply.get_ref().accepted {
            metrics::counter!("raftrain_master_tasks_failed_total").increment(1);
        }
        Ok(reply)
    }

    async fn claim_p_server_slot(
        &self,
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
        let lease_ms = self.duties.pserver_lease_ms();
        let command = Command::ClaimPServerSlotWithSecret {
            addr: request.addr,
            desired: request.desired,
            secret,
        };
        let reply = match self.propose(Some(client), command).await? {
            Response::SlotClaimed { index, generation, checkpoint } => {
                self.duties.pserver_granted(self.node.term(), index, generation);
                let checkpoint = checkpoint.as_ref().map(checkpoint_to_proto);
                pb::ClaimPServerSlotReply { granted: true, index, lease_ms, checkpoint, generation }
            }
            Response::SlotsFull { .. } => pb::ClaimPServerSlotReply {
                granted: false,
                index: 0,
                lease_ms,
                checkpoint: None,
                generation: 0,
            },
            other => return Err(unexpected("ClaimPServerSlot", other)),
        };
        Ok(tonic::Response::new(reply))
    }

    async fn p_server_heartbeat(
        &self,
        request: tonic::Request<pb::PServerHeartbeatRequest>,
    ) -> Reply<pb::PServerHeartbeatReply> {
        let request = request.into_inner();
        let generation = generation(request.generation)?;
        // No secret (a pserver older than this master) or a wrong one (a forgery from the
        // public fields of `ListPServers`): not the holder, and no lease is renewed.
        let Some(secret) = SlotSecret::from_bytes(&request.secret) else {
            return Ok(tonic::Response::new(pb::PServerHeartbeatReply { holds_slot: false }));
        };
        // The term is read before leadership is confirmed: a lease is judged in a term this
        // node led in at the confirmation or before, never in a later one it has not reached.
        let term = self.node.term();
        self.current_leader().await?;
        let held = self.node.read(|state| state.slot_held(request.index, generation, secret));
        // The lease is checked after the state: a slot whose lease ran out is not confirmed,
        // even while its release is still on its way through the log.
        let holds_slot = held && self.duties.pserver_alive(term, request.index, generation);
        if holds_slot {
            self.steps.heard(request.index, generation, request.step);
        }
        Ok(tonic::Response::new(pb::PServerHeartbeatReply { holds_slot }))
    }

    async fn list_p_servers(
        &self,
        _request: tonic::Request<pb::ListPServersRequest>,
    ) -> Reply<pb::ListPServersReply> {
        self.linearizable().await?;
        Ok(tonic::Response::new(self.node.read(super::watch::pserver_table)))
    }

    type WatchPServersStream = super::watch::PServerStream;

    async fn watch_p_servers(
        &self,
        _request: tonic::Request<pb::ListPServersRequest>,
    ) -> Reply<Self::WatchPServersStream> {
        self.linearizable().await?;
        Ok(tonic::Response::new(super::watch::watch_pservers(self.node.clone())))
    }

    async fn record_checkpoint(
        &self,
        request: tonic::Request<pb::RecordCheckpointRequest>,
    ) -> Reply<pb::RecordCheckpointReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        let (index, generation) = (request.index, generation(request.generation)?);
        let meta = checkpoint_from_proto(request.meta)?;
        let secret = secret(&request.secret)?;
        // The secret is fixed for a generation, and the command carries the generation: a
        // holder that changes between this check and the apply is fenced by the generation.
        if !self.holder_with_secret(index, generation, secret).await? {
            return Err(wrong_secret("RecordCheckpoint"));
        }
        self.steps.check(index, generation, meta.step).map_err(Status::invalid_argument)?;
        let command = Command::RecordCheckpoint { index, generation, meta };
        let recorded = match self.propose(Some(client), command).await? {
            Response::Accepted => true,
            Response::Stale => false,
            other => return Err(unexpected("RecordCheckpoint", other)),
        };
        let recorded_step = self.node.read(|state| state.recorded_step(index));
        Ok(tonic::Response::new(pb::RecordCheckpointReply { recorded, recorded_step }))
    }

    async fn record_eval(
        &self,
        request: tonic::Request<pb::RecordEvalRequest>,
    ) -> Reply<pb::RecordEvalReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        let command = Command::RecordEval {
            pass: request.pass,
            loss: request.loss,
            accuracy: request.accuracy,
        };
        match self.propose(Some(client), command).await? {
            Response::Accepted => Ok(tonic::Response::new(pb::RecordEvalReply {})),
            other => Err(unexpected("RecordEval", other)),
        }
    }

    async fn cluster_info(
        &self,
        request: tonic::Request<proto::raft::ClusterInfoRequest>,
    ) -> Reply<proto::raft::ClusterInfoReply> {
        let mut reply = consensus::cluster_info_reply(&self.node.cluster_info());
        if request.get_ref().state_digest {
            let (index, digest) = self.node.read_applied(|state| fnv1a64(&state.state().encode()));
            reply.digest_applied_index = index;
            reply.state_digest = digest;
        }
        Ok(tonic::Response::new(reply))
    }

    async fn status(&self, _request: tonic::Request<pb::StatusRequest>) -> Reply<pb::StatusReply> {
        if !crate::planted::active("stale-status") {
            self.linearizable().await?;
        }
        let cluster = consensus::cluster_info_reply(&self.node.cluster_info());
        let term = cluster.term;
        let soft = |trainer| TrainerSoftState {
            last_heartbeat_ms_ago: self
                .duties
                .trainer_heard_ago(term, trainer)
                .map(|ago| ago.as_millis() as u64),
            tasks_done: self.duties.trainer_tasks_done(term, trainer),
        };
        let reply = self.node.read(|state| super::status_view::status_reply(state, cluster, soft));
        Ok(tonic::Response::new(reply))
    }
}

fn task_report(call: &'static str, response: Response) -> Reply<pb::TaskReportReply> {
    match response {
        Response::Accepted => Ok(tonic::Response::new(pb::TaskReportReply { accepted: true })),
        Response::Stale => Ok(tonic::Response::new(pb::TaskReportReply { accepted: false })),
        other => Err(unexpected(call, other)),
    }
}

/// FNV-1a, 64 bits: a digest replicas compare, not a defence against forgery.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A heartbeat answers "unknown" only from a state that applied everything committed: a
    /// state lagging behind the trainer's registration catches up first, and a state that
    /// cannot catch up (no quorum) answers an error, never "unknown".
    #[tokio::test]
    async fn unknown_only_after_catching_up() {
        // (name, registered in the applied state, registered once caught up, catch-up works,
        //  the answer)
        let cases = [
            ("known at once", true, true, true, Some(true)),
            ("applied state lags the registration", false, true, true, Some(true)),
            ("truly unknown", false, false, true, Some(false)),
            ("cannot catch up", false, true, false, None),
        ];
        for (name, applied, committed, catches_up, want) in cases {
            let caught_up = AtomicBool::new(false);
            let read = || if caught_up.load(Ordering::SeqCst) { committed } else { applied };
            let catch_up = async {
                if !catches_up {
                    return Err(Status::unavailable("no quorum"));
                }
                caught_up.store(true, Ordering::SeqCst);
                Ok(())
            };
            let answer = registered(read, catch_up).await.ok();
            assert_eq!(answer, want, "{name}");
        }
    }
}
