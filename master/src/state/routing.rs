//! Which job a command is for.
//!
//! - By id (the leader's decisions): that job, or `NoSuchJob` once it was removed.
//! - A dataset report names its job itself: the job of that name; or else the unnamed job,
//!   which the report adopts (see below); or else a new job.
//! - By name: the job of that name, or `NoSuchJob`.
//! - By the empty name (a client that names no job, and every entry of a log written before
//!   jobs had names): the group's only job. With none, the command goes to a new, unnamed
//!   job: a join (a trainer's registration, a pserver's claim) keeps it, and the first report
//!   then adopts it, as the single job of earlier builds was named by its first report;
//!   anything else changes nothing there and the job is dropped, so the answer is the one an
//!   empty state of those builds gave. A cancel is answered `NoDataset`. With several jobs,
//!   the client must name one.

use super::command::{Command, JobRef};
use super::master_state::{MasterState, JOB_COUNT_MAX};
use super::response::Response;

/// Where a command goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Existing(u64),
    /// A job made for it (kept only if the command takes effect).
    New,
}

/// The job a command sent without an `InJob` envelope is for: a report's own name, or the
/// only job.
pub(crate) fn reference_of(command: &Command) -> JobRef {
    JobRef::Name(command.reported_job().unwrap_or_default().to_string())
}

impl MasterState {
    /// The job `job` means for `command`, or the answer when there is none.
    pub(crate) fn resolve(&self, job: &JobRef, command: &Command) -> Result<Target, Response> {
        let name = match job {
            JobRef::Id(id) => return self.by_id(*id),
            JobRef::Name(name) => name,
        };
        match command.reported_job() {
            Some(reported) if !name.is_empty() && reported != name => Err(Response::Rejected {
                reason: format!("the report names job {reported:?} but was sent for job {name:?}"),
            }),
            Some(reported) => self.for_report(reported),
            None if name.is_empty() => self.only_job(command),
            None => self.by_name(name).map(Target::Existing).ok_or_else(|| no_such_job(name)),
        }
    }

    fn by_id(&self, id: u64) -> Result<Target, Response> {
        match self.jobs.contains_key(&id) {
            true => Ok(Target::Existing(id)),
            false => Err(no_such_job(&format!("#{id}"))),
        }
    }

    /// The id of job `job`: its newest incarnation, the only one that may still run (never
    /// the unnamed one). Earlier incarnations of the name stay until their retention passed
    /// (a restart made a new one, `job_restart.rs`); they are reached by id only.
    pub(crate) fn by_name(&self, job: &str) -> Option<u64> {
        let named = |state: &super::JobState| !job.is_empty() && state.name == job;
        self.jobs.iter().rev().find(|(_, state)| named(state)).map(|(job_id, _)| *job_id)
    }

    fn for_report(&self, job: &str) -> Result<Target, Response> {
        if job.is_empty() {
            return Err(Response::Rejected { reason: "a job needs a name".to_string() });
        }
        if let Some(job_id) = self.by_name(job) {
            return Ok(Target::Existing(job_id));
        }
        let adoptable = |state: &super::JobState| state.name.is_empty() && !state.has_report();
        if let Some((id, _)) = self.jobs.iter().find(|(_, state)| adoptable(state)) {
            return Ok(Target::Existing(*id));
        }
        self.new_job()
    }

    fn only_job(&self, command: &Command) -> Result<Target, Response> {
        let mut ids = self.jobs.keys();
        match (ids.next(), ids.next()) {
            (Some(id), None) => Ok(Target::Existing(*id)),
            (None, _) if matches!(command, Command::CancelJob) => Err(Response::NoDataset),
            (None, _) => self.new_job(),
            (Some(_), Some(_)) => {
                let names: Vec<&str> =
                    self.jobs.values().map(|state| state.name.as_str()).collect();
                let reason = format!("the group runs {} jobs {names:?}: name one", names.len());
                Err(Response::Rejected { reason })
            }
        }
    }

    /// A new job, unless the group already runs the most it keeps. Ended jobs never count:
    /// the oldest of them makes room once the new one is kept (`MasterState::settle`).
    pub(crate) fn new_job(&self) -> Result<Target, Response> {
        let running = self.jobs.values().filter(|state| state.ended().is_none()).count();
        if running >= JOB_COUNT_MAX {
            let reason = format!(
                "the group runs {running} jobs, the most it keeps ({JOB_COUNT_MAX}): cancel \
                 one (ended jobs never block a new one)"
            );
            return Err(Response::Rejected { reason });
        }
        Ok(Target::New)
    }

    /// The id of the ended job that ended first (the lowest id among equals): the one a new
    /// job replaces when the group holds [`JOB_COUNT_MAX`] jobs.
    pub(crate) fn oldest_ended(&self) -> Option<u64> {
        let ended = self.jobs.iter().filter_map(|(id, state)| Some((state.ended()?.at_ms, *id)));
        ended.min().map(|(_, id)| id)
    }
}

fn no_such_job(name: &str) -> Response {
    Response::NoSuchJob { job: name.to_string() }
}
