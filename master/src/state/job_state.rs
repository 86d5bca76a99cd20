//! One job of the group: its dataset and queue, trainers, pserver slots, evaluation, client
//! sessions, lifecycle and progress checkpoints, and `apply`, the one way it changes. The
//! group (`master_state.rs`) routes each command to its job.

use serde::{Deserialize, Serialize};

use super::command::Command;
use super::dataset::{DatasetKind, QueuePolicy};
use super::dataset_loading::DatasetLoading;
use super::eval::EvalRecord;
use super::job::Job;
use super::job_lifecycle::planted_revival;
use super::job_lifecycle::JobEnd;
use super::members;
use super::model_checkpoints::ModelCheckpoints;
use super::progress::ProgressLog;
use super::pserver_slots::PServerSlots;
use super::repeated_report::{AcceptedReport, ReportedFile};
use super::request::{Envelope, Request};
use super::response::Response;
use super::sessions::{request_digest, Lookup, Sessions};
use super::status::{DatasetKindView, FailedTaskView, PServerSlotView, StatusView, TrainerView};
use super::task_queue::{truncate, FAILURE_REASON_BYTES_MAX};
use super::trainer_registry::TrainerRegistry;
use client::Fault;
use client::SlotSecret;
use client::TaskData;

/// The failure reason recorded for a task that missed its deadline.
pub const TIMED_OUT_REASON: &str = "timed out";
/// Debug builds check every invariant after every apply only while the job has at most this
/// many tasks (the check is O(tasks)); tests of the largest jobs check them themselves.
const INVARIANT_CHECK_TASKS_MAX: u64 = 100_000;
/// `status` lists at most this many failed tasks (the lowest ids); the count is always whole.
pub const FAILED_TASKS_SHOWN_MAX: usize = 100;

/// Everything the seeds kept in etcd, for one job. Replicas that apply the same requests encode
/// to the same bytes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct JobState {
    /// The job's name; empty while unnamed (a member joined before any job was submitted:
    /// the first job submitted then adopts it, see `routing.rs`).
    pub(crate) name: String,
    /// The latest `now_ms` applied. Leaders' clocks differ, so a new leader may stamp an earlier
    /// time; the state machine uses the maximum so its time never goes backwards.
    pub(crate) clock_ms: u64,
    /// The first valid dataset report and its queue; `None` until then.
    pub(crate) job: Option<Job>,
    /// Trainers that registered and were not declared lost.
    pub(crate) trainers: TrainerRegistry,
    pub(crate) pservers: PServerSlots,
    /// The evaluation of the highest pass reported (the latest of that pass), only for status.
    pub(crate) eval: Option<EvalRecord>,
    /// The last reply per client, for exactly-once retries.
    pub(crate) sessions: Sessions,
    /// A batched dataset report still arriving; `None` once the job is defined.
    pub(crate) loading: Option<DatasetLoading>,
    /// When the job ended (its last pass drained, or it was cancelled); `None` while it runs.
    pub(crate) ended: Option<JobEnd>,
    /// Its newest progress checkpoints.
    pub(crate) progress: ProgressLog,
    /// The pserver checkpoints taken for them, and a restore with the model under way.
    pub(crate) models: ModelCheckpoints,
}

impl JobState {
    /// An empty state: no job, no trainers, no slots.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one request as if it were committed in the term its decision names (tests and
    /// tools that have no log). The replicas use [`JobState::apply_in_term`].
    pub fn apply(&mut self, request: &Request) -> Response {
        self.apply_in_term(request, request.term.unwrap_or(0))
    }

    /// Applies one request committed in a log entry of `entry_term`. A stamped request that
    /// was already applied is answered from the client's session instead of being applied
    /// twice; a leader decision from another term is not applied at all.
    pub fn apply_in_term(&mut self, request: &Request, entry_term: u64) -> Response {
        self.apply_envelope(request.envelope(), entry_term)
    }

    /// [`JobState::apply_in_term`] on a request's parts (the group's routing hands them over).
    pub(crate) fn apply_envelope(&mut self, request: Envelope<'_>, entry_term: u64) -> Response {
        let clock_before = self.clock_ms;
        let response = self.apply_unchecked(request, entry_term);
        self.assert_cheap_invariants(clock_before);
        // Every transition must keep the invariants; in debug builds (all tests, the simulator)
        // a broken one stops here, at the step that broke it, rather than steps later. The
        // check is O(tasks): past a size only tests of the limits reach, it is left to them.
        if cfg!(debug_assertions) && self.task_count() <= INVARIANT_CHECK_TASKS_MAX {
            assert_eq!(self.check_invariants(), Ok(()), "after applying {request:?}");
        }
        response
    }

    fn apply_unchecked(&mut self, request: Envelope<'_>, entry_term: u64) -> Response {
        self.clock_ms = self.clock_ms.max(request.now_ms);
        let now_ms = self.clock_ms;
        if let Some(decided) = request.term.filter(|decided| *decided != entry_term) {
            return Response::WrongTerm { decided, committed: entry_term };
        }
        let Some(stamp) = request.client else {
            return self.execute_and_unbind(request.command, now_ms);
        };
        let command = request.command;
        let digest = request_digest(command);
        let joins = members::joins(command, &self.trainers, &self.pservers, &self.sessions);
        match self.sessions.lookup(stamp, digest, joins, now_ms) {
            Lookup::Replay(response) => self.pservers.refill_checkpoint(response),
            Lookup::Stale { last_seq } => Response::StaleRequest { last_seq },
            Lookup::StampReused => Response::StampReused { seq: stamp.seq },
            Lookup::Full { retry_after_ms } => Response::TryAgainLater { retry_after_ms },
            Lookup::Apply => {
                let response = self.execute_and_unbind(command, now_ms);
                let member = members::created(&response)
                    .or_else(|| self.sessions.member_of(stamp.client_id))
                    .or_else(|| {
                        members::unbound_spoken_for(
                            command,
                            &self.trainers,
                            &self.pservers,
                            &self.sessions,
                        )
                    });
                self.sessions.record(stamp, digest, &response, member, now_ms);
                response
            }
        }
    }

    /// Executes `command`, then unbinds the clients of members it ended (a lost trainer, a
    /// released or claimed-again slot), so the members' pool holds live members only.
    fn execute_and_unbind(&mut self, command: &Command, now_ms: u64) -> Response {
        let response = self.execute(command, now_ms);
        for member in members::maybe_gone(command, &response, &self.sessions) {
            if !members::is_alive(member, &self.trainers, &self.pservers) {
                self.sessions.member_gone(member, now_ms);
            }
        }
        response
    }

    fn execute(&mut self, command: &Command, now_ms: u64) -> Response {
        if self.is_cancelled() && !command.runs_after_cancel() && !planted_revival(command) {
            return Response::JobCancelled;
        }
        let response = self.execute_command(command, now_ms);
        self.end_if_finished(now_ms);
        response
    }

    /// Applies one of the job's commands, by family.
    fn execute_command(&mut self, command: &Command, now_ms: u64) -> Response {
        match command {
            Command::ReportDataset { .. }
            | Command::ReportDatasetBatch { .. }
            | Command::ReportIndexDataset { .. }
            | Command::ShuffledReport { .. } => self.execute_report(command, now_ms),
            Command::GetTask { .. }
            | Command::FinishedThenGetTask { .. }
            | Command::TaskFinished { .. }
            | Command::TaskFailed { .. }
            | Command::TaskFailedWithFault { .. }
            | Command::TaskProgress { .. }
            | Command::ExpireTasks => self.execute_task(command, now_ms),
            Command::RegisterTrainer { .. }
            | Command::TrainerLost { .. }
            | Command::ClaimPServerSlot { .. }
            | Command::ClaimPServerSlotWithSecret { .. }
            | Command::ReleasePServerSlot { .. }
            | Command::RecordCheckpoint { .. }
            | Command::RecordEval { .. } => self.execute_member(command),
            Command::CancelJob => self.cancel(now_ms),
            Command::CheckpointJob
            | Command::CheckpointProgress
            | Command::RestoreJob { .. }
            | Command::RestoreProgress { .. }
            | Command::TagSlotCheckpoint { .. }
            | Command::SlotReloaded { .. } => self.execute_progress(command, now_ms),
            // A restart reached a running job: a join, nothing to change.
            Command::RestartJob => Response::Accepted,
            Command::InJob { .. } | Command::RemoveJob { .. } | Command::CancelIdleJob { .. } => {
                Response::Rejected {
                    reason: "a job's command cannot name a job again or remove one".to_string(),
                }
            }
            Command::Rendezvous { .. } | Command::RemoveRendezvous { .. } => {
                Response::Rejected { reason: "a rendezvous command belongs to no job".to_string() }
            }
            Command::RaiseFeatureLevel { .. } => {
                Response::Rejected { reason: "the feature level is the group's".to_string() }
            }
        }
    }

    /// Keeps an evaluation for status: accuracy is a fraction, the pass one of the job's. The
    /// loss may be anything a model produced (a diverged one reports NaN or infinity). Only the
    /// highest pass is kept: a slow trainer's report of an earlier pass is acknowledged and
    /// changes nothing, as a report for an older epoch does.
    pub(crate) fn record_eval(&mut self, pass: u32, loss: f32, accuracy: f32) -> Response {
        if !(0.0..=1.0).contains(&accuracy) {
            let reason = format!("accuracy {accuracy} is not between 0 and 1");
            return Response::Rejected { reason };
        }
        let Some(job) = &self.job else { return Response::NoDataset };
        if pass >= job.dataset.passes {
            let passes = job.dataset.passes;
            let reason = format!("pass {pass} is not one of the job's passes 0 to {}", passes - 1);
            return Response::Rejected { reason };
        }
        if self.eval.is_some_and(|kept| kept.pass > pass) {
            return Response::Accepted;
        }
        self.eval = Some(EvalRecord::new(pass, loss, accuracy));
        Response::Accepted
    }

    pub(crate) fn task_failed(
        &mut self,
        (task_id, epoch): (u64, u64),
        reason: &str,
        fault: Fault,
    ) -> Response {
        let Some(job) = &mut self.job else { return Response::NoDataset };
        let reason = truncate(reason, FAILURE_REASON_BYTES_MAX);
        let registered = self.trainers.trainers.keys().copied();
        job.task_failed((task_id, epoch), &reason, fault, registered)
    }

    pub(crate) fn trainer_lost(&mut self, trainer: u64) -> Response {
        if !self.trainers.remove(trainer) {
            return Response::UnknownTrainer;
        }
        let requeued = match &mut self.job {
            Some(job) => job.trainer_lost(trainer),
            None => Vec::new(),
        };
        Response::TrainerRemoved { requeued }
    }

    /// Whether some pending task's deadline is at or before `now_ms`: the leader proposes
    /// `ExpireTasks` only then, so idle ticks do not fill the log.
    pub fn has_expired(&self, now_ms: u64) -> bool {
        self.next_deadline_ms().is_some_and(|deadline_ms| deadline_ms <= now_ms)
    }

    /// The earliest pending deadline, for the leader's expiry timer.
    /// A cancelled job has none: nothing of it is handed out again.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        if self.is_cancelled() {
            return None;
        }
        let job = self.job.as_ref()?;
        job.queue.pending.values().map(|pending| pending.deadline_ms).min()
    }

    pub(crate) fn task_count(&self) -> u64 {
        self.job.as_ref().map_or(0, |job| job.dataset.task_count())
    }

    /// How many chunks of an unfinished report of this spec the state already holds: a report
    /// started over (a client's retry, a new leader) proposes only the rest.
    pub fn loading_received(&self, job: &str, total_chunks: u64, digest: u64) -> u64 {
        match &self.loading {
            Some(loading)
                if loading.job == job
                    && loading.total_chunks == total_chunks
                    && loading.digest == digest =>
            {
                loading.chunks.len() as u64
            }
            _ => 0,
        }
    }

    /// Whether a dataset was accepted (a later report can only repeat or contradict it).
    pub fn dataset_accepted(&self) -> bool {
        self.job.is_some()
    }

    /// The accepted answer to a repeated dataset report of `files` (shuffled with `shuffle`),
    /// when it surely repeats the accepted spec (`repeated_report.rs`); `None` means: scan and propose as usual.
    pub fn repeated_report(
        &self,
        job: &str,
        (passes, shuffle): (u32, Option<u64>),
        policy: &QueuePolicy,
        files: &[ReportedFile],
    ) -> Option<AcceptedReport> {
        let accepted = self.job.as_ref().filter(|accepted| accepted.shuffle == shuffle)?;
        super::repeated_report::repeated_report(&accepted.dataset, job, passes, policy, files)
    }

    /// The accepted dataset's shuffle seed (`None`: in order, or no dataset yet).
    pub fn shuffle_seed(&self) -> Option<u64> {
        self.job.as_ref().and_then(|job| job.shuffle)
    }

    /// The queue policy of the accepted dataset.
    pub fn policy(&self) -> Option<QueuePolicy> {
        self.job.as_ref().map(|job| job.dataset.policy)
    }

    /// The job's name (empty while unnamed).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The newest progress checkpoint's id, if one is kept.
    pub fn newest_progress_checkpoint(&self) -> Option<u64> {
        self.progress.kept.back().map(|checkpoint| checkpoint.id)
    }

    /// Whether every pass is over.
    pub fn job_finished(&self) -> bool {
        self.job.as_ref().is_some_and(|job| job.queue.job_finished)
    }

    /// The epoch `task_id` is pending under, if it is pending.
    pub fn pending_epoch(&self, task_id: u64) -> Option<u64> {
        self.job.as_ref()?.queue.pending.get(&task_id).map(|pending| pending.epoch)
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
            .map(|slot| PServerSlotView {
                slot,
                holder: slots.holders.get(&slot).cloned(),
                checkpoint: slots.checkpoints.get(&slot).cloned(),
            })
            .collect()
    }

    /// Whether `slot` is held under `generation` by the claimer that drew `secret` (the
    /// leader asks on every pserver heartbeat and checkpoint record).
    pub fn slot_held(&self, slot: u32, generation: u64, secret: SlotSecret) -> bool {
        self.pservers.holds_with_secret(slot, generation, secret)
    }

    /// Changes whenever a slot changes holder (claims bump the generation counter, releases
    /// shrink the holders), so a watcher can tell that the table moved in O(1).
    pub fn pserver_table_version(&self) -> u64 {
        self.pservers.version
    }

    /// What `task_id` of the accepted dataset covers, its chunks or its indices (`None` without
    /// a dataset): what a task assignment hands the trainer.
    pub fn task_data(&self, task_id: u64) -> Option<TaskData> {
        self.job.as_ref().map(|job| job.dataset.task_data(task_id))
    }

    /// The state's clock: the largest `now_ms` applied.
    pub fn clock_ms(&self) -> u64 {
        self.clock_ms
    }

    /// Registered trainer ids in order, without their names.
    pub fn trainer_ids(&self) -> Vec<u64> {
        self.trainers.trainers.keys().copied().collect()
    }

    /// Everything `raftrain status` shows from the replicated state.
    pub fn status(&self) -> StatusView {
        let mut status = StatusView {
            job: None,
            dataset: None,
            pass: 0,
            passes: 0,
            task_count: 0,
            todo_count: 0,
            pending_count: 0,
            done_count: 0,
            failed_count: 0,
            dispatched_count: 0,
            failed_tasks: Vec::new(),
            trainers: self.trainers(),
            pservers_desired: self.pservers.desired,
            pservers: self.pservers(),
            eval: self.eval,
            job_finished: false,
            job_cancelled: self.is_cancelled(),
        };
        let Some(job) = &self.job else { return status };
        let queue = &job.queue;
        status.job = Some(job.dataset.job.clone());
        status.dataset = Some(match &job.dataset.kind {
            DatasetKind::RecordIo { .. } => DatasetKindView::RecordIo,
            DatasetKind::IndexRange(range) => {
                DatasetKindView::IndexRange { size: range.size, shard_size: range.shard_size() }
            }
        });
        status.pass = queue.pass;
        status.passes = job.dataset.passes;
        status.task_count = job.dataset.task_count();
        status.todo_count = count(queue.todo.len());
        status.pending_count = count(queue.pending.len());
        status.done_count = count(queue.done.len());
        status.dispatched_count = queue.tasks.iter().map(|task| task.epoch).sum();
        status.failed_count = count(queue.failed.len());
        status.failed_tasks = queue
            .failed
            .iter()
            .take(FAILED_TASKS_SHOWN_MAX)
            .map(|task_id| failed_view(job, *task_id))
            .collect();
        status.job_finished = queue.job_finished;
        status
    }
}

fn failed_view(job: &Job, task_id: u64) -> FailedTaskView {
    let record = usize::try_from(task_id).ok().and_then(|index| job.queue.tasks.get(index));
    let reason = record.and_then(|record| record.last_failure.clone()).unwrap_or_default();
    FailedTaskView { task_id, reason }
}

fn count(length: usize) -> u64 {
    u64::try_from(length).expect("collection lengths fit in u64")
}
