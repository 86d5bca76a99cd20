//! Which job an entry of the canonical log is for, so that the checkers keyed by task id,
//! trainer id, slot or generation (numbers every job has its own of) keep their state per job.
//! By `Command::scoped()`:
//! - `JobRef::Name(n)`: job n; the empty name is the only job of a one-job run (with several
//!   jobs the masters refuse it, so it is no job's);
//! - `JobRef::Id(i)`: the job the nodes' states show with id i. Job names are fixed once
//!   created in a run and jobs are not removed within one (their retention is a day), so an
//!   (id, name) seen once holds for the run;
//! - an unwrapped entry: the name a dataset report carries itself (`ReportDataset*`,
//!   `ReportIndexDataset`); any other is the only job's in a one-job run, as in logs of before
//!   jobs had names.
//!
//! A decision naming an id no node's state has shown, or a job id seen under two names, is a
//! violation (`job identity`): the simulation creates every job before its first step.

use std::collections::BTreeMap;

use master::state::{Command, JobRef};

use super::{NodeView, Violation};

/// The run's job names and the ids the group gave them.
pub struct JobDirectory {
    names: Vec<String>,
    by_id: BTreeMap<u64, String>,
}

impl JobDirectory {
    /// The directory of a run of the jobs named `names`.
    pub fn new(names: Vec<String>) -> Self {
        Self { names, by_id: BTreeMap::new() }
    }

    /// Learns the (id, name) of every job the nodes show.
    pub fn learn(&mut self, nodes: &[NodeView]) -> Result<(), Violation> {
        for node in nodes {
            for (id, state) in node.state.jobs().filter(|(_, state)| !state.name().is_empty()) {
                let known = self.by_id.entry(id).or_insert_with(|| state.name().to_string());
                if known != state.name() {
                    return Err(Violation::new(
                        "job identity",
                        format!(
                            "node {} shows job #{id} as {:?}, seen as {known:?} before",
                            node.id,
                            state.name()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The job `command` (as logged) is for, if any.
    pub fn job_of<'a>(&'a self, command: &'a Command) -> Result<Option<&'a str>, Violation> {
        match command.scoped() {
            (Some(JobRef::Name(name)), _) if name.is_empty() => Ok(self.only_job()),
            (Some(JobRef::Name(name)), _) => Ok(Some(name)),
            (Some(JobRef::Id(id)), command) => match self.by_id.get(id) {
                Some(name) => Ok(Some(name)),
                None => Err(Violation::new(
                    "job identity",
                    format!("{command:?} names job #{id}, which no node's state has shown"),
                )),
            },
            (None, command) => Ok(command.reported_job().or_else(|| self.only_job())),
        }
    }

    /// The run's only job, if it has one job.
    fn only_job(&self) -> Option<&str> {
        match self.names.as_slice() {
            [only] => Some(only),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_job(job: JobRef) -> Command {
        Command::InJob { job, command: Box::new(Command::ExpireTasks) }
    }

    fn named(name: &str) -> JobRef {
        JobRef::Name(name.to_string())
    }

    /// Names and reports map to their jobs, the empty name and unwrapped commands to the only
    /// job of a one-job run and to none of a two-job run, ids to the name learned for them; an
    /// id never learned is a violation.
    #[test]
    fn entries_map_to_their_jobs() {
        let mut one = JobDirectory::new(vec!["a".into()]);
        let mut two = JobDirectory::new(vec!["a".into(), "b".into()]);
        one.by_id.insert(1, "a".into());
        two.by_id.insert(2, "b".into());
        let report = Command::ReportIndexDataset {
            job: "b".into(),
            size: 4,
            shard_size: 2,
            passes: 1,
            policy: master::state::QueuePolicy {
                chunks_per_task: 1,
                task_timeout_min_ms: 300,
                timeout_factor: 2,
                max_task_failures: 3,
                retry_failed_next_pass: true,
            },
        };
        let cases: [(&JobDirectory, Command, Option<&str>); 8] = [
            (&two, in_job(named("b")), Some("b")),
            (&one, in_job(named("")), Some("a")),
            (&two, in_job(named("")), None),
            (&one, in_job(JobRef::Id(1)), Some("a")),
            (&two, in_job(JobRef::Id(2)), Some("b")),
            (&two, report.clone(), Some("b")),
            (&one, Command::ExpireTasks, Some("a")),
            (&two, Command::ExpireTasks, None),
        ];
        for (directory, command, job) in cases {
            assert_eq!(directory.job_of(&command), Ok(job), "{command:?}");
        }
        assert!(two.job_of(&in_job(JobRef::Id(1))).is_err(), "an id never shown");
    }
}
