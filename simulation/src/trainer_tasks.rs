//! `SimTasks`: a simulated trainer's way to ask for tasks, so that it walks its job's passes
//! with the production `client::PassWalker`. Each `GetTask` goes through the production
//! `MasterClient` and lands in the history (invoke, then ok with the dispatch it acknowledged,
//! or info), and an answer the trainer cannot read is told to the dataset-answers checker. A
//! hand-off (`HandOffSource`) is one recorded call acknowledging its finishes and its task. A
//! trainer the masters forgot does not register again here: the trainer's own loop does, as a
//! recorded call of its own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use client::{ClientError, HandOff, HandOffSource, MasterClient, TaskOutcome, TaskSource};

use crate::client::ClientContext;
use crate::history::{DatasetEvent, DatasetTold, Fact};

/// One registration's task calls.
pub struct SimTasks {
    pub master: Arc<MasterClient>,
    pub context: ClientContext,
    /// The trainer's id in the history, and the one the masters gave it.
    pub client: u64,
    pub trainer: u64,
    /// The trainer's call counter, shared with its other calls.
    pub calls: Arc<AtomicU64>,
}

impl TaskSource for SimTasks {
    async fn get_task(&self, pass: u32) -> Result<TaskOutcome, ClientError> {
        let what = format!("get_task trainer {} pass {pass}", self.trainer);
        let fact = |outcome: &TaskOutcome| match outcome {
            TaskOutcome::Task(task) => {
                Some(Fact::Dispatched { task_id: task.task_id, epoch: task.epoch })
            }
            _ => None,
        };
        let mut seq = self.calls.fetch_add(1, Ordering::Relaxed);
        let call = self.master.get_task(self.trainer, pass);
        let outcome = self.context.call(self.client, &mut seq, what, call, fact).await;
        if let Err(ClientError::Malformed { reason, .. }) = &outcome {
            let (job, client) = (self.context.job.clone(), self.client);
            let told = DatasetTold::Malformed { reason: reason.clone() };
            self.context.history.dataset_event(DatasetEvent { job, client, told });
        }
        outcome
    }

    async fn renew(&self) -> Result<(), ClientError> {
        Err(ClientError::UnknownTrainer { call: "GetTask" })
    }
}

impl HandOffSource for SimTasks {
    /// One hand-off through the production `MasterClient`, in the history as one call that
    /// acknowledged each accepted finish and the task it was handed.
    async fn finished_then_get_task(
        &self,
        pass: u32,
        finished: &[(u64, u64)],
        together: &client::Together,
    ) -> Result<HandOff, ClientError> {
        let what = format!("hand_off trainer {} pass {pass} finished {finished:?}", self.trainer);
        let receipts = finished.to_vec();
        let facts = move |handed: &HandOff| {
            let reported = receipts.iter().zip(&handed.finished).filter(|(_, accepted)| **accepted);
            let mut facts: Vec<Fact> = reported
                .map(|(&(task_id, epoch), _)| Fact::Reported { task_id, epoch, accepted: true })
                .collect();
            if let TaskOutcome::Task(task) = &handed.outcome {
                facts.push(Fact::Dispatched { task_id: task.task_id, epoch: task.epoch });
            }
            facts
        };
        let mut seq = self.calls.fetch_add(1, Ordering::Relaxed);
        let call = self.master.finished_then_get_task(self.trainer, pass, finished, together);
        self.context.call_with_facts(self.client, &mut seq, what, call, facts).await
    }
}
