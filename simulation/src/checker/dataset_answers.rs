//! Dataset answers: what a client was told about the run's dataset is that dataset. Every
//! report of it (in an index job each trainer repeats the submitter's report, as the Python
//! package's workers do) is accepted with the job's task count, never refused; every task
//! handed out covers what its id names (one one-record chunk of a RecordIO job, the task's
//! own shard of an index job, computed here apart from the master); no answer is malformed.

use crate::dataset::SimDataset;
use crate::history::DatasetEvent;

use super::Violation;

/// The run's dataset and how many tasks it makes.
pub struct DatasetAnswers {
    dataset: SimDataset,
    task_count: u64,
}

impl DatasetAnswers {
    pub fn new(dataset: SimDataset, task_count: u64) -> Self {
        Self { dataset, task_count }
    }

    pub fn check(&self, events: &[DatasetEvent]) -> Result<(), Violation> {
        for event in events {
            if let Some(detail) = self.wrong(event) {
                return Err(Violation::new("dataset answers", detail));
            }
        }
        Ok(())
    }

    fn wrong(&self, event: &DatasetEvent) -> Option<String> {
        match event {
            DatasetEvent::Reported { client, answer: Ok(task_count) } => {
                (*task_count != self.task_count).then(|| {
                    format!(
                        "client {client}: a report of the job's dataset was answered with \
                         {task_count} tasks; it makes {}",
                        self.task_count
                    )
                })
            }
            DatasetEvent::Reported { client, answer: Err(refusal) } => Some(format!(
                "client {client}: a report of the job's own dataset was refused: {refusal}"
            )),
            DatasetEvent::Handed { client, task_id, data } => {
                let wrong = self.dataset.wrong_data(*task_id, data)?;
                Some(format!("client {client} was handed task {task_id} covering {wrong}"))
            }
            DatasetEvent::Malformed { client, reason } => {
                Some(format!("client {client} got a malformed answer: {reason}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::TaskData;

    /// Right answers pass; a wrong task count, a refusal, another shard and a malformed
    /// answer are each a violation.
    #[test]
    fn wrong_answers_are_violations() {
        let checker = DatasetAnswers::new(SimDataset::IndexRange { size: 25, shard_size: 10 }, 3);
        let handed = |task_id, start, end| DatasetEvent::Handed {
            client: 1,
            task_id,
            data: TaskData::IndexRange { start, end },
        };
        let reported = |answer| DatasetEvent::Reported { client: 1, answer };
        let good = [reported(Ok(3)), handed(0, 0, 10), handed(2, 20, 25)];
        assert_eq!(checker.check(&good), Ok(()));
        let bad = [
            reported(Ok(4)),
            reported(Err("a different dataset was already reported".into())),
            handed(1, 0, 10),
            DatasetEvent::Malformed { client: 1, reason: "empty range".into() },
        ];
        for event in bad {
            assert!(checker.check(std::slice::from_ref(&event)).is_err(), "{event:?}");
        }
    }
}
