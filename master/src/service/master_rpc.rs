//! The master gRPC service: each RPC validates its fields, turns into one replicated command
//! (stamped with the leader's clock and the client's stamp), and maps the state machine's
//! answer back to a reply. Reads are linearizable; heartbeats touch only leader soft state.
//!
//! The calls live by area in `master_rpc/`: `task_calls.rs` (datasets, trainers, tasks),
//! `slot_calls.rs` (pserver slots) and `job_calls.rs` (jobs, status); each is a function named
//! as its RPC taking the service, which the service trait's method here calls
//! (`task_calls::get_task(self, ..)`), so a call that goes missing fails to compile. This file
//! keeps the service's state and what every call shares: proposing, leadership, holders.

use super::conversions::{generation, secret};
use super::dataset_report::DatasetScanner;
use super::job_scope::{job_id, job_restores};
use super::proposer::Proposer;
use super::rendezvous_waits::RendezvousWaits;
use super::reported_steps::ReportedSteps;
use super::snapshot_save::SnapshotSaves;
use super::status_mapping::{not_leader, write_error, wrong_secret};
use crate::dataset_scan::{DataRoot, ScanLimits};
use crate::leader::LeaderDuties;
use crate::replicated_state::ReplicatedState;
use crate::state::{ClientStamp, Command, QueuePolicy, Response, SlotSecret};
use consensus::ConsensusNode;
use proto::master as pb;
use std::sync::Arc;
use tonic::Status;

mod ask_stream;
mod batched_asks;
mod job_calls;
mod member_calls;
mod rendezvous_calls;
mod slot_calls;
mod task_calls;

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
    /// The rendezvous reads waiting for keys now.
    rendezvous_waits: Arc<RendezvousWaits>,
    /// The one snapshot save this master serves at a time.
    saves: SnapshotSaves,
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
        let rendezvous_waits = Arc::default();
        let node = proposer.node().clone();
        let saves = SnapshotSaves::default();
        Self { node, proposer, duties, policy, scanner, steps, rendezvous_waits, saves }
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
        // client to rediscover instead of back here, until another member leads.
        let info = self.node.cluster_info();
        let elsewhere = info.leader_id.is_some_and(|leader| leader != self.node.id());
        let leader_addr = info.leader_addr.filter(|_| elsewhere || !self.node.is_leaving());
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
    fn job_id(&self, call: &'static str, job: &str) -> Result<u64, Status> {
        job_id(&self.node, call, job)
    }

    /// The job's id and its restores with the model asked so far.
    fn job_restores(&self, call: &'static str, job: &str) -> Result<(u64, u64), Status> {
        job_restores(&self.node, call, job)
    }

    /// The queue policy a dataset report of job `job` is stamped with: the job's own once it
    /// has one (a shortcut report repeats whatever the job was submitted with), else the
    /// leader's flags.
    fn job_policy(&self, job: &str) -> QueuePolicy {
        let accepted = |state: &ReplicatedState| state.state().job_named(job)?.policy();
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
        task_calls::report_dataset(self, request).await
    }

    async fn report_index_dataset(
        &self,
        request: tonic::Request<pb::ReportIndexDatasetRequest>,
    ) -> Reply<pb::ReportDatasetReply> {
        task_calls::report_index_dataset(self, request).await
    }

    async fn register_trainer(
        &self,
        request: tonic::Request<pb::RegisterTrainerRequest>,
    ) -> Reply<pb::RegisterTrainerReply> {
        task_calls::register_trainer(self, request).await
    }

    async fn heartbeat(
        &self,
        request: tonic::Request<pb::HeartbeatRequest>,
    ) -> Reply<pb::HeartbeatReply> {
        task_calls::heartbeat(self, request).await
    }

    async fn get_task(
        &self,
        request: tonic::Request<pb::GetTaskRequest>,
    ) -> Reply<pb::GetTaskReply> {
        task_calls::get_task(self, request).await
    }

    async fn get_tasks(
        &self,
        request: tonic::Request<pb::GetTasksRequest>,
    ) -> Reply<pb::GetTasksReply> {
        batched_asks::get_tasks(self, request).await
    }

    type GetTaskStreamStream = ask_stream::AskStream;

    async fn get_task_stream(
        &self,
        request: tonic::Request<tonic::Streaming<pb::GetTaskRequest>>,
    ) -> Reply<Self::GetTaskStreamStream> {
        Ok(tonic::Response::new(ask_stream::serve(self.clone(), request.into_inner())))
    }

    async fn rendezvous_write(
        &self,
        request: tonic::Request<pb::RendezvousWriteRequest>,
    ) -> Reply<pb::RendezvousWriteReply> {
        rendezvous_calls::rendezvous_write(self, request).await
    }

    async fn rendezvous_read(
        &self,
        request: tonic::Request<pb::RendezvousReadRequest>,
    ) -> Reply<pb::RendezvousReadReply> {
        rendezvous_calls::rendezvous_read(self, request).await
    }

    async fn list_rendezvous(
        &self,
        request: tonic::Request<pb::ListRendezvousRequest>,
    ) -> Reply<pb::ListRendezvousReply> {
        rendezvous_calls::list_rendezvous(self, request).await
    }

    async fn delete_rendezvous(
        &self,
        request: tonic::Request<pb::DeleteRendezvousRequest>,
    ) -> Reply<pb::DeleteRendezvousReply> {
        rendezvous_calls::delete_rendezvous(self, request).await
    }

    async fn task_progress(
        &self,
        request: tonic::Request<pb::TaskProgressRequest>,
    ) -> Reply<pb::TaskProgressReply> {
        task_calls::task_progress(self, request).await
    }

    async fn task_finished(
        &self,
        request: tonic::Request<pb::TaskFinishedRequest>,
    ) -> Reply<pb::TaskReportReply> {
        task_calls::task_finished(self, request).await
    }

    async fn task_failed(
        &self,
        request: tonic::Request<pb::TaskFailedRequest>,
    ) -> Reply<pb::TaskReportReply> {
        task_calls::task_failed(self, request).await
    }

    async fn claim_p_server_slot(
        &self,
        request: tonic::Request<pb::ClaimPServerSlotRequest>,
    ) -> Reply<pb::ClaimPServerSlotReply> {
        slot_calls::claim_p_server_slot(self, request).await
    }

    async fn p_server_heartbeat(
        &self,
        request: tonic::Request<pb::PServerHeartbeatRequest>,
    ) -> Reply<pb::PServerHeartbeatReply> {
        slot_calls::p_server_heartbeat(self, request).await
    }

    async fn list_p_servers(
        &self,
        request: tonic::Request<pb::ListPServersRequest>,
    ) -> Reply<pb::ListPServersReply> {
        slot_calls::list_p_servers(self, request).await
    }

    type WatchPServersStream = super::watch::PServerStream;
    type SaveSnapshotStream = super::snapshot_save::SnapshotStream;

    async fn save_snapshot(
        &self,
        _request: tonic::Request<pb::SaveSnapshotRequest>,
    ) -> Reply<Self::SaveSnapshotStream> {
        Ok(tonic::Response::new(self.saves.save(&self.node).await?))
    }

    async fn members(
        &self,
        request: tonic::Request<pb::MembersRequest>,
    ) -> Reply<pb::MembersReply> {
        member_calls::members(self, request).await
    }

    async fn change_member(
        &self,
        request: tonic::Request<pb::ChangeMemberRequest>,
    ) -> Reply<pb::MembersReply> {
        member_calls::change_member(self, request).await
    }

    async fn watch_p_servers(
        &self,
        request: tonic::Request<pb::ListPServersRequest>,
    ) -> Reply<Self::WatchPServersStream> {
        slot_calls::watch_p_servers(self, request).await
    }

    async fn record_checkpoint(
        &self,
        request: tonic::Request<pb::RecordCheckpointRequest>,
    ) -> Reply<pb::RecordCheckpointReply> {
        slot_calls::record_checkpoint(self, request).await
    }

    async fn record_eval(
        &self,
        request: tonic::Request<pb::RecordEvalRequest>,
    ) -> Reply<pb::RecordEvalReply> {
        task_calls::record_eval(self, request).await
    }

    async fn cluster_info(
        &self,
        request: tonic::Request<proto::raft::ClusterInfoRequest>,
    ) -> Reply<proto::raft::ClusterInfoReply> {
        job_calls::cluster_info(self, request).await
    }

    async fn status(&self, request: tonic::Request<pb::StatusRequest>) -> Reply<pb::StatusReply> {
        job_calls::status(self, request).await
    }

    async fn submit_job(
        &self,
        request: tonic::Request<pb::SubmitJobRequest>,
    ) -> Reply<pb::ReportDatasetReply> {
        job_calls::submit_job(self, request).await
    }

    async fn list_jobs(
        &self,
        _request: tonic::Request<pb::ListJobsRequest>,
    ) -> Reply<pb::ListJobsReply> {
        job_calls::list_jobs(self, _request).await
    }

    async fn cancel_job(
        &self,
        request: tonic::Request<pb::CancelJobRequest>,
    ) -> Reply<pb::CancelJobReply> {
        job_calls::cancel_job(self, request).await
    }

    async fn checkpoint_job(
        &self,
        request: tonic::Request<pb::CheckpointJobRequest>,
    ) -> Reply<pb::CheckpointJobReply> {
        job_calls::checkpoint_job(self, request).await
    }

    async fn restore_job(
        &self,
        request: tonic::Request<pb::RestoreJobRequest>,
    ) -> Reply<pb::RestoreJobReply> {
        job_calls::restore_job(self, request).await
    }

    async fn report_reloaded(
        &self,
        request: tonic::Request<pb::ReportReloadedRequest>,
    ) -> Reply<pb::ReportReloadedReply> {
        slot_calls::report_reloaded(self, request).await
    }

    async fn leave_job(
        &self,
        request: tonic::Request<pb::LeaveJobRequest>,
    ) -> Reply<pb::LeaveJobReply> {
        task_calls::leave_job(self, request).await
    }

    async fn release_p_server_slot(
        &self,
        request: tonic::Request<pb::ReleasePServerSlotRequest>,
    ) -> Reply<pb::ReleasePServerSlotReply> {
        slot_calls::release_p_server_slot(self, request).await
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
