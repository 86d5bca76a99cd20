//! `JoinedJob`: how a trainer learns its job's spec. A submitted job's spec comes from the
//! masters, so a trainer joining it by `--job` need not repeat `--dataset` or `--passes` (a
//! value it gives must be the job's); a trainer whose job does not exist yet submits it when
//! it has `--dataset`, and otherwise waits until someone submits it.

use std::time::Duration;

use anyhow::Context as _;
use client::{ChunkRef, ClientError, JobStatus, MasterClient};

use crate::config::{TrainerConfig, PASSES_DEFAULT};

/// Between looks at the masters while the job is not submitted yet.
const JOB_WAIT_MS: u64 = 500;

/// The job a trainer joined, as far as it needs to know it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedJob {
    pub passes: u32,
    /// The first chunk of the job's dataset, where a trainer without `--dataset` or
    /// `--features` reads its feature count (`None` from masters that do not send it).
    pub first_chunk: Option<ChunkRef>,
}

/// A `--passes` given to join a job that has another pass count: a configuration no retry
/// fixes (the trainer's exit status says so).
#[derive(Debug, thiserror::Error)]
#[error(
    "--passes {given} differs from job {job}'s passes {job_passes}: leave --passes out to \
     take the job's"
)]
pub struct PassesDiffer {
    pub job: String,
    pub given: u32,
    pub job_passes: u32,
}

/// The trainer was pointed at an index-range job, which it cannot train: a configuration
/// that no retry fixes (its own exit status says so).
#[derive(Debug, thiserror::Error)]
#[error(
    "job {job:?} is an index-range job (size {size}, shard size {shard_size}): its tasks are \
     index ranges the trainers read themselves, and `raftrain trainer` trains RecordIO \
     datasets only; train this job with the Python package"
)]
pub struct IndexJobRefused {
    pub job: String,
    pub size: u64,
    pub shard_size: u64,
}

impl JoinedJob {
    /// Joins the job `config.job` names: takes a submitted job's spec (checking what the flags
    /// say of it), submits the job when it does not exist and `--dataset` is given, or waits,
    /// saying so once, until it is submitted.
    pub async fn join(config: &TrainerConfig, master: &MasterClient) -> anyhow::Result<Self> {
        let mut waiting_logged = false;
        // A job submitted by someone else between this trainer's look and its own report is
        // joined on a second look, once: the report was refused for its default passes.
        let mut looked_again = false;
        loop {
            if let Some(status) = submitted(master).await? {
                return Self::from_submitted(config, master, status).await;
            }
            let Some(dataset) = &config.dataset else {
                if !waiting_logged {
                    log_waiting(&config.job, master).await;
                    waiting_logged = true;
                }
                tokio::time::sleep(Duration::from_millis(JOB_WAIT_MS)).await;
                continue;
            };
            let passes = config.passes.unwrap_or(PASSES_DEFAULT);
            match report(master, &config.job, dataset, passes).await {
                Ok(()) => return Ok(JoinedJob { passes, first_chunk: None }),
                Err(_) if config.passes.is_none() && !looked_again => looked_again = true,
                Err(error) => return Err(error),
            }
        }
    }

    /// Joins the submitted job `status` shows: refuses an index job and a `--passes` that is
    /// not the job's; a `--dataset` is reported under the job's passes, so the masters check
    /// that it names the job's files.
    async fn from_submitted(
        config: &TrainerConfig,
        master: &MasterClient,
        status: JobStatus,
    ) -> anyhow::Result<Self> {
        let job = status.job.clone().unwrap_or_else(|| config.job.clone());
        if let Some((size, shard_size)) = status.index_range() {
            return Err(IndexJobRefused { job, size, shard_size }.into());
        }
        if let Some(given) = config.passes.filter(|given| *given != status.passes) {
            return Err(PassesDiffer { job, given, job_passes: status.passes }.into());
        }
        if let Some(dataset) = &config.dataset {
            report(master, &config.job, dataset, status.passes).await?;
        }
        tracing::info!(job, passes = status.passes, "joined the submitted job");
        Ok(JoinedJob { passes: status.passes, first_chunk: status.first_chunk })
    }
}

/// Says once that the trainer waits for job `job` to be submitted, naming the jobs the group
/// runs under other names (a `--job` left out, or mistyped, would otherwise wait in silence).
async fn log_waiting(job: &str, master: &MasterClient) {
    let others: Vec<String> = match master.list_jobs().await {
        Ok(list) => list
            .jobs
            .into_iter()
            .filter(|each| !each.state.ended() && each.job != job)
            .map(|each| each.job)
            .collect(),
        Err(_) => Vec::new(),
    };
    if others.is_empty() {
        tracing::info!(
            job,
            "waiting for the job to be submitted (`raftrain job submit`, or a trainer with \
             --dataset)"
        );
    } else {
        tracing::warn!(
            job,
            others = others.join(", "),
            "waiting for the job to be submitted (`raftrain job submit`, or a trainer with \
             --dataset); the group runs other jobs: is --job the one meant?"
        );
    }
}

/// The job's status if it was submitted (a dataset accepted); `None` while no job of its name
/// exists or it has no dataset yet. A cancelled job is `JobCancelled`, which the trainer
/// treats as its end.
async fn submitted(master: &MasterClient) -> anyhow::Result<Option<JobStatus>> {
    match master.status().await {
        Ok(status) if status.job_cancelled => {
            Err(ClientError::JobCancelled { call: "Status" }.into())
        }
        Ok(status) if status.dataset.is_some() => Ok(Some(status)),
        Ok(_) | Err(ClientError::NoSuchJob { .. }) => Ok(None),
        Err(error) => Err(error).context("ask the masters for the job's spec"),
    }
}

/// Reports `patterns` as job `job`'s dataset: submits the job when none of its name exists;
/// the masters refuse files that are not a submitted job's.
async fn report(
    master: &MasterClient,
    job: &str,
    patterns: &[String],
    passes: u32,
) -> anyhow::Result<()> {
    let sizes = master.report_dataset(job, patterns, passes).await.context("report the dataset")?;
    tracing::info!(tasks = sizes.task_count, records = sizes.record_count, "dataset accepted");
    Ok(())
}
