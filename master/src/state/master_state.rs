//! The whole replicated master state: the group's named jobs, each a [`JobState`], and
//! `apply`, the one way it changes. Every client command names its job (`Command::InJob`);
//! `routing.rs` finds it, `group_limits.rs` admits what the whole group can hold, and the job
//! applies the command. The leader removes ended jobs once their retention passed
//! (`Command::RemoveJob`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::command::{Command, JobRef};
use super::feature_level::{appliable_request, Unappliable, BASE_FEATURE_LEVEL};
use super::job_state::JobState;
use super::rendezvous_op::RendezvousEntry;
use super::rendezvous_space::{RendezvousRunView, RendezvousSpace};
use super::request::{Envelope, Request};
use super::response::{encode_response, Response};
use super::routing::{reference_of, Target};
use super::status::StatusView;

/// The most jobs a group holds at once, running or ended and not yet removed: `limits.rs`
/// measures the largest state with this many. Only running jobs count against a new one:
/// when the group is full, the job that ended first is removed to make room.
pub const JOB_COUNT_MAX: usize = 32;

/// Everything the seeds kept in etcd, for every job of the group. Replicas that apply the same
/// requests encode to the same bytes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct MasterState {
    /// The latest `now_ms` applied (each job keeps its own, never later than this one).
    pub(crate) clock_ms: u64,
    /// The jobs by id. Ids come from `next_job_id`, so every replica assigns the same one,
    /// and are never reused: a decision about a removed job never touches a newer one.
    pub(crate) jobs: BTreeMap<u64, JobState>,
    pub(crate) next_job_id: u64,
    /// torchrun's rendezvous runs (`rendezvous_space.rs`), beside the jobs.
    pub(crate) rendezvous: RendezvousSpace,
    /// The group's feature level (`feature_level.rs`): raised, never lowered.
    pub(crate) feature_level: u32,
}

impl Default for MasterState {
    fn default() -> Self {
        Self {
            clock_ms: 0,
            jobs: BTreeMap::new(),
            next_job_id: 1,
            rendezvous: RendezvousSpace::default(),
            feature_level: BASE_FEATURE_LEVEL,
        }
    }
}

impl MasterState {
    /// An empty group: no jobs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one request as if it were committed in the term its decision names (tests and
    /// tools that have no log). The replicas use [`MasterState::apply_in_term`].
    pub fn apply(&mut self, request: &Request) -> Response {
        self.apply_in_term(request, request.term.unwrap_or(0))
    }

    /// Applies one request committed in a log entry of `entry_term`.
    pub fn apply_in_term(&mut self, request: &Request, entry_term: u64) -> Response {
        let clock_before = self.clock_ms;
        self.clock_ms = self.clock_ms.max(request.now_ms);
        let envelope = request.envelope();
        let response = match &request.command {
            Command::RemoveJob { job } => self.remove_job(envelope, entry_term, *job),
            Command::Rendezvous { run, op } => {
                let envelope = Envelope { now_ms: self.clock_ms, ..envelope };
                self.rendezvous.apply(run, op, envelope)
            }
            Command::RemoveRendezvous { run, touched_ms } => {
                match envelope.term.filter(|decided| *decided != entry_term) {
                    Some(decided) => Response::WrongTerm { decided, committed: entry_term },
                    None => self.rendezvous.remove(run, *touched_ms),
                }
            }
            Command::RaiseFeatureLevel { level } => {
                match envelope.term.filter(|decided| *decided != entry_term) {
                    Some(decided) => Response::WrongTerm { decided, committed: entry_term },
                    None => self.raise_feature_level(*level),
                }
            }
            Command::CancelIdleJob { job, clock_ms } => {
                self.cancel_idle_job(envelope, entry_term, (*job, *clock_ms))
            }
            Command::InJob { job: JobRef::Name(name), command }
                if matches!(**command, Command::RestartJob) =>
            {
                self.restart(name, envelope.with_command(command), entry_term)
            }
            Command::InJob { job, command } => {
                self.route(job, envelope.with_command(command), entry_term)
            }
            command => self.route(&reference_of(command), envelope, entry_term),
        };
        self.assert_group_invariants(clock_before);
        response
    }

    /// Applies an encoded request committed in `entry_term` and encodes the response: the Raft
    /// glue's entry point. An entry this replica cannot apply (it does not decode, or raises
    /// the feature level beyond `admitted`, the most this replica admits) changes nothing and
    /// is an error: the replica stops, since replicas of a newer build apply it
    /// (`feature_level.rs`).
    pub fn apply_encoded(
        &mut self,
        request: &[u8],
        entry_term: u64,
        admitted: u32,
    ) -> Result<Vec<u8>, Unappliable> {
        let request = appliable_request(request, admitted)?;
        Ok(encode_response(&self.apply_in_term(&request, entry_term)))
    }

    /// Hands `request` to the job `job` names (created when a report or a join makes one),
    /// once the group admits what it would add.
    fn route(&mut self, job: &JobRef, request: Envelope<'_>, entry_term: u64) -> Response {
        if matches!(
            request.command,
            Command::InJob { .. }
                | Command::RemoveJob { .. }
                | Command::CancelIdleJob { .. }
                | Command::RestartJob
                | Command::RaiseFeatureLevel { .. }
        ) {
            let reason = "a job's command cannot name a job again, remove or restart one (a \
                          restart names its job by name)"
                .to_string();
            return Response::Rejected { reason };
        }
        let target = match self.resolve(job, request.command) {
            Ok(target) => target,
            Err(response) => return response,
        };
        if let Err(reason) = self.admits(&target, request.command) {
            return Response::Rejected { reason };
        }
        let job_id = self.target_id(&target);
        let state = self.jobs.entry(job_id).or_default();
        let response = state.apply_envelope(request, entry_term);
        self.settle(target, job_id, &response);
        response
    }

    /// The id a target has or gets.
    pub(crate) fn target_id(&mut self, target: &Target) -> u64 {
        match target {
            Target::Existing(job_id) => *job_id,
            Target::New => {
                let job_id = self.next_job_id;
                self.next_job_id += 1;
                job_id
            }
        }
    }

    /// After a job applied a command: a job made for a report or a join that it refused is
    /// dropped (nothing half-applied), and an unnamed job a report was accepted for takes the
    /// report's name.
    fn settle(&mut self, target: Target, job_id: u64, response: &Response) {
        let Some(state) = self.jobs.get_mut(&job_id) else { return };
        let took = matches!(
            response,
            Response::DatasetAccepted { .. }
                | Response::DatasetLoading { .. }
                | Response::TrainerRegistered { .. }
                | Response::SlotClaimed { .. }
        );
        if matches!(target, Target::New) && !took {
            self.jobs.remove(&job_id);
            return;
        }
        if state.name.is_empty() {
            if let Some(job) = state.reported_name() {
                state.name = job;
            }
        }
        if matches!(target, Target::New) {
            self.make_room();
        }
    }

    /// Removes the jobs that ended first while the group holds more than [`JOB_COUNT_MAX`]
    /// (a new job was just kept; `routing.rs` admits one only while fewer are running).
    pub(crate) fn make_room(&mut self) {
        while self.jobs.len() > JOB_COUNT_MAX {
            let Some(oldest) = self.oldest_ended() else { return };
            self.jobs.remove(&oldest);
        }
    }

    /// Removes an ended job (a leader decision, applied only in the term it was made in).
    fn remove_job(&mut self, request: Envelope<'_>, entry_term: u64, job_id: u64) -> Response {
        if let Some(decided) = request.term.filter(|decided| *decided != entry_term) {
            return Response::WrongTerm { decided, committed: entry_term };
        }
        let Some(state) = self.jobs.get(&job_id) else {
            return Response::NoSuchJob { job: format!("#{job_id}") };
        };
        if state.ended().is_none() {
            let reason =
                format!("job {:?} is still running; only ended jobs are removed", state.name);
            return Response::Rejected { reason };
        }
        self.jobs.remove(&job_id);
        Response::JobRemoved
    }

    /// Key `key` of rendezvous run `run`, if both exist.
    pub fn rendezvous_entry(&self, run: &str, key: &str) -> Option<&RendezvousEntry> {
        self.rendezvous.entry(run, key)
    }

    /// How many keys rendezvous run `run` holds (0 for a run that does not exist).
    pub fn rendezvous_key_count(&self, run: &str) -> u64 {
        self.rendezvous.key_count(run)
    }

    /// Every rendezvous run, by id.
    pub fn rendezvous_runs(&self) -> Vec<RendezvousRunView> {
        self.rendezvous.views()
    }

    /// The rendezvous runs nobody wrote to since `before_ms`, with when they were last written.
    pub fn rendezvous_idle_since(&self, before_ms: u64) -> Vec<(String, u64)> {
        self.rendezvous.idle_since(before_ms)
    }

    /// The job with this id.
    pub fn job(&self, job_id: u64) -> Option<&JobState> {
        self.jobs.get(&job_id)
    }

    /// Every job with its id, in id order.
    pub fn jobs(&self) -> impl Iterator<Item = (u64, &JobState)> + '_ {
        self.jobs.iter().map(|(job_id, state)| (*job_id, state))
    }

    /// The job named `job` (never the unnamed one).
    pub fn job_named(&self, job: &str) -> Option<&JobState> {
        self.by_name(job).and_then(|job_id| self.jobs.get(&job_id))
    }

    /// The id of the job a client's `job` name means (the empty name: the only job), or the
    /// answer a command for it would get.
    pub fn job_id(&self, job: &str) -> Result<u64, Response> {
        match self.resolve(&JobRef::Name(job.to_string()), &Command::CancelJob)? {
            Target::Existing(job_id) => Ok(job_id),
            Target::New => Err(Response::NoDataset),
        }
    }

    /// The only job, or an empty one when there is none or several: what a state of the
    /// single-job era shows (its tests and tools).
    pub fn sole(&self) -> &JobState {
        static EMPTY: std::sync::OnceLock<JobState> = std::sync::OnceLock::new();
        match self.jobs.values().next() {
            Some(state) if self.jobs.len() == 1 => state,
            _ => EMPTY.get_or_init(JobState::default),
        }
    }

    /// [`JobState::status`] of the only job (see [`MasterState::sole`]).
    pub fn status(&self) -> StatusView {
        self.sole().status()
    }

    /// The state's clock: the largest `now_ms` applied.
    pub fn clock_ms(&self) -> u64 {
        self.clock_ms
    }

    /// Whether some job has a pending deadline at or before `now_ms`.
    pub fn has_expired(&self, now_ms: u64) -> bool {
        self.jobs.values().any(|state| state.has_expired(now_ms))
    }

    /// Every running job's id and state clock, by id: the leader judges idleness by them
    /// (`leader/idle_jobs.rs`; a moved clock means a command was applied to the job).
    pub fn running_job_clocks(&self) -> Vec<(u64, u64)> {
        let running = self.jobs.iter().filter(|(_, state)| state.ended().is_none());
        running.map(|(job_id, state)| (*job_id, state.clock_ms)).collect()
    }

    /// Ended jobs whose retention of `retention_ms` has passed by `now_ms` (the leader's wall
    /// clock: the state's clock stands still while the group is idle), by id.
    pub fn jobs_past_retention(&self, retention_ms: u64, now_ms: u64) -> Vec<u64> {
        let now_ms = now_ms.max(self.clock_ms);
        let due = |state: &JobState| {
            state.ended().is_some_and(|end| end.at_ms.saturating_add(retention_ms) <= now_ms)
        };
        self.jobs.iter().filter(|(_, state)| due(state)).map(|(job_id, _)| *job_id).collect()
    }

    /// Panics if an apply broke a cheap group invariant (see `release_checks.rs`).
    fn assert_group_invariants(&self, clock_before: u64) {
        assert!(self.clock_ms >= clock_before, "the state's clock went back from {clock_before}");
        assert!(self.jobs.len() <= JOB_COUNT_MAX, "jobs over their limit");
        assert!(
            self.jobs.last_key_value().is_none_or(|(job_id, _)| *job_id < self.next_job_id),
            "a job id at or above the next one to be drawn"
        );
    }
}

impl MasterState {
    /// The group's feature level: every member decodes every command of this level.
    pub fn feature_level(&self) -> u32 {
        self.feature_level
    }

    /// Applies a leader's decision to raise the level to `level` (a level at or below the
    /// group's changes nothing: levels never go down).
    pub(crate) fn raise_feature_level(&mut self, level: u32) -> Response {
        self.feature_level = self.feature_level.max(level);
        Response::Accepted
    }
}
