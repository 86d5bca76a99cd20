//! `MasterClient`'s job calls: submit, the dataset reports with their shuffle, list, cancel,
//! and the progress checkpoints. Each names its job explicitly (a tool manages many jobs),
//! unlike the member calls, which name the client's own (`ClientOptions::job`).

use super::conversions::dataset_sizes;
use super::error::ClientError;
use super::jobs::{JobList, JobSpec, ProgressCheckpoint, RestoredProgress};
use super::master_client::{timed, MasterClient};
use super::typed_calls::REPORT_RPC_TIMEOUT_MS;
use super::types::DatasetSizes;
use proto::master as pb;
use std::time::Duration;

impl MasterClient {
    /// Submits a job; a retry of the same spec answers the job's sizes again, another spec
    /// under a name in use is `InvalidArgument` naming what differs. Each attempt may take
    /// [`REPORT_RPC_TIMEOUT_MS`] (a RecordIO dataset is scanned).
    pub async fn submit_job(&self, spec: &JobSpec) -> Result<DatasetSizes, ClientError> {
        spec.check()
            .map_err(|message| ClientError::InvalidArgument { call: "SubmitJob", message })?;
        let timeout = Duration::from_millis(REPORT_RPC_TIMEOUT_MS);
        let reply = self
            .write("SubmitJob", |mut service, stamp| {
                let request = spec.to_proto(stamp);
                async move { service.submit_job(timed(request, timeout)).await }
            })
            .await?;
        Ok(dataset_sizes(reply))
    }

    /// [`MasterClient::report_dataset`] of a job shuffled with `shuffle_seed` (`None`: in
    /// order): its tasks come in a permutation of the seed and the pass, and the seed is part
    /// of the job's definition (a report with another one is refused, naming both).
    pub async fn report_shuffled_dataset(
        &self,
        job: &str,
        patterns: &[String],
        passes: u32,
        shuffle_seed: Option<u64>,
    ) -> Result<DatasetSizes, ClientError> {
        let timeout = Duration::from_millis(REPORT_RPC_TIMEOUT_MS);
        let reply = self
            .write("ReportDataset", |mut service, stamp| {
                let request = pb::ReportDatasetRequest {
                    stamp: Some(stamp),
                    job: job.into(),
                    patterns: patterns.to_vec(),
                    passes,
                    restart: false,
                    shuffle_seed,
                };
                async move { service.report_dataset(timed(request, timeout)).await }
            })
            .await?;
        Ok(dataset_sizes(reply))
    }

    /// [`MasterClient::report_index_dataset`] of a job shuffled with `shuffle_seed` (`None`:
    /// in order), as [`MasterClient::report_shuffled_dataset`] says.
    pub async fn report_shuffled_index_dataset(
        &self,
        job: &str,
        (size, shard_size): (u64, u64),
        passes: u32,
        shuffle_seed: Option<u64>,
    ) -> Result<DatasetSizes, ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .write("ReportIndexDataset", |mut service, stamp| {
                let request = pb::ReportIndexDatasetRequest {
                    stamp: Some(stamp),
                    job: job.into(),
                    size,
                    shard_size,
                    passes,
                    restart: false,
                    shuffle_seed,
                };
                async move { service.report_index_dataset(timed(request, timeout)).await }
            })
            .await?;
        Ok(dataset_sizes(reply))
    }

    /// Every job the group holds (a linearizable read).
    pub async fn list_jobs(&self) -> Result<JobList, ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .call("ListJobs", |mut service| async move {
                service.list_jobs(timed(pb::ListJobsRequest {}, timeout)).await
            })
            .await?;
        Ok(JobList::from_proto(reply))
    }

    /// Cancels job `job`: its trainers and pservers stop and exit 0. A repeat changes nothing.
    pub async fn cancel_job(&self, job: &str) -> Result<(), ClientError> {
        named("CancelJob", job)?;
        let timeout = self.rpc_timeout();
        self.write("CancelJob", |mut service, stamp| {
            let request = pb::CancelJobRequest { stamp: Some(stamp), job: job.to_string() };
            async move { service.cancel_job(timed(request, timeout)).await }
        })
        .await?;
        Ok(())
    }

    /// Records job `job`'s progress (pass and done tasks) as one replicated entry.
    pub async fn checkpoint_job(&self, job: &str) -> Result<ProgressCheckpoint, ClientError> {
        named("CheckpointJob", job)?;
        let timeout = self.rpc_timeout();
        let reply = self
            .write("CheckpointJob", |mut service, stamp| {
                let request = pb::CheckpointJobRequest { stamp: Some(stamp), job: job.to_string() };
                async move { service.checkpoint_job(timed(request, timeout)).await }
            })
            .await?;
        Ok(ProgressCheckpoint {
            id: reply.checkpoint_id,
            pass: reply.pass_index,
            done: reply.done,
            pservers_asked: reply.pservers_asked,
        })
    }

    /// Puts job `job`'s queue back to progress checkpoint `checkpoint`: what was done after it
    /// is done again. Unless `data_only`, a job with pservers gets their checkpoints for it
    /// back first (the queue goes back once every pserver reloaded: `reloading` says how many
    /// were asked).
    pub async fn restore_job(
        &self,
        job: &str,
        checkpoint: u64,
        data_only: bool,
    ) -> Result<RestoredProgress, ClientError> {
        named("RestoreJob", job)?;
        let timeout = self.rpc_timeout();
        let reply = self
            .write("RestoreJob", |mut service, stamp| {
                let job = job.to_string();
                let request = pb::RestoreJobRequest {
                    stamp: Some(stamp),
                    job,
                    checkpoint_id: checkpoint,
                    data_only,
                };
                async move { service.restore_job(timed(request, timeout)).await }
            })
            .await?;
        Ok(RestoredProgress {
            pass: reply.pass_index,
            todo: reply.todo,
            reloading: reply.reloading,
            job_id: reply.job_id,
        })
    }
}

/// Refuses a call that changes a job but names none, before anything is sent.
fn named(call: &'static str, job: &str) -> Result<(), ClientError> {
    super::job_name::require_job_name(job)
        .map_err(|message| ClientError::InvalidArgument { call, message })
}
