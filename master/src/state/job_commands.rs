//! How a job applies its command families other than progress checkpoints
//! (`model_restore.rs`) and the lifecycle (`job_lifecycle.rs`): the dataset reports, the task
//! calls, and its members' calls (trainers, pserver slots, their checkpoints and evaluations).

use client::Fault;

use super::chunk_list::ChunkList;
use super::command::Command;
use super::dataset::chunks_digest;
use super::dataset_loading::{apply_batch, Batch};
use super::index_report::{apply_index_report, IndexReport};
use super::job_state::{JobState, TIMED_OUT_REASON};
use super::response::Response;

impl JobState {
    /// Applies a dataset report (a whole RecordIO list, one batch of it, or an index range).
    /// A `ShuffledReport` is its report with the envelope's seed.
    pub(crate) fn execute_report(&mut self, command: &Command, now_ms: u64) -> Response {
        let (job, loading) = (&mut self.job, &mut self.loading);
        let (command, shuffle) = command.report_parts();
        match command {
            Command::ReportDataset { job: name, chunks, passes, policy } => {
                let list = ChunkList::from_refs(chunks);
                let batch = Batch {
                    job: name,
                    passes: *passes,
                    policy: *policy,
                    total_chunks: chunks.len() as u64,
                    digest: chunks_digest(chunks),
                    first_chunk: 0,
                    chunks: &list,
                    shuffle,
                };
                apply_batch(job, loading, &batch, now_ms)
            }
            Command::ReportDatasetBatch {
                job: name,
                passes,
                policy,
                total_chunks,
                digest,
                first_chunk,
                chunks,
            } => {
                let batch = Batch {
                    job: name,
                    passes: *passes,
                    policy: *policy,
                    total_chunks: *total_chunks,
                    digest: *digest,
                    first_chunk: *first_chunk,
                    chunks,
                    shuffle,
                };
                apply_batch(job, loading, &batch, now_ms)
            }
            Command::ReportIndexDataset { job: name, size, shard_size, passes, policy } => {
                let (size, shard_size, passes, policy) = (*size, *shard_size, *passes, *policy);
                let report = IndexReport { job: name, size, shard_size, passes, policy, shuffle };
                apply_index_report(job, loading, &report, now_ms)
            }
            other => not_of_family("a dataset report", other),
        }
    }

    /// Applies a task call: a trainer's ask (no task while a restore holds the queue), its
    /// reports of progress and of the end, and the leader's expiry of overdue tasks.
    pub(crate) fn execute_task(&mut self, command: &Command, now_ms: u64) -> Response {
        match command {
            Command::GetTask { trainer, pass } => {
                if !self.trainers.contains(*trainer) {
                    return Response::UnknownTrainer;
                }
                let restoring = self.is_restoring();
                let Some(job) = &mut self.job else { return Response::NoDataset };
                match restoring {
                    true => Response::NoMoreAvailable,
                    false => job.get_task(*trainer, *pass, now_ms),
                }
            }
            Command::TaskFinished { task_id, epoch } => {
                let Some(job) = &mut self.job else { return Response::NoDataset };
                job.task_finished(*task_id, *epoch, now_ms)
            }
            Command::FinishedThenGetTask { finished, trainer, pass } => {
                self.finished_then_get_task(finished, *trainer, *pass, now_ms)
            }
            Command::TaskFailed { task_id, epoch, reason } => {
                self.task_failed((*task_id, *epoch), reason, Fault::Content)
            }
            Command::TaskFailedWithFault { task_id, epoch, reason, fault } => {
                self.task_failed((*task_id, *epoch), reason, *fault)
            }
            Command::ExpireTasks => {
                let Some(job) = &mut self.job else { return Response::NoDataset };
                job.expire(now_ms, TIMED_OUT_REASON)
            }
            Command::TaskProgress { task_id, epoch } => {
                let Some(job) = &mut self.job else { return Response::NoDataset };
                job.task_progress((*task_id, *epoch), now_ms)
            }
            other => not_of_family("a task call", other),
        }
    }

    /// Applies a member's call: trainers joining and lost, pserver slots claimed, released
    /// and checkpointed, evaluations recorded.
    pub(crate) fn execute_member(&mut self, command: &Command) -> Response {
        match command {
            Command::RegisterTrainer { name } => match self.trainers.register(name) {
                Ok(trainer) => Response::TrainerRegistered { trainer },
                Err(reason) => Response::Rejected { reason },
            },
            Command::TrainerLost { trainer } => self.trainer_lost(*trainer),
            Command::ClaimPServerSlot { addr, desired } => self.claim_slot(addr, *desired, None),
            Command::ClaimPServerSlotWithSecret { addr, desired, secret } => {
                self.claim_slot(addr, *desired, Some(*secret))
            }
            Command::ReleasePServerSlot { slot, generation } => {
                self.release_slot(*slot, *generation)
            }
            // A slot waiting to reload records nothing of the model the restore replaces.
            Command::RecordCheckpoint { slot, .. } if self.models.waits_for(*slot) => {
                Response::Stale
            }
            Command::RecordCheckpoint { slot, generation, meta } => {
                self.pservers.record_checkpoint(*slot, *generation, meta)
            }
            Command::RecordEval { pass, loss, accuracy } => {
                self.record_eval(*pass, *loss, *accuracy)
            }
            other => not_of_family("a member's call", other),
        }
    }
}

impl JobState {
    /// Each receipt of `finished` as `TaskFinished` applies it, then `trainer`'s ask for a
    /// task of `pass` as `GetTask` does (so the ask sees the finishes: a trainer whose own task
    /// was among them is handed its next). More receipts than a client may send are refused
    /// whole, nothing applied.
    fn finished_then_get_task(
        &mut self,
        finished: &[(u64, u64)],
        trainer: u64,
        pass: u32,
        now_ms: u64,
    ) -> Response {
        if finished.len() > client::FINISHED_PER_ASK_MAX {
            let reason = format!(
                "{} finished tasks in one ask; at most {} go with one",
                finished.len(),
                client::FINISHED_PER_ASK_MAX
            );
            return Response::Rejected { reason };
        }
        let finished = finished
            .iter()
            .map(|&(task_id, epoch)| {
                self.execute_task(&Command::TaskFinished { task_id, epoch }, now_ms)
            })
            .collect();
        let then = self.execute_task(&Command::GetTask { trainer, pass }, now_ms);
        Response::FinishedThenTask { finished, then: Box::new(then) }
    }
}

/// The answer to a command routed to the wrong family (a routing mistake, refused).
fn not_of_family(family: &str, command: &Command) -> Response {
    Response::Rejected { reason: format!("not {family}: {command:?}") }
}
