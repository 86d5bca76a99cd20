//! The master gRPC service: each RPC validates its fields, turns into one replicated command
//! (stamped with the leader's clock and the client's stamp), and maps the state machine's
//! answer back to a reply. Reads are linearizable; heartbeats touch only leader soft state.

use client::checkpoint_to_proto;

use super::conversions::{checkpoint_from_proto, generation, secret, stamp, task};
use super::dataset_report::{report_dataset, validate_report, DatasetScanner};
use super::index_report::report_index_dataset;
use super::job_scope::{existing_job, for_job, job_id, job_restores};
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
        job: u64,
        (index, generation): (u32, u64),
        secret: SlotSecret,
    ) -> Result<bool, Status> {
        let read = || self.node.read(|state| state.slot_held(job, index, generation, secret));
        registered(read, self.linearizable()).await
    }

    /// A slot holder's call to `job`: its job's id and generation, once the generation and
    /// secret are the claim's. The secret is fixed for a generation, and the command carries
    /// the generation: a holder that changes between this check and the apply is fenced by it.
    async fn checked_holder(
        &self,
        call: &'static str,
        job: &str,
        (index, sent_generation, sent_secret): (u32, u64, &[u8]),
    ) -> Result<(u64, u64), Status> {
        let generation = generation(sent_generation)?;
        let secret = secret(sent_secret)?;
        let job = self.job_id(call, job)?;
        if !self.holder_with_secret(job, (index, generation), secret).await? {
            return Err(wrong_secret(call));
        }
        Ok((job, generation))
    }

    /// Whether `trainer` is registered in `job` (see [`registered`]).
    async fn known_trainer(&self, job: u64, trainer: u64) -> Result<bool, Status> {
        let read = || self.node.read(|state| state.knows_trainer(job, trainer));
        registered(read, self.linearizable()).await
    }

    /// The id of the job a request named, in the applied state.
    fn job_id(&self, call: &'static str, name: &str) -> Result<u64, Status> {
        job_id(&self.node, call, name)
    }

    /// The job's id and its restores with the model asked so far.
    fn job_restores(&self, call: &'static str, name: &str) -> Result<(u64, u64), Status> {
        job_restores(&self.node, call, name)
    }

    /// The queue policy a dataset report of job `name` is stamped with: the job's own once it
    /// has one (a shortcut report repeats whatever the job was submitted with), else the
    /// leader's flags.
    fn job_policy(&self, name: &str) -> QueuePolicy {
        let accepted = |state: &ReplicatedState| state.state().job_named(name)?.policy();
        self.node.read(accepted).unwrap_or(self.policy)
    }

    /// Whether the job (by id) was cancelled or no longer exists.
    fn job_ended(&self, job: Option<u64>) -> bool {
        let cancelled =
            |job| self.node.read(|state| state.job(job).is_none_or(|j| j.is_cancelled()));
        job.is_none_or(cancelled)
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
        let policy = self.job_policy(&request.job);
        report_dataset(&self.proposer, &self.scanner, request, policy)
            .await
            .map(tonic::Response::new)
    }

    async fn report_index_dataset(
        &self,
        request: tonic::Request<pb::ReportIndexDatasetRequest>,
    ) -> Reply<pb::ReportDatasetReply> {
        let request = request.into_inner();
        let policy = self.job_policy(&request.job);
        let reply = report_index_dataset(&self.proposer, policy, request).await?;
        Ok(tonic::Response::new(reply))
    }

    async fn register_trainer(
        &self,
        request: tonic::Request<pb::RegisterTrainerRequest>,
    ) -> Reply<pb::RegisterTrainerReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        let command = for_job(&request.job, Command::RegisterTrainer { name: request.name });
        match self.propose(Some(client), command).await? {
            Response::TrainerRegistered { trainer } => {
                let job = self.job_id("RegisterTrainer", &request.job)?;
                self.duties.trainer_alive(self.node.term(), (job, trainer));
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
        let job = existing_job(&self.node, "Heartbeat", &request.job)?;
        if self.job_ended(job) {
            return Ok(tonic::Response::new(pb::HeartbeatReply { known: false, job_ended: true }));
        }
        let job = job.unwrap_or_default();
        let known = self.known_trainer(job, trainer).await?;
        if known {
            self.duties.trainer_alive(term, (job, trainer));
            self.duties.trainer_progress(term, (job, trainer), request.tasks_done);
        }
        Ok(tonic::Response::new(pb::HeartbeatReply { known, job_ended: false }))
    }

    async fn get_task(
        &self,
        request: tonic::Request<pb::GetTaskRequest>,
    ) -> Reply<pb::GetTaskReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        let command = Command::GetTask { trainer: request.trainer_id, pass: request.pass_index };
        let response = self.propose(Some(client), for_job(&request.job, command)).await?;
        let job = || self.job_id("GetTask", &request.job);
        if !matches!(response, Response::UnknownTrainer | Response::NoDataset) {
            self.duties.trainer_alive(self.node.term(), (job()?, request.trainer_id));
        }
        let reply = |outcome: Outcome, task, current_pass| pb::GetTaskReply {
            outcome: outcome as i32,
            task,
            current_pass,
        };
        let reply = match response {
            Response::Task(assignment) => {
                metrics::counter!("raftrain_master_tasks_dispatched_total").increment(1);
                let job = job()?;
                let data = self.node.read(|state| state.job(job)?.task_data(assignment.task));
                // The dataset is fixed once accepted, and a task answer needs one.
                let data = data.ok_or_else(|| unexpected("GetTask", Response::NoDataset))?;
                reply(Outcome::Task, Some(task(&assignment, &data)), assignment.pass)
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
            let job = self.job_id("TaskFinished", &request.job)?;
            let pending = self.node.read(|state| state.job(job)?.pending_epoch(request.task_id));
            epoch = pending.unwrap_or(epoch);
        }
        let command = for_job(&request.job, Command::TaskFinished { task: request.task_id, epoch });
        if crate::planted::active("answer-before-commit") {
            let proposer = self.proposer.clone();
            tokio::spawn(async move { proposer.propose(Some(client), command).await });
            let reply = pb::TaskReportReply { accepted: true, job_cancelled: false };
            return Ok(tonic::Response::new(reply));
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
        let response = self.propose(Some(client), for_job(&request.job, command)).await?;
        let reply = task_report("TaskFailed", response)?;
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
        let reply = match self.propose(Some(client), for_job(&request.job, command)).await? {
            Response::SlotClaimed { index, generation, checkpoint } => {
                let (job, model_restore) = self.job_restores("ClaimPServerSlot", &request.job)?;
                self.duties.pserver_granted(self.node.term(), (job, index, generation));
                let checkpoint = checkpoint.as_ref().map(checkpoint_to_proto);
                pb::ClaimPServerSlotReply {
                    granted: true,
                    index,
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

    async fn p_server_heartbeat(
        &self,
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
        let term = self.node.term();
        self.current_leader().await?;
        let job = existing_job(&self.node, "PServerHeartbeat", &request.job)?;
        if self.job_ended(job) {
            return not_held(true);
        }
        let (job, index) = (job.unwrap_or_default(), request.index);
        let held = self.node.read(|state| state.slot_held(job, index, generation, secret));
        // The lease is checked after the state: a slot whose lease ran out is not confirmed,
        // even while its release is still on its way through the log.
        let holds_slot = held && self.duties.pserver_alive(term, (job, index, generation));
        if !holds_slot {
            return not_held(false);
        }
        self.steps.heard((job, index), generation, request.step);
        self.steps.forget_gone_jobs(|job| self.node.read(|state| state.job(job).is_some()));
        let asks = self.node.read(|state| state.job(job).map(|job| job.slot_asks(index)));
        Ok(tonic::Response::new(super::slot_model::heartbeat_reply(asks.unwrap_or_default())))
    }

    async fn list_p_servers(
        &self,
        request: tonic::Request<pb::ListPServersRequest>,
    ) -> Reply<pb::ListPServersReply> {
        self.linearizable().await?;
        let name = &request.get_ref().job;
        let table = self.node.read(|state| {
            let job = super::watch::watched_job(state, name)?;
            Ok::<_, Status>(super::watch::pserver_table(state, job))
        })?;
        Ok(tonic::Response::new(table))
    }

    type WatchPServersStream = super::watch::PServerStream;

    async fn watch_p_servers(
        &self,
        request: tonic::Request<pb::ListPServersRequest>,
    ) -> Reply<Self::WatchPServersStream> {
        self.linearizable().await?;
        let name = request.into_inner().job;
        self.node.read(|state| super::watch::watched_job(state, &name))?;
        Ok(tonic::Response::new(super::watch::watch_pservers(self.node.clone(), name)))
    }

    async fn record_checkpoint(
        &self,
        request: tonic::Request<pb::RecordCheckpointRequest>,
    ) -> Reply<pb::RecordCheckpointReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        let meta = checkpoint_from_proto(request.meta)?;
        let index = request.index;
        let slot = (index, request.generation, request.secret.as_ref());
        let (job, generation) = self.checked_holder("RecordCheckpoint", &request.job, slot).await?;
        let steps = &self.steps;
        steps.check((job, index), generation, meta.step).map_err(Status::invalid_argument)?;
        let command = match request.for_progress {
            0 => Command::RecordCheckpoint { index, generation, meta },
            progress => Command::TagSlotCheckpoint { index, generation, progress, meta },
        };
        let command = Command::in_job(job, command);
        let recorded = match self.propose(Some(client), command).await? {
            Response::Accepted => true,
            Response::Stale => false,
            other => return Err(unexpected("RecordCheckpoint", other)),
        };
        let recorded_step = self.node.read(|state| state.recorded_step(job, index));
        Ok(tonic::Response::new(pb::RecordCheckpointReply { recorded, recorded_step }))
    }

    async fn record_eval(
        &self,
        request: tonic::Request<pb::RecordEvalRequest>,
    ) -> Reply<pb::RecordEvalReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        let command = Command::RecordEval {
            pass: request.pass_index,
            loss: request.loss,
            accuracy: request.accuracy,
        };
        match self.propose(Some(client), for_job(&request.job, command)).await? {
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

    async fn status(&self, request: tonic::Request<pb::StatusRequest>) -> Reply<pb::StatusReply> {
        if !crate::planted::active("stale-status") {
            self.linearizable().await?;
        }
        let cluster = consensus::cluster_info_reply(&self.node.cluster_info());
        // Before any job exists, or with several and none named, the group still has a
        // status: its cluster, and no job (`ListJobs` sums up each).
        let name = &request.get_ref().job;
        let job = match self.job_id("Status", name) {
            Ok(job) => Some(job),
            Err(status) if status.code() == tonic::Code::FailedPrecondition => None,
            Err(status) if name.is_empty() && status.code() == tonic::Code::InvalidArgument => None,
            Err(status) => return Err(status),
        };
        let term = cluster.term;
        let soft = |trainer| TrainerSoftState {
            last_heartbeat_ms_ago: self
                .duties
                .trainer_heard_ago(term, trainer)
                .map(|ago| ago.as_millis() as u64),
            tasks_done: self.duties.trainer_tasks_done(term, trainer),
        };
        let reply =
            self.node.read(|state| super::status_view::status_reply(state, job, cluster, soft));
        Ok(tonic::Response::new(reply))
    }

    async fn submit_job(
        &self,
        request: tonic::Request<pb::SubmitJobRequest>,
    ) -> Reply<pb::ReportDatasetReply> {
        let request = request.into_inner();
        super::job_rpc::submit_job(&self.proposer, &self.scanner, self.policy, request)
            .await
            .map(tonic::Response::new)
    }

    async fn list_jobs(
        &self,
        _request: tonic::Request<pb::ListJobsRequest>,
    ) -> Reply<pb::ListJobsReply> {
        self.linearizable().await?;
        let retention_ms = self.duties.job_retention_ms();
        let failures = self.duties.reload_failures();
        let reply =
            self.node.read(|state| super::job_rpc::list_jobs(state, retention_ms, failures));
        Ok(tonic::Response::new(reply))
    }

    async fn cancel_job(
        &self,
        request: tonic::Request<pb::CancelJobRequest>,
    ) -> Reply<pb::CancelJobReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        super::admission::require_named(&request.job)?;
        match self.propose(Some(client), for_job(&request.job, Command::CancelJob)).await? {
            Response::Accepted => Ok(tonic::Response::new(pb::CancelJobReply {})),
            other => Err(unexpected("CancelJob", other)),
        }
    }

    async fn checkpoint_job(
        &self,
        request: tonic::Request<pb::CheckpointJobRequest>,
    ) -> Reply<pb::CheckpointJobReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        super::admission::require_named(&request.job)?;
        let command = for_job(&request.job, Command::CheckpointProgress);
        match self.propose(Some(client), command).await? {
            Response::ProgressCheckpointed { id, pass, done } => {
                let asked = self.node.read(|state| state.pservers_asked(&request.job, id));
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

    async fn restore_job(
        &self,
        request: tonic::Request<pb::RestoreJobRequest>,
    ) -> Reply<pb::RestoreJobReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        super::admission::require_named(&request.job)?;
        let (checkpoint, data_only) = (request.checkpoint_id, request.data_only);
        let command = Command::RestoreProgress { checkpoint, data_only };
        let reply = match self.propose(Some(client), for_job(&request.job, command)).await? {
            Response::ProgressRestored { pass, todo } => {
                pb::RestoreJobReply { pass_index: pass, todo, reloading: 0 }
            }
            Response::RestoreWaiting { pass, pservers } => {
                pb::RestoreJobReply { pass_index: pass, todo: 0, reloading: pservers }
            }
            other => return Err(unexpected("RestoreJob", other)),
        };
        Ok(tonic::Response::new(reply))
    }

    async fn report_reloaded(
        &self,
        request: tonic::Request<pb::ReportReloadedRequest>,
    ) -> Reply<pb::ReportReloadedReply> {
        let request = request.into_inner();
        let index = request.index;
        let slot = (index, request.generation, request.secret.as_ref());
        if !request.failure.is_empty() {
            self.confirmed_leader().await?;
            let (job, generation) =
                self.checked_holder("ReportReloaded", &request.job, slot).await?;
            self.duties.reload_failures().report((job, index, generation), &request.failure);
            return Ok(tonic::Response::new(pb::ReportReloadedReply {}));
        }
        let client = stamp(request.stamp)?;
        let (job, generation) = self.checked_holder("ReportReloaded", &request.job, slot).await?;
        let command = Command::SlotReloaded { index, generation, restore: request.restore };
        let command = Command::in_job(job, command);
        match self.propose(Some(client), command).await? {
            Response::Accepted | Response::Stale | Response::ProgressRestored { .. } => {
                Ok(tonic::Response::new(pb::ReportReloadedReply {}))
            }
            other => Err(unexpected("ReportReloaded", other)),
        }
    }

    /// A trainer's planned leave: the same command the leader proposes when its lease runs
    /// out, so its tasks go back to the queue alike, only sooner.
    async fn leave_job(
        &self,
        request: tonic::Request<pb::LeaveJobRequest>,
    ) -> Reply<pb::LeaveJobReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        let command = for_job(&request.job, Command::TrainerLost { trainer: request.trainer_id });
        let requeued = match self.propose(Some(client), command).await? {
            Response::TrainerRemoved { requeued } => requeued.len() as u64,
            Response::UnknownTrainer => 0,
            other => return Err(unexpected("LeaveJob", other)),
        };
        Ok(tonic::Response::new(pb::LeaveJobReply { requeued }))
    }

    /// A holder's planned release: the same command the leader proposes when a lease runs
    /// out, so a restore waiting for the slot and the table's watchers see it alike.
    async fn release_p_server_slot(
        &self,
        request: tonic::Request<pb::ReleasePServerSlotRequest>,
    ) -> Reply<pb::ReleasePServerSlotReply> {
        let request = request.into_inner();
        let client = stamp(request.stamp)?;
        let index = request.index;
        let slot = (index, request.generation, request.secret.as_ref());
        let (job, generation) =
            self.checked_holder("ReleasePServerSlot", &request.job, slot).await?;
        let command = Command::ReleasePServerSlot { index, generation };
        let command = Command::in_job(job, command);
        let released = match self.propose(Some(client), command).await? {
            Response::Accepted => true,
            Response::SlotNotHeld => false,
            other => return Err(unexpected("ReleasePServerSlot", other)),
        };
        Ok(tonic::Response::new(pb::ReleasePServerSlotReply { released }))
    }
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

/// FNV-1a, 64 bits: a digest replicas compare, not a defence against forgery.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The incarnation id a granted claim names: the job's own (planted bug
/// `claim-another-incarnation`: the next one).
fn told_incarnation(job: u64) -> u64 {
    match crate::planted::active("claim-another-incarnation") {
        true => job + 1,
        false => job,
    }
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
