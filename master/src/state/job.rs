//! The job: the accepted dataset and its task queue, and the task commands that drive them.

use serde::{Deserialize, Serialize};

use super::dataset::Dataset;
use super::response::{Response, TaskAssignment};
use super::task_queue::{Report, TaskQueue};
use client::Fault;

/// A reported dataset together with the queue cut from it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct Job {
    /// Fixed once accepted: every later report is compared against it.
    pub(crate) dataset: Dataset,
    pub(crate) queue: TaskQueue,
    /// The seed each pass's tasks are shuffled with (`None`: handed out by id), fixed with the
    /// dataset: a report with another one is refused (`shuffle_difference`).
    pub(crate) shuffle: Option<u64>,
}

impl Job {
    /// Starts pass 0 with every task in todo, shuffled with `shuffle` if it is set.
    pub(crate) fn new(dataset: Dataset, shuffle: Option<u64>) -> Self {
        let queue = TaskQueue::new(dataset.task_count(), shuffle);
        Self { dataset, queue, shuffle }
    }

    /// What differs between the job's shuffle and a report's, naming both; `None` if equal.
    pub(crate) fn shuffle_difference(&self, reported: Option<u64>) -> Option<String> {
        let describe = |shuffle: Option<u64>| match shuffle {
            Some(seed) => format!("shuffle seed {seed}"),
            None => "no shuffle".to_string(),
        };
        (self.shuffle != reported).then(|| {
            format!("{} differs from the reported {}", describe(reported), describe(self.shuffle))
        })
    }

    /// The refusal of a report naming another dataset than the accepted one (`difference`
    /// says what differs), with what the job's state leaves the reporter to do: a finished
    /// job never runs again (a restart makes a new incarnation the report defines); a running
    /// one keeps its dataset until it ends (joined by reporting the same, or cancelled).
    pub(crate) fn refuse_other_dataset(&self, difference: &str) -> Response {
        let what_now = if self.queue.job_finished {
            "the job finished and an ended job never runs again: restart it (`job submit --restart`, \
             `restart=True`) to train this dataset as a new incarnation"
                .to_string()
        } else {
            format!(
                "the job is running (pass {} of {}) with that dataset: report the same to join it, or \
                 cancel it and then restart it to train this one",
                u64::from(self.queue.pass) + 1,
                self.dataset.passes
            )
        };
        Response::Rejected {
            reason: format!("a different dataset was already reported: {difference}; {what_now}"),
        }
    }

    /// The answer to the first report, repeated for identical later reports.
    pub(crate) fn accepted(&self) -> Response {
        Response::DatasetAccepted {
            task_count: self.dataset.task_count(),
            passes: self.dataset.passes,
        }
    }

    /// Hands the front of todo to `trainer` if it asks for the running pass.
    pub(crate) fn get_task(&mut self, trainer: u64, pass: u32, now_ms: u64) -> Response {
        let current = self.queue.pass;
        if self.queue.job_finished {
            return Response::JobFinished;
        }
        if pass < current {
            return Response::PassBefore { current };
        }
        if pass > current {
            return Response::PassAfter { current };
        }
        // A trainer that asks while holding a task (its answer was lost, it restarted under
        // the same id) gets the one it holds: handing out a second would leave the first to
        // time out while nobody works on it.
        let held = self.queue.held_by(trainer);
        let dispatched = || self.queue.dispatch(trainer, now_ms, &self.dataset.policy);
        let Some((task_id, pending)) = held.or_else(dispatched) else {
            return Response::NoMoreAvailable;
        };
        self.advance_if_drained();
        Response::Task(TaskAssignment {
            task_id,
            epoch: pending.epoch,
            pass: current,
            deadline_ms: pending.deadline_ms,
        })
    }

    pub(crate) fn task_finished(&mut self, task_id: u64, epoch: u64, now_ms: u64) -> Response {
        let report = self.queue.finish(task_id, epoch, now_ms);
        self.answer(task_id, report)
    }

    /// A trainer failed `task_id` (see [`TaskQueue::fail`]); `registered` are the live trainers.
    pub(crate) fn task_failed(
        &mut self,
        (task_id, epoch): (u64, u64),
        reason: &str,
        fault: Fault,
        registered: impl IntoIterator<Item = u64>,
    ) -> Response {
        let policy = &self.dataset.policy;
        let report = self.queue.fail((task_id, epoch), reason, fault, registered, policy);
        self.answer(task_id, report)
    }

    /// The holder of `task_id` under `epoch` is still at work on it (see [`TaskQueue::extend`]).
    pub(crate) fn task_progress(&mut self, (task_id, epoch): (u64, u64), now_ms: u64) -> Response {
        match self.queue.extend((task_id, epoch), now_ms, &self.dataset.policy) {
            Some(timeout_ms) => Response::TaskExtended { timeout_ms },
            None => Response::Stale,
        }
    }

    /// Takes back every task whose deadline is at or before `now_ms`.
    pub(crate) fn expire(&mut self, now_ms: u64, reason: &str) -> Response {
        let (requeued, failed) = self.queue.expire(now_ms, reason, &self.dataset.policy);
        self.advance_if_drained();
        Response::Expired { requeued, failed }
    }

    /// Requeues the lost trainer's pending tasks.
    pub(crate) fn trainer_lost(&mut self, trainer: u64) -> Vec<u64> {
        let requeued = self.queue.release_trainer(trainer);
        self.advance_if_drained();
        requeued
    }

    fn answer(&mut self, task_id: u64, report: Report) -> Response {
        match report {
            Report::Applied => {
                self.advance_if_drained();
                Response::Accepted
            }
            Report::Stale => Response::Stale,
            Report::UnknownTask => Response::Rejected {
                reason: format!(
                    "task {task_id} does not exist; the job has {} tasks",
                    self.dataset.task_count()
                ),
            },
        }
    }

    fn advance_if_drained(&mut self) {
        self.queue.advance_if_drained(self.dataset.passes, &self.dataset.policy, self.shuffle);
    }
}

#[cfg(test)]
mod tests {
    use super::super::dataset::test_policy;
    use super::super::index_report::{apply_index_report, IndexReport};
    use super::*;

    fn report(passes: u32) -> IndexReport<'static> {
        IndexReport {
            job: "j",
            size: 4,
            shard_size: 1,
            passes,
            policy: test_policy(),
            shuffle: None,
        }
    }

    fn refusal(job: &mut Option<Job>, passes: u32) -> String {
        match apply_index_report(job, &mut None, &report(passes), 10) {
            Response::Rejected { reason } => reason,
            other => panic!("a report of other passes is refused, not answered {other:?}"),
        }
    }

    /// A report of another dataset is refused naming what differs, and what the job's state
    /// leaves the reporter to do: join or cancel a running job, restart a finished one.
    #[test]
    fn another_dataset_is_refused_saying_what_the_jobs_state_leaves_to_do() {
        let mut job = None;
        assert!(matches!(
            apply_index_report(&mut job, &mut None, &report(2), 10),
            Response::DatasetAccepted { .. }
        ));
        let running = refusal(&mut job, 3);
        assert!(running.starts_with("a different dataset was already reported: passes 3 differ"));
        assert!(running.contains("running (pass 1 of 2)"), "{running}");
        assert!(running.contains("cancel it and then restart it"), "{running}");
        job.as_mut().expect("accepted").queue.job_finished = true;
        let finished = refusal(&mut job, 3);
        assert!(finished.contains("the job finished"), "{finished}");
        assert!(finished.contains("restart=True"), "{finished}");
    }
}
