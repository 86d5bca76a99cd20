//! Dispatch order: within a pass, the tasks of a job are dispatched for the first time in the
//! pass's order: by id, or, for a shuffled job, by their rank under (seed, pass)
//! (`client::shuffle::task_rank`), the permutation every replica computes alike, across
//! failovers and snapshots. Read from the canonical log in order: a task dispatched again in a
//! pass (requeued after a timeout, a failure or its trainer's loss, or handed to its holder
//! again) comes after the fresh ones and is not judged; a restore to a progress checkpoint
//! that was applied (or holds the queue until the model is back) starts its pass's order
//! over, and a refused one changes nothing. The job's seed comes from its accepted reports.

use std::collections::BTreeSet;

use client::shuffle::task_rank;
use master::state::Response;

use super::job_directory::JobDirectory;
use super::per_job::PerJob;
use super::state_machine_safety::LogCursor;
use super::{CanonicalLog, Violation};

/// One job's pass as far as the log has shown it.
#[derive(Default)]
struct PassOrder {
    /// The job's shuffle seed, once an accepted report showed it.
    seed: Option<u64>,
    pass: u32,
    /// Tasks dispatched in `pass` since it began (or since a restore).
    dispatched: BTreeSet<u64>,
    /// The order key of the last task dispatched for the first time in `pass`.
    last_key: Option<u64>,
}

/// Per job, its pass's dispatches, and how far the canonical log was read.
#[derive(Default)]
pub struct DispatchOrder {
    jobs: PerJob<PassOrder>,
    cursor: LogCursor,
}

impl DispatchOrder {
    pub fn check(
        &mut self,
        canonical: &CanonicalLog,
        jobs: &JobDirectory,
    ) -> Result<(), Violation> {
        for applied in self.cursor.read(canonical).into_iter().filter(|applied| !applied.replay) {
            let (request, response) = (applied.request, applied.response);
            let Some(job) = jobs.job_of(&request.command)? else { continue };
            let order = self.jobs.of(job);
            match response {
                Response::DatasetAccepted { .. } => {
                    order.seed = request.command.scoped().1.report_parts().1;
                }
                // The queue went back to a checkpoint (or will, before any dispatch: a
                // restore waiting for the model holds the queue).
                Response::ProgressRestored { .. } | Response::RestoreWaiting { .. } => {
                    order.dispatched.clear();
                    order.last_key = None;
                }
                Response::Task(assignment) => {
                    let (task_id, pass) = (assignment.task_id, assignment.pass);
                    let Some(key) = order.first_dispatch(task_id, pass) else { continue };
                    if order.last_key.is_some_and(|last| last > key) {
                        return Err(Violation::new(
                            "dispatch order",
                            format!(
                                "entry {} dispatched task {task_id} of job {job:?} (seed {:?}) \
                                 in pass {pass} after a task that comes later in the pass's \
                                 order",
                                applied.log_id, order.seed
                            ),
                        ));
                    }
                    order.last_key = Some(key);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl PassOrder {
    /// The order key of `task_id` if this is its first dispatch in `pass` (a later pass starts
    /// the order over); `None` for a task dispatched again.
    fn first_dispatch(&mut self, task_id: u64, pass: u32) -> Option<u64> {
        if pass != self.pass {
            self.pass = pass;
            self.dispatched.clear();
            self.last_key = None;
        }
        if !self.dispatched.insert(task_id) {
            return None;
        }
        Some(match self.seed {
            Some(seed) => task_rank(seed, pass, task_id),
            None => task_id,
        })
    }
}
