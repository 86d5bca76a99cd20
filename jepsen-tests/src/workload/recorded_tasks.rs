//! `RecordedTasks`: a logical trainer's way to ask for tasks, each `GetTask` recorded in the
//! history (invoke, then ok with what it answered, or fail or info), so that the workload
//! walks its passes with the production `client::PassWalker`. A trainer the masters forgot
//! does not register again: it retires, as every logical process does when its identity is in
//! doubt, and a new process takes its place.

use std::sync::Arc;

use client::{ClientError, MasterClient, TaskOutcome, TaskSource};

use super::task_queue::{error_value, kind_of};
use crate::history::{History, OpKind, Operation, Value};

/// One logical trainer's task calls.
pub struct RecordedTasks {
    pub history: Arc<History>,
    pub process: u64,
    pub client: Arc<MasterClient>,
    pub trainer: u64,
}

impl TaskSource for RecordedTasks {
    async fn get_task(&self, pass: u32) -> Result<TaskOutcome, ClientError> {
        let (client, trainer) = (&self.client, self.trainer);
        let operation = Operation::GetTask { trainer, pass };
        let (_, answer) = self
            .history
            .call(self.process, operation, async {
                match client.get_task(trainer, pass).await {
                    Ok(outcome) => (OpKind::Ok, outcome_value(&outcome), Ok(outcome)),
                    Err(error) => (kind_of(&error), error_value(&error), Err(error)),
                }
            })
            .await;
        answer
    }

    async fn renew(&self) -> Result<(), ClientError> {
        Err(ClientError::UnknownTrainer { call: "GetTask" })
    }
}

/// What a `GetTask` answered, as the history keeps it.
fn outcome_value(outcome: &TaskOutcome) -> Value {
    let no_task = |reason: &str, current_pass: u32| Value::NoTask {
        reason: reason.to_string(),
        current_pass,
    };
    match outcome {
        TaskOutcome::Task(task) => {
            Value::Task { task_id: task.task_id, epoch: task.epoch, pass: task.pass }
        }
        TaskOutcome::PassBefore { current } => no_task("pass-before", *current),
        TaskOutcome::PassAfter { current } => no_task("pass-after", *current),
        TaskOutcome::NoMoreAvailable => no_task("no-more-available", 0),
        TaskOutcome::JobFinished => no_task("job-finished", 0),
        TaskOutcome::NoDataset => no_task("no-dataset", 0),
        TaskOutcome::UnknownTrainer => no_task("unknown-trainer", 0),
        TaskOutcome::JobCancelled => no_task("job-cancelled", 0),
    }
}
