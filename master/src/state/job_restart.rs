//! Training again under a job's name, and the leader's end of a job nobody touches.
//!
//! - `RestartJob` (by name, stamped): the newest job of that name running, it is a join and
//!   changes nothing; ended (finished or cancelled, still retained), a new incarnation of the
//!   name is made, empty (its next dataset report defines it, with passes and a policy of its
//!   own). A retry finds the answer its first try got in the session of the incarnation that
//!   try made (running: by the ordinary session lookup; ended since: by
//!   [`Sessions::answered`](super::sessions::Sessions::answered) over every incarnation of the
//!   name), so restarts racing or retried across a leader change make one new incarnation.
//!   The ended incarnation never runs again: it keeps its id and its end.
//! - `CancelIdleJob` (the leader's decision, by id, in its term): cancels a running job whose
//!   state clock is still the one the leader judged it idle at.

use super::command::Command;
use super::job_state::JobState;
use super::master_state::MasterState;
use super::request::Envelope;
use super::response::Response;
use super::routing::Target;
use super::sessions::request_digest;

impl MasterState {
    /// Applies `RestartJob` (in `request`) for the job named `name`.
    pub(crate) fn restart(
        &mut self,
        name: &str,
        request: Envelope<'_>,
        entry_term: u64,
    ) -> Response {
        if name.is_empty() {
            return Response::Rejected { reason: "a restart names its job".to_string() };
        }
        let Some(newest) = self.by_name(name) else {
            return Response::NoSuchJob { job: name.to_string() };
        };
        let state = self.jobs.get_mut(&newest).expect("by_name returns a job of the group");
        if state.ended().is_none() {
            return state.apply_envelope(request, entry_term);
        }
        if let Some(answer) = self.restart_answered(name, request) {
            return answer;
        }
        let target = match self.new_job() {
            Ok(target) => target,
            Err(refusal) => return refusal,
        };
        debug_assert_eq!(target, Target::New);
        self.new_incarnation(name, request, target)
    }

    /// The answer a restart with this stamp and body already got from an incarnation of
    /// `name`: the retry of a restart whose incarnation ended since.
    fn restart_answered(&self, name: &str, request: Envelope<'_>) -> Option<Response> {
        let stamp = request.client?;
        let digest = request_digest(request.command);
        let incarnations = self.jobs.values().filter(|state| state.name == name);
        let mut answers =
            incarnations.filter_map(|state| state.sessions.answered(stamp, digest).cloned());
        answers.next()
    }

    /// Makes a new, empty incarnation of `name`, and keeps the answer in its sessions for
    /// the restart's retries.
    fn new_incarnation(&mut self, name: &str, request: Envelope<'_>, target: Target) -> Response {
        let job_id = self.target_id(&target);
        let now_ms = self.clock_ms;
        let mut state = JobState { name: name.to_string(), clock_ms: now_ms, ..JobState::new() };
        let response = Response::JobRestarted { job_id };
        if let Some(stamp) = request.client {
            let digest = request_digest(request.command);
            state.sessions.record(stamp, digest, &response, None, now_ms);
        }
        self.jobs.insert(job_id, state);
        self.make_room();
        response
    }

    /// Cancels job `job_id` for idleness, if it still runs and nothing was applied to it
    /// since the leader judged it idle at its state clock `clock_ms`.
    pub(crate) fn cancel_idle_job(
        &mut self,
        request: Envelope<'_>,
        entry_term: u64,
        (job_id, clock_ms): (u64, u64),
    ) -> Response {
        if let Some(decided) = request.term.filter(|decided| *decided != entry_term) {
            return Response::WrongTerm { decided, committed: entry_term };
        }
        let Some(state) = self.jobs.get_mut(&job_id) else {
            return Response::NoSuchJob { job: format!("#{job_id}") };
        };
        if state.ended().is_some() || state.clock_ms != clock_ms {
            return Response::Stale;
        }
        state.apply_envelope(request.with_command(&Command::CancelJob), entry_term);
        debug_assert!(state.is_cancelled(), "a running job's cancel ends it");
        Response::Accepted
    }
}
