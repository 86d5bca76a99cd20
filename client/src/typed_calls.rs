//! `MasterClient`'s typed API: one method per RPC, so pservers, trainers and tools never build
//! protobuf. Writes are stamped once and retried with the same stamp (exactly-once); every
//! attempt carries its own deadline (`timed`).

use super::conversions::{checkpoint_to_proto, pserver_table, slot_asks, slot_lease, task_outcome};
use super::error::ClientError;
use super::master_client::{service_client, timed, MasterClient};
use super::status::{GroupView, JobStatus};
use super::status_conversions::{group_view, job_status};
use super::types::{
    CheckpointMeta, CheckpointRecorded, DatasetSizes, Fault, PServerTable, SlotHeartbeat,
    SlotLease, SlotSecret, TaskOutcome, TrainerHeartbeat, TrainerRegistration,
};
use super::watch::PServerWatch;
use proto::master as pb;
use proto::prost::bytes::Bytes;
use std::time::Duration;

/// One attempt of `report_dataset` may take this long: the leader scans every chunk header of
/// the dataset and proposes it in batches (a million chunks is about a thousand log entries),
/// far longer than an ordinary call's attempt.
pub const REPORT_RPC_TIMEOUT_MS: u64 = 300_000;

impl MasterClient {
    /// Registers a trainer under `name` (for status only); the id goes in every later call.
    pub async fn register_trainer(&self, name: &str) -> Result<TrainerRegistration, ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .write("RegisterTrainer", |mut service, stamp| {
                let job = self.job().to_string();
                let request =
                    pb::RegisterTrainerRequest { stamp: Some(stamp), name: name.into(), job };
                async move { service.register_trainer(timed(request, timeout)).await }
            })
            .await?;
        Ok(TrainerRegistration { trainer_id: reply.trainer_id, lease_ms: reply.lease_ms })
    }

    /// Renews the trainer's lease and says how many tasks it finished since it registered
    /// (shown by status); whether the master still knows it, or its job ended.
    pub async fn heartbeat(
        &self,
        trainer_id: u64,
        tasks_done: u64,
    ) -> Result<TrainerHeartbeat, ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .call("Heartbeat", |mut service| {
                let job = self.job().to_string();
                let request = pb::HeartbeatRequest { trainer_id, tasks_done, job };
                async move { service.heartbeat(timed(request, timeout)).await }
            })
            .await?;
        Ok(match (reply.job_ended, reply.known) {
            (true, _) => TrainerHeartbeat::JobEnded,
            (false, true) => TrainerHeartbeat::Known,
            (false, false) => TrainerHeartbeat::Unknown,
        })
    }

    /// The next task of `pass` for the trainer, or why there is none.
    pub async fn get_task(&self, trainer_id: u64, pass: u32) -> Result<TaskOutcome, ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .write("GetTask", |mut service, stamp| {
                let job = self.job().to_string();
                let request = pb::GetTaskRequest {
                    stamp: Some(stamp),
                    trainer_id,
                    pass_index: pass,
                    job,
                    finished: Vec::new(),
                    together: 1,
                };
                // The master the attempt goes to (this client's leader a moment ago).
                let addr = self.leader_hint().unwrap_or_default();
                async move { self.ask_alone(&mut service, &addr, request, timeout).await }
            })
            .await?;
        task_outcome(reply)
    }

    /// Reports a task done; `false` when its epoch is no longer the pending one (fenced off);
    /// `ClientError::JobCancelled` when the job was cancelled.
    pub async fn task_finished(&self, task_id: u64, epoch: u64) -> Result<bool, ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .write("TaskFinished", |mut service, stamp| {
                let job = self.job().to_string();
                let request = pb::TaskFinishedRequest { stamp: Some(stamp), task_id, epoch, job };
                async move { service.task_finished(timed(request, timeout)).await }
            })
            .await?;
        task_reported("TaskFinished", &reply)
    }

    /// Reports that this trainer is still at work on `task_id` under `epoch`: its deadline
    /// moves to a whole timeout from now. The timeout (report again well within it), or
    /// `None` when the task is no longer held under that epoch (taken back, or reported).
    pub async fn task_progress(
        &self,
        task_id: u64,
        epoch: u64,
    ) -> Result<Option<Duration>, ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .write("TaskProgress", |mut service, stamp| {
                let job = self.job().to_string();
                let request = pb::TaskProgressRequest { stamp: Some(stamp), task_id, epoch, job };
                async move { service.task_progress(timed(request, timeout)).await }
            })
            .await?;
        match (reply.job_cancelled, reply.held) {
            (true, _) => Err(ClientError::JobCancelled { call: "TaskProgress" }),
            (false, true) => Ok(Some(Duration::from_millis(reply.timeout_ms))),
            (false, false) => Ok(None),
        }
    }

    /// Reports a task failed with `reason` (cut to what the master keeps,
    /// [`super::FAILURE_REASON_BYTES_MAX`], so a huge one still fails the task) and whose
    /// `fault` it was; `false` when fenced off.
    pub async fn task_failed(
        &self,
        task_id: u64,
        epoch: u64,
        reason: &str,
        fault: Fault,
    ) -> Result<bool, ClientError> {
        let timeout = self.rpc_timeout();
        let fault = match fault {
            Fault::Content => pb::task_failed_request::Fault::Content,
            Fault::Local => pb::task_failed_request::Fault::Local,
        };
        let reply = self
            .write("TaskFailed", |mut service, stamp| {
                let request = pb::TaskFailedRequest {
                    stamp: Some(stamp),
                    task_id,
                    epoch,
                    reason: super::failure_reason::cut_reason(reason).into_owned(),
                    fault: fault as i32,
                    job: self.job().to_string(),
                };
                async move { service.task_failed(timed(request, timeout)).await }
            })
            .await?;
        task_reported("TaskFailed", &reply)
    }

    /// Claims a pserver slot for `addr` (host:port) with `secret` (from [`super::new_slot_secret`];
    /// heartbeats and checkpoint records of the slot must carry it); `None` when all `desired`
    /// are held.
    pub async fn claim_slot(
        &self,
        addr: &str,
        desired: u32,
        secret: SlotSecret,
    ) -> Result<Option<SlotLease>, ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .write("ClaimPServerSlot", |mut service, stamp| {
                let request = pb::ClaimPServerSlotRequest {
                    stamp: Some(stamp),
                    addr: addr.into(),
                    desired,
                    secret: secret.to_bytes().into(),
                    job: self.job().to_string(),
                };
                async move { service.claim_p_server_slot(timed(request, timeout)).await }
            })
            .await?;
        slot_lease(reply, secret)
    }

    /// Renews the lease of `lease`'s slot and reports the pserver's update `step`: whether the
    /// slot is still held under its generation and secret (if not, the pserver must stop
    /// serving and exit), or its job ended (the pserver stops and exits 0).
    pub async fn slot_heartbeat(
        &self,
        lease: &SlotLease,
        addr: &str,
        step: u64,
    ) -> Result<SlotHeartbeat, ClientError> {
        let timeout = self.rpc_timeout();
        let (slot, generation, secret) = holder(lease);
        let reply = self
            .call("PServerHeartbeat", |mut service| {
                let request = pb::PServerHeartbeatRequest {
                    index: slot,
                    addr: addr.into(),
                    generation,
                    secret: secret.clone(),
                    step,
                    job: self.job().to_string(),
                };
                async move { service.p_server_heartbeat(timed(request, timeout)).await }
            })
            .await?;
        Ok(match (reply.job_ended, reply.holds_slot) {
            (true, _) => SlotHeartbeat::JobEnded,
            (false, true) => SlotHeartbeat::Held(slot_asks(reply)),
            (false, false) => SlotHeartbeat::NotHeld,
        })
    }

    /// Records the checkpoint of `lease`'s slot; `ClientError::NotHolder` if its generation is
    /// not current (or its secret not the claim's).
    pub async fn record_checkpoint(
        &self,
        lease: &SlotLease,
        meta: &CheckpointMeta,
    ) -> Result<CheckpointRecorded, ClientError> {
        self.record_slot_file(lease, meta, 0).await
    }

    /// Records `meta` as `lease`'s slot's checkpoint for progress checkpoint `progress` (a
    /// heartbeat asked for it); whether it was recorded (`false`: the slot changed hands).
    pub async fn tag_checkpoint(
        &self,
        lease: &SlotLease,
        progress: u64,
        meta: &CheckpointMeta,
    ) -> Result<bool, ClientError> {
        let recorded = self.record_slot_file(lease, meta, progress).await?;
        Ok(recorded == CheckpointRecorded::Recorded)
    }

    /// Reports that `lease`'s slot reloaded its shard for restore `restore`.
    pub async fn report_reloaded(
        &self,
        lease: &SlotLease,
        restore: u64,
    ) -> Result<(), ClientError> {
        let timeout = self.rpc_timeout();
        let (slot, generation, secret) = holder(lease);
        self.write("ReportReloaded", |mut service, stamp| {
            let request = pb::ReportReloadedRequest {
                stamp: Some(stamp),
                job: self.job().to_string(),
                index: slot,
                generation,
                secret: secret.clone(),
                restore,
                failure: String::new(),
            };
            async move { service.report_reloaded(timed(request, timeout)).await }
        })
        .await?;
        Ok(())
    }

    /// Tells the leader why `lease`'s slot could not reload for restore `restore` (`job
    /// list` shows it while the restore waits). Unstamped: it changes no replicated state.
    pub async fn report_reload_failed(
        &self,
        lease: &SlotLease,
        restore: u64,
        reason: &str,
    ) -> Result<(), ClientError> {
        let timeout = self.rpc_timeout();
        let (slot, generation, secret) = holder(lease);
        self.call("ReportReloaded", |mut service| {
            let request = pb::ReportReloadedRequest {
                stamp: None,
                job: self.job().to_string(),
                index: slot,
                generation,
                secret: secret.clone(),
                restore,
                failure: reason.to_string(),
            };
            async move { service.report_reloaded(timed(request, timeout)).await }
        })
        .await?;
        Ok(())
    }

    /// Trainer `trainer_id` leaves its job (a planned shutdown): the number of tasks it held,
    /// back in the queue now.
    pub async fn leave_job(&self, trainer_id: u64) -> Result<u64, ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .write("LeaveJob", |mut service, stamp| {
                let job = self.job().to_string();
                let request = pb::LeaveJobRequest { stamp: Some(stamp), job, trainer_id };
                async move { service.leave_job(timed(request, timeout)).await }
            })
            .await?;
        Ok(reply.requeued)
    }

    /// Gives `lease`'s slot back (a planned shutdown, after the last checkpoint): whether it
    /// was still held under the lease's generation and is free now.
    pub async fn release_slot(&self, lease: &SlotLease) -> Result<bool, ClientError> {
        let timeout = self.rpc_timeout();
        let (slot, generation, secret) = holder(lease);
        let reply = self
            .write("ReleasePServerSlot", |mut service, stamp| {
                let request = pb::ReleasePServerSlotRequest {
                    stamp: Some(stamp),
                    job: self.job().to_string(),
                    index: slot,
                    generation,
                    secret: secret.clone(),
                };
                async move { service.release_p_server_slot(timed(request, timeout)).await }
            })
            .await?;
        Ok(reply.released)
    }

    /// `RecordCheckpoint` of `meta` for progress checkpoint `for_progress` (0: the newest).
    async fn record_slot_file(
        &self,
        lease: &SlotLease,
        meta: &CheckpointMeta,
        for_progress: u64,
    ) -> Result<CheckpointRecorded, ClientError> {
        let timeout = self.rpc_timeout();
        let (slot, generation, secret) = holder(lease);
        let reply = self
            .write("RecordCheckpoint", |mut service, stamp| {
                let request = pb::RecordCheckpointRequest {
                    stamp: Some(stamp),
                    index: slot,
                    meta: Some(checkpoint_to_proto(meta)),
                    generation,
                    secret: secret.clone(),
                    job: self.job().to_string(),
                    for_progress,
                };
                async move { service.record_checkpoint(timed(request, timeout)).await }
            })
            .await?;
        Ok(match reply.recorded {
            true => CheckpointRecorded::Recorded,
            false => CheckpointRecorded::Stale { recorded_step: reply.recorded_step },
        })
    }

    /// Records an evaluation of the model after `pass` (accuracy in 0..=1), shown by status.
    pub async fn record_eval(
        &self,
        pass: u32,
        loss: f32,
        accuracy: f32,
    ) -> Result<(), ClientError> {
        let timeout = self.rpc_timeout();
        self.write("RecordEval", |mut service, stamp| {
            let job = self.job().to_string();
            let request =
                pb::RecordEvalRequest { stamp: Some(stamp), pass_index: pass, loss, accuracy, job };
            async move { service.record_eval(timed(request, timeout)).await }
        })
        .await?;
        Ok(())
    }

    /// The pserver table (linearizable).
    pub async fn list_pservers(&self) -> Result<PServerTable, ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .call("ListPServers", |mut service| {
                let request = pb::ListPServersRequest { job: self.job().to_string() };
                async move { service.list_p_servers(timed(request, timeout)).await }
            })
            .await?;
        Ok(pserver_table(reply))
    }

    /// The pserver table now and after every change, following the leader (see
    /// [`PServerWatch`]).
    pub fn watch_pservers(&self) -> PServerWatch {
        PServerWatch::start(self.masters(), self.options().clone())
    }

    /// Reports the job's dataset (`patterns` as the masters see them); the first report wins,
    /// a repeat answers the accepted sizes. Each attempt may take [`REPORT_RPC_TIMEOUT_MS`].
    pub async fn report_dataset(
        &self,
        job: &str,
        patterns: &[String],
        passes: u32,
    ) -> Result<DatasetSizes, ClientError> {
        self.report_shuffled_dataset(job, patterns, passes, None).await
    }

    /// Reports the job's dataset as the index range `[0, size)` in tasks of `shard_size`
    /// indices (task i covers `[i * shard_size, min(size, (i + 1) * shard_size))`), for data
    /// the trainers index themselves and the masters never read. The first report of either
    /// kind wins; a repeat answers the accepted sizes (no chunks, no records), a different one
    /// is `InvalidArgument` naming what differs.
    pub async fn report_index_dataset(
        &self,
        job: &str,
        size: u64,
        shard_size: u64,
        passes: u32,
    ) -> Result<DatasetSizes, ClientError> {
        self.report_shuffled_index_dataset(job, (size, shard_size), passes, None).await
    }

    /// The client's job and the group as the leader sees them (a linearizable read).
    pub async fn status(&self) -> Result<JobStatus, ClientError> {
        self.status_of(self.job()).await
    }

    /// Job `job` (the empty name: the only job) and the group as the leader sees them.
    pub async fn status_of(&self, job: &str) -> Result<JobStatus, ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .call("Status", |mut service| {
                let request = pb::StatusRequest { job: job.to_string() };
                async move { service.status(timed(request, timeout)).await }
            })
            .await?;
        Ok(job_status(reply))
    }

    /// One master's own view of the group, asked of `addr` directly (no leader needed, no
    /// redirect): what `status` shows for each member, also without a quorum.
    pub async fn member_info(&self, addr: &str) -> Result<GroupView, ClientError> {
        let mut service = service_client(addr, self.options())?;
        let request = timed(proto::raft::ClusterInfoRequest::default(), self.rpc_timeout());
        let reply = service.cluster_info(request).await;
        reply
            .map(|reply| group_view(reply.into_inner()))
            .map_err(|status| ClientError::from_status("ClusterInfo", &status))
    }

    /// Master `addr`'s own applied state, as (index of its last entry, digest): replicas at
    /// the same index must report the same digest. Costs the master a full encoding.
    pub async fn member_digest(&self, addr: &str) -> Result<(u64, u64), ClientError> {
        let mut service = service_client(addr, self.options())?;
        let asked = proto::raft::ClusterInfoRequest { state_digest: true };
        let reply = service.cluster_info(timed(asked, self.rpc_timeout())).await;
        let reply = reply
            .map(tonic::Response::into_inner)
            .map_err(|status| ClientError::from_status("ClusterInfo", &status))?;
        Ok((reply.digest_applied_index, reply.state_digest))
    }

    pub async fn cluster_info(&self) -> Result<proto::raft::ClusterInfoReply, ClientError> {
        let timeout = self.rpc_timeout();
        self.call("ClusterInfo", |mut service| async move {
            service.cluster_info(timed(proto::raft::ClusterInfoRequest::default(), timeout)).await
        })
        .await
    }
}

/// A task report's answer: accepted or fenced off, or the job was cancelled.
fn task_reported(call: &'static str, reply: &pb::TaskReportReply) -> Result<bool, ClientError> {
    match reply.job_cancelled {
        true => Err(ClientError::JobCancelled { call }),
        false => Ok(reply.accepted),
    }
}

/// What every holder's call carries of its claim: slot, generation and secret.
fn holder(lease: &SlotLease) -> (u32, u64, Bytes) {
    (lease.slot, lease.generation, Bytes::from(lease.secret.to_bytes()))
}
