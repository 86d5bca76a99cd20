//! Dataset answers: what a client was told about its job's dataset is that job's dataset.
//! Every report of it (in an index job each trainer repeats the submitter's report, as the
//! Python package's workers do) is accepted with the job's task count, never refused; every
//! task handed out covers what its id names in that job (one one-record chunk of the job's own
//! RecordIO file, the task's own shard of an index job, computed here apart from the master);
//! no answer is malformed.

use std::collections::BTreeMap;

use crate::dataset::{recordio_path, SimDataset};
use crate::history::{DatasetEvent, DatasetTold};
use crate::job::SimJob;

use super::Violation;

/// Per job, its dataset, how many tasks it makes and where its RecordIO file would be.
pub struct DatasetAnswers {
    jobs: BTreeMap<String, JobDataset>,
}

struct JobDataset {
    dataset: SimDataset,
    task_count: u64,
    recordio_path: String,
}

impl DatasetAnswers {
    pub fn new(jobs: &[SimJob]) -> Self {
        let dataset = |job: &SimJob| JobDataset {
            dataset: job.dataset,
            task_count: job.task_count,
            recordio_path: recordio_path(&job.name, job.task_count).display().to_string(),
        };
        Self { jobs: jobs.iter().map(|job| (job.name.clone(), dataset(job))).collect() }
    }

    pub fn check(&self, events: &[DatasetEvent]) -> Result<(), Violation> {
        for event in events {
            if let Some(detail) = self.wrong(event) {
                let DatasetEvent { job, client, .. } = event;
                let detail = format!("client {client} of job {job:?}: {detail}");
                return Err(Violation::new("dataset answers", detail));
            }
        }
        Ok(())
    }

    fn wrong(&self, event: &DatasetEvent) -> Option<String> {
        let Some(job) = self.jobs.get(&event.job) else {
            return Some("the run has no such job".to_string());
        };
        match &event.told {
            DatasetTold::Reported { answer: Ok(task_count) } if *task_count != job.task_count => {
                Some(format!(
                    "a report of the job's dataset was answered with {task_count} tasks; it makes \
                     {}",
                    job.task_count
                ))
            }
            DatasetTold::Reported { answer: Ok(_) } => None,
            DatasetTold::Reported { answer: Err(refusal) } => {
                Some(format!("a report of the job's own dataset was refused: {refusal}"))
            }
            DatasetTold::Handed { task_id, data } => {
                let wrong = job.dataset.wrong_data(&job.recordio_path, *task_id, data)?;
                Some(format!("handed task {task_id} covering {wrong}"))
            }
            DatasetTold::Malformed { reason } => Some(format!("a malformed answer: {reason}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::TaskData;

    /// A job "a" of 3 index shards, and a job "b" of 5 shards of another size.
    fn checker() -> DatasetAnswers {
        let job = |name: &str, size, shard_size, task_count| SimJob {
            name: name.to_string(),
            dataset: SimDataset::IndexRange { size, shard_size },
            task_count,
            passes: 1,
            trainers: 0..1,
            pservers: 0..1,
            pserver_slots: 1,
            shuffle_seed: None,
        };
        DatasetAnswers::new(&[job("a", 25, 10, 3), job("b", 9, 2, 5)])
    }

    fn event(job: &str, told: DatasetTold) -> DatasetEvent {
        DatasetEvent { job: job.to_string(), client: 1, told }
    }

    /// Right answers pass in each job; a wrong task count, a refusal, another shard, another
    /// job's count or shard and a malformed answer are each a violation.
    #[test]
    fn wrong_answers_are_violations() {
        let handed = |job, task_id, start, end| {
            event(job, DatasetTold::Handed { task_id, data: TaskData::IndexRange { start, end } })
        };
        let reported = |job, answer| event(job, DatasetTold::Reported { answer });
        let good = [
            reported("a", Ok(3)),
            handed("a", 0, 0, 10),
            handed("a", 2, 20, 25),
            reported("b", Ok(5)),
            handed("b", 2, 4, 6),
        ];
        assert_eq!(checker().check(&good), Ok(()));
        let bad = [
            reported("a", Ok(4)),
            reported("a", Ok(5)),
            reported("a", Err("a different dataset was already reported".into())),
            handed("a", 1, 0, 10),
            handed("b", 0, 0, 10),
            handed("c", 0, 0, 10),
            event("a", DatasetTold::Malformed { reason: "empty range".into() }),
        ];
        for event in bad {
            assert!(checker().check(std::slice::from_ref(&event)).is_err(), "{event:?}");
        }
    }
}
