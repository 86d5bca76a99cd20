//! The values of the job calls: a job's spec (what `raftrain job submit` and its TOML file
//! say), a summary of each job the group holds, and progress checkpoints.

use proto::master as pb;

/// What a job reads: RecordIO files, or an index range the trainers read themselves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobDataset {
    /// Paths or glob patterns of RecordIO files, as the masters see them.
    RecordIo { patterns: Vec<String> },
    /// The indices `[0, size)` in tasks of `shard_size`.
    Index { size: u64, shard_size: u64 },
}

/// Which of the masters' queue policy flags a job overrides (`None`: the masters' flag).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolicyOverrides {
    pub chunks_per_task: Option<u32>,
    pub task_timeout_min_ms: Option<u64>,
    pub timeout_factor: Option<u32>,
    pub max_task_failures: Option<u32>,
    pub retry_failed_next_pass: Option<bool>,
}

/// A job to submit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSpec {
    pub job: String,
    pub dataset: JobDataset,
    pub passes: u32,
    pub policy: PolicyOverrides,
    /// Train again: if the job of this name ended (finished or cancelled, still retained),
    /// start a new incarnation of it with this spec; while it runs, join it as any submit
    /// does. Never cancels or replaces a running job.
    pub restart: bool,
    /// Shuffle the job with this seed (`client::shuffle`); `None`: tasks and samples in order.
    pub shuffle_seed: Option<u64>,
}

impl JobSpec {
    /// Checks what the masters would refuse: the name's syntax, the passes, the index range
    /// and the policy values; the error names the field.
    pub fn check(&self) -> Result<(), String> {
        super::job_name::check_job_name(&self.job)?;
        super::policy_bounds::check_passes(self.passes)?;
        if let JobDataset::Index { size, shard_size } = self.dataset {
            super::policy_bounds::check_index_range(size, shard_size)?;
        }
        super::policy_bounds::check_policy(&self.policy)
    }

    pub(crate) fn to_proto(&self, stamp: pb::ClientStamp) -> pb::SubmitJobRequest {
        let dataset = match &self.dataset {
            JobDataset::RecordIo { patterns } => {
                pb::submit_job_request::Dataset::Recordio(pb::RecordIoDataset {
                    patterns: patterns.clone(),
                })
            }
            JobDataset::Index { size, shard_size } => {
                pb::submit_job_request::Dataset::Index(pb::IndexDataset {
                    size: *size,
                    shard_size: *shard_size,
                })
            }
        };
        let policy = &self.policy;
        pb::SubmitJobRequest {
            stamp: Some(stamp),
            name: self.job.clone(),
            passes: self.passes,
            dataset: Some(dataset),
            policy: Some(pb::QueuePolicyOverrides {
                chunks_per_task: policy.chunks_per_task,
                task_timeout_min_ms: policy.task_timeout_min_ms,
                timeout_factor: policy.timeout_factor,
                max_task_failures: policy.max_task_failures,
                retry_failed_next_pass: policy.retry_failed_next_pass,
            }),
            restart: self.restart,
            shuffle_seed: self.shuffle_seed,
        }
    }
}

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobPhase {
    /// Members joined before any dataset was reported.
    Waiting,
    Running,
    Finished,
    Cancelled,
}

impl JobPhase {
    /// The word `job list` prints and its JSON carries.
    pub fn as_str(self) -> &'static str {
        match self {
            JobPhase::Waiting => "waiting",
            JobPhase::Running => "running",
            JobPhase::Finished => "finished",
            JobPhase::Cancelled => "cancelled",
        }
    }

    /// Whether the job finished or was cancelled (it never runs again).
    pub fn ended(self) -> bool {
        matches!(self, JobPhase::Finished | JobPhase::Cancelled)
    }
}

/// One job of the group, as `ListJobs` sums it up.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSummary {
    pub job: String,
    pub state: JobPhase,
    pub pass: u32,
    pub passes: u32,
    pub task_count: u64,
    pub done: u64,
    pub failed: u64,
    pub trainers: u32,
    pub pservers: u32,
    /// How long ago it ended (by the masters' clock), `None` while it runs.
    pub ended_ms_ago: Option<u64>,
    /// Its newest progress checkpoint.
    pub newest_checkpoint: Option<u64>,
    /// The latest evaluation: (pass, loss, accuracy).
    pub eval: Option<(u32, f32, f32)>,
    /// The newest progress checkpoint every pserver recorded its own checkpoint for.
    pub newest_model_checkpoint: Option<u64>,
    /// Pservers a restore with the model still waits for.
    pub reloads_waiting: u32,
    /// The incarnation id: never reused, not even for a later job of the same name.
    pub job_id: u64,
    /// The newest progress checkpoint restores the data only (a slot changed hands before
    /// its holder recorded a checkpoint for it).
    pub newest_checkpoint_data_only: bool,
    /// Slots the restore waits for whose holder failed to reload, with its reason.
    pub reload_waits: Vec<(u32, String)>,
}

/// Every job, and how long the masters keep an ended one.
#[derive(Clone, Debug, PartialEq)]
pub struct JobList {
    pub jobs: Vec<JobSummary>,
    pub retention_ms: u64,
}

impl JobList {
    pub(crate) fn from_proto(reply: pb::ListJobsReply) -> Self {
        let jobs = reply.jobs.into_iter().map(summary).collect();
        JobList { jobs, retention_ms: reply.retention_ms }
    }

    /// The `raftrain job list --json` contract: one object per job.
    pub fn to_json(&self) -> serde_json::Value {
        let jobs = self.jobs.iter().map(|summary| {
            serde_json::json!({
                "name": summary.job,
                "state": summary.state.as_str(),
                "pass": summary.pass,
                "passes": summary.passes,
                "tasks": summary.task_count,
                "done": summary.done,
                "failed": summary.failed,
                "trainers": summary.trainers,
                "pservers": summary.pservers,
                "ended_ms_ago": summary.ended_ms_ago,
                "newest_checkpoint": summary.newest_checkpoint,
                "newest_model_checkpoint": summary.newest_model_checkpoint,
                "reloads_waiting": summary.reloads_waiting,
                "job_id": summary.job_id,
                "newest_checkpoint_data_only": summary.newest_checkpoint_data_only,
                "reload_waits": summary.reload_waits.iter().map(|(slot, reason)| {
                    serde_json::json!({ "slot": slot, "reason": reason })
                }).collect::<Vec<_>>(),
                "eval": summary.eval.map(|(pass, loss, accuracy)| serde_json::json!({
                    "pass": pass, "loss": loss, "accuracy": accuracy,
                })),
            })
        });
        serde_json::json!({ "jobs": jobs.collect::<Vec<_>>(), "retention_ms": self.retention_ms })
    }
}

fn summary(job: pb::JobSummary) -> JobSummary {
    use pb::job_summary::State;
    let state = match State::try_from(job.state) {
        Ok(State::Waiting) => JobPhase::Waiting,
        Ok(State::Finished) => JobPhase::Finished,
        Ok(State::Cancelled) => JobPhase::Cancelled,
        Ok(State::Running | State::Unspecified) | Err(_) => JobPhase::Running,
    };
    let ended = matches!(state, JobPhase::Finished | JobPhase::Cancelled);
    JobSummary {
        job: job.name,
        state,
        pass: job.pass_index,
        passes: job.passes,
        task_count: job.task_count,
        done: job.done,
        failed: job.failed,
        trainers: job.trainers,
        pservers: job.pservers,
        ended_ms_ago: ended.then_some(job.ended_ms_ago),
        newest_checkpoint: (job.newest_checkpoint != 0).then_some(job.newest_checkpoint),
        eval: job.eval.map(|eval| (eval.pass_index, eval.loss, eval.accuracy)),
        newest_model_checkpoint: (job.newest_model_checkpoint != 0)
            .then_some(job.newest_model_checkpoint),
        reloads_waiting: job.reloads_waiting,
        job_id: job.job_id,
        newest_checkpoint_data_only: job.newest_checkpoint_data_only,
        reload_waits: job.reload_waits.into_iter().map(|wait| (wait.slot, wait.reason)).collect(),
    }
}

/// A recorded data position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgressCheckpoint {
    pub id: u64,
    pub pass: u32,
    /// Tasks done in that pass when it was taken.
    pub done: u64,
    /// Whether the job's pservers were asked to record their checkpoints for it.
    pub pservers_asked: bool,
}

/// Where a restore put the job: `todo` tasks to do again in `pass`; or, while `reloading`
/// pservers reload the checkpoint's model first, where it will put it once they have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestoredProgress {
    pub pass: u32,
    pub todo: u64,
    pub reloading: u32,
    /// The incarnation restored (0: a master before this field said none).
    pub job_id: u64,
}
