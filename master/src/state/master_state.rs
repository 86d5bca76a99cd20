//! The whole replicated master state and `apply`, the one way it changes.

use serde::{Deserialize, Serialize};

use super::codec::{self, DecodeError, SNAPSHOT_BYTES_MAX};
use super::command::Command;
use super::dataset::{chunks_digest, QueuePolicy};
use super::dataset_loading::{apply_batch, Batch, DatasetLoading};
use super::eval::EvalRecord;
use super::job::Job;
use super::pserver_slots::PServerSlots;
use super::repeated_report::{AcceptedReport, ReportedFile};
use super::request::{decode_request, Request};
use super::response::{encode_response, Response};
use super::sessions::{Lookup, Sessions};
use super::status::{FailedTaskView, PServerSlotView, StatusView, TrainerView};
use super::trainer_registry::TrainerRegistry;

/// The longest failure reason kept; longer ones are cut (on a character boundary), since the
/// reason is for a person and must not bloat the state.
pub const FAILURE_REASON_BYTES_MAX: usize = 1024;
/// The failure reason recorded for a task that missed its deadline.
pub const TIMED_OUT_REASON: &str = "timed out";

/// Everything the seeds kept in etcd. Replicas that apply the same requests encode to the same
/// bytes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct MasterState {
    /// The latest `now_ms` applied. Leaders' clocks differ, so a new leader may stamp an earlier
    /// time; the state machine uses the maximum so its time never goes backwards.
    pub(crate) clock_ms: u64,
    /// The first valid dataset report and its queue; `None` until then.
    pub(crate) job: Option<Job>,
    /// Trainers that registered and were not declared lost.
    pub(crate) trainers: TrainerRegistry,
    pub(crate) pservers: PServerSlots,
    /// The latest evaluation, only for status.
    pub(crate) eval: Option<EvalRecord>,
    /// The last reply per client, for exactly-once retries.
    pub(crate) sessions: Sessions,
    /// A batched dataset report still arriving; `None` once the job is defined.
    pub(crate) loading: Option<DatasetLoading>,
}

impl MasterState {
    /// An empty state: no job, no trainers, no slots.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one committed request. A stamped request that was already applied is answered
    /// from the client's session instead of being applied twice.
    pub fn apply(&mut self, request: &Request) -> Response {
        let response = self.apply_unchecked(request);
        // Every transition must keep the invariants; in debug builds (all tests, the simulator)
        // a broken one stops here, at the step that broke it, rather than steps later.
        debug_assert_eq!(self.check_invariants(), Ok(()), "after applying {request:?}");
        response
    }

    fn apply_unchecked(&mut self, request: &Request) -> Response {
        self.clock_ms = self.clock_ms.max(request.now_ms);
        let now_ms = self.clock_ms;
        let Some(stamp) = request.client else {
            return self.execute(&request.command, now_ms);
        };
        match self.sessions.lookup(stamp, now_ms) {
            Lookup::Replay(response) => response,
            Lookup::Stale { last_seq } => Response::StaleRequest { last_seq },
            Lookup::Apply => {
                let response = self.execute(&request.command, now_ms);
                self.sessions.record(stamp, response.clone(), now_ms);
                response
            }
        }
    }

    /// Applies an encoded request and encodes the response: the Raft glue's entry point. Bytes
    /// that do not decode change nothing and are answered `Rejected`, so a bad entry cannot
    /// stop the replicas (all of them reject it alike).
    pub fn apply_encoded(&mut self, request: &[u8]) -> Vec<u8> {
        let response = match decode_request(request) {
            Ok(request) => self.apply(&request),
            Err(error) => Response::Rejected { reason: format!("undecodable request: {error}") },
        };
        encode_response(&response)
    }

    fn execute(&mut self, command: &Command, now_ms: u64) -> Response {
        match command {
            Command::ReportDataset { job, chunks, passes, policy } => {
                let digest = chunks_digest(chunks);
                let total_chunks = chunks.len() as u64;
                let batch = Batch {
                    job,
                    passes: *passes,
                    policy: *policy,
                    total_chunks,
                    digest,
                    first_chunk: 0,
                    chunks,
                };
                apply_batch(&mut self.job, &mut self.loading, &batch)
            }
            Command::ReportDatasetBatch {
                job,
                passes,
                policy,
                total_chunks,
                digest,
                first_chunk,
                chunks,
            } => {
                let batch = Batch {
                    job,
                    passes: *passes,
                    policy: *policy,
                    total_chunks: *total_chunks,
                    digest: *digest,
                    first_chunk: *first_chunk,
                    chunks,
                };
                apply_batch(&mut self.job, &mut self.loading, &batch)
            }
            Command::GetTask { trainer, pass } => {
                if !self.trainers.contains(*trainer) {
                    return Response::UnknownTrainer;
                }
                let Some(job) = &mut self.job else { return Response::NoDataset };
                job.get_task(*trainer, *pass, now_ms)
            }
            Command::TaskFinished { task, epoch } => {
                let Some(job) = &mut self.job else { return Response::NoDataset };
                job.task_finished(*task, *epoch, now_ms)
            }
            Command::TaskFailed { task, epoch, reason } => {
                let Some(job) = &mut self.job else { return Response::NoDataset };
                job.task_failed(*task, *epoch, truncate(reason, FAILURE_REASON_BYTES_MAX))
            }
            Command::ExpireTasks => {
                let Some(job) = &mut self.job else { return Response::NoDataset };
                job.expire(now_ms, TIMED_OUT_REASON)
            }
            Command::RegisterTrainer { name } => match self.trainers.register(name) {
                Ok(trainer) => Response::TrainerRegistered { trainer },
                Err(reason) => Response::Rejected { reason },
            },
            Command::TrainerLost { trainer } => self.trainer_lost(*trainer),
            Command::ClaimPServerSlot { addr, desired } => self.pservers.claim(addr, *desired),
            Command::ReleasePServerSlot { index, addr } => self.pservers.release(*index, addr),
            Command::RecordCheckpoint { index, meta } => {
                self.pservers.record_checkpoint(*index, meta)
            }
            Command::RecordEval { pass, loss, accuracy } => {
                self.eval = Some(EvalRecord::new(*pass, *loss, *accuracy));
                Response::Accepted
            }
        }
    }

    fn trainer_lost(&mut self, trainer: u64) -> Response {
        if !self.trainers.remove(trainer) {
            return Response::UnknownTrainer;
        }
        let requeued = match &mut self.job {
            Some(job) => job.trainer_lost(trainer),
            None => Vec::new(),
        };
        Response::TrainerRemoved { requeued }
    }

    /// The snapshot: the state in the shared bincode configuration.
    pub fn encode(&self) -> Vec<u8> {
        codec::encode(self)
    }

    /// Reads a snapshot back, refusing one that decodes to an inconsistent state.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let state: Self = codec::decode(bytes, SNAPSHOT_BYTES_MAX, "snapshot")?;
        state.check_invariants()?;
        Ok(state)
    }

    /// Whether some pending task's deadline is at or before `now_ms`: the leader proposes
    /// `ExpireTasks` only then, so idle ticks do not fill the log.
    pub fn has_expired(&self, now_ms: u64) -> bool {
        self.next_deadline_ms().is_some_and(|deadline_ms| deadline_ms <= now_ms)
    }

    /// The earliest pending deadline, for the leader's expiry timer.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        let job = self.job.as_ref()?;
        job.queue.pending.values().map(|pending| pending.deadline_ms).min()
    }

    /// Whether every pass is over.
    /// Whether a dataset was accepted (a later report can only repeat or contradict it).
    pub fn dataset_accepted(&self) -> bool {
        self.job.is_some()
    }

    /// The accepted answer to a repeated dataset report of `files`, when it surely repeats the
    /// accepted spec (`repeated_report.rs`); `None` means: scan and propose as usual.
    pub fn repeated_report(
        &self,
        job: &str,
        passes: u32,
        policy: &QueuePolicy,
        files: &[ReportedFile],
    ) -> Option<AcceptedReport> {
        let accepted = &self.job.as_ref()?.dataset;
        super::repeated_report::repeated_report(accepted, job, passes, policy, files)
    }

    pub fn job_finished(&self) -> bool {
        self.job.as_ref().is_some_and(|job| job.queue.job_finished)
    }

    /// Registered trainers in id order.
    pub fn trainers(&self) -> Vec<TrainerView> {
        let trainers = &self.trainers.trainers;
        trainers
            .iter()
            .map(|(trainer, name)| TrainerView { trainer: *trainer, name: name.clone() })
            .collect()
    }

    /// Whether `trainer` is registered, without building the trainer list (the leader asks on
    /// every heartbeat).
    pub fn is_trainer_registered(&self, trainer: u64) -> bool {
        self.trainers.contains(trainer)
    }

    /// How many pserver slots the job has; `None` before the first claim fixed it.
    pub fn pservers_desired(&self) -> Option<u32> {
        self.pservers.desired
    }

    /// Every slot below `desired` (none before the first claim), held or free.
    pub fn pservers(&self) -> Vec<PServerSlotView> {
        let slots = &self.pservers;
        (0..slots.desired.unwrap_or(0))
            .map(|index| PServerSlotView {
                index,
                addr: slots.holders.get(&index).cloned(),
                checkpoint: slots.checkpoints.get(&index).cloned(),
            })
            .collect()
    }

    /// Everything `raftrain status` shows from the replicated state.
    pub fn status(&self) -> StatusView {
        let mut status = StatusView {
            job: None,
            pass: 0,
            passes: 0,
            task_count: 0,
            todo_count: 0,
            pending_count: 0,
            done_count: 0,
            failed_count: 0,
            failed_tasks: Vec::new(),
            trainers: self.trainers(),
            pservers_desired: self.pservers.desired,
            pservers: self.pservers(),
            eval: self.eval,
            job_finished: false,
        };
        let Some(job) = &self.job else { return status };
        let queue = &job.queue;
        status.job = Some(job.dataset.job.clone());
        status.pass = queue.pass;
        status.passes = job.dataset.passes;
        status.task_count = job.dataset.task_count();
        status.todo_count = count(queue.todo.len());
        status.pending_count = count(queue.pending.len());
        status.done_count = count(queue.done.len());
        status.failed_count = count(queue.failed.len());
        status.failed_tasks = queue.failed.iter().map(|task| failed_view(job, *task)).collect();
        status.job_finished = queue.job_finished;
        status
    }
}

fn failed_view(job: &Job, task: u64) -> FailedTaskView {
    let record = usize::try_from(task).ok().and_then(|index| job.queue.tasks.get(index));
    let reason = record.and_then(|record| record.last_failure.clone()).unwrap_or_default();
    FailedTaskView { task, reason }
}

fn count(length: usize) -> u64 {
    u64::try_from(length).expect("collection lengths fit in u64")
}

/// Cuts `text` to at most `bytes_max` bytes without splitting a character.
fn truncate(text: &str, bytes_max: usize) -> String {
    let mut end = text.len().min(bytes_max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Truncation keeps at most the limit and never splits a UTF-8 character.
    #[test]
    fn truncate_respects_char_boundaries() {
        let cases =
            [("abc", 5, "abc"), ("abc", 2, "ab"), ("é", 1, ""), ("aé", 2, "a"), ("", 0, "")];
        for (text, bytes_max, expected) in cases {
            assert_eq!(truncate(text, bytes_max), expected, "{text:?} to {bytes_max}");
        }
    }
}
