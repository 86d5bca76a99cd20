//! `TaskClient` (native half): one registered trainer of a job. It registers, heartbeats on
//! the runtime (the trainer's own `Session`: it registers again when the master forgot it),
//! asks for tasks (the Python side walks the passes) and reports them. The Python class in
//! `raftrain/task_client.py` adds iteration, `Task` objects and the context manager.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use client::{ClientError, Fault, MasterClient, TaskOutcome};
use pyo3::prelude::*;
use tokio::sync::watch;
use trainer::metrics::TrainerMetrics;
use trainer::session::Session;

use crate::connection::Connection;
use crate::errors::{guarded, Failure};
use crate::process_bound::ProcessBound;
use crate::runtime::{runtime, wait};
use crate::task::Task;

#[pyclass(module = "raftrain._native", frozen)]
pub struct TaskClient {
    process: ProcessBound,
    master: Arc<MasterClient>,
    session: Arc<Session>,
    counters: Arc<TrainerMetrics>,
    stop: watch::Sender<bool>,
}

#[pymethods]
impl TaskClient {
    /// Registers as trainer `name` and starts heartbeating.
    #[new]
    #[pyo3(signature = (masters, name, tls_ca=None, tls_cert=None, tls_key=None, token_file=None, deadline_s=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        masters: Vec<String>,
        name: String,
        tls_ca: Option<std::path::PathBuf>,
        tls_cert: Option<std::path::PathBuf>,
        tls_key: Option<std::path::PathBuf>,
        token_file: Option<std::path::PathBuf>,
        deadline_s: Option<f64>,
    ) -> PyResult<Self> {
        guarded("TaskClient", || {
            let connection =
                Connection { masters, tls_ca, tls_cert, tls_key, token_file, deadline_s };
            let master = connection.master_client()?;
            let registered = wait(py, Session::register(master.clone(), name))?;
            let session = registered.map_err(Failure::from)?;
            let counters = Arc::new(TrainerMetrics::default());
            let (stop, stopped) = watch::channel(false);
            let runtime = runtime().map_err(|error| Failure::new("INTERNAL", error.to_string()))?;
            runtime.spawn(session.clone().keep_alive(counters.clone(), stopped));
            Ok(Self { process: ProcessBound::here(), master, session, counters, stop })
        })
    }

    /// The trainer id the master knows this client by now (it changes if it registers again).
    #[getter]
    fn trainer_id(&self) -> u64 {
        self.session.id()
    }

    /// Reports a RecordIO dataset; answers (tasks, chunks, records) of the accepted one.
    fn report_dataset(
        &self,
        py: Python<'_>,
        job: String,
        patterns: Vec<String>,
        passes: u32,
    ) -> PyResult<(u64, u64, u64)> {
        guarded("report_dataset", || {
            self.process.check("TaskClient")?;
            let master = self.master.clone();
            let reported =
                wait(py, async move { master.report_dataset(&job, &patterns, passes).await })?;
            let sizes = reported.map_err(Failure::from)?;
            Ok((sizes.task_count, sizes.chunk_count, sizes.record_count))
        })
    }

    /// Reports an index dataset: `[0, size)` in tasks of `shard_size` indices, which the
    /// masters never read; answers the accepted job's task count.
    fn report_index_dataset(
        &self,
        py: Python<'_>,
        job: String,
        size: u64,
        shard_size: u64,
        passes: u32,
    ) -> PyResult<u64> {
        guarded("report_index_dataset", || {
            self.process.check("TaskClient")?;
            let master = self.master.clone();
            let reported = wait(py, async move {
                master.report_index_dataset(&job, size, shard_size, passes).await
            })?;
            Ok(reported.map_err(Failure::from)?.task_count)
        })
    }

    /// One ask for a task of pass `pass_index`: `(outcome, current_pass, task)` where
    /// outcome is `task`, `pass_before` (the pass is over; `current_pass` runs), `pass_after`
    /// (it has not begun), `no_more_available` (the rest are pending elsewhere), `no_dataset`
    /// or `job_finished`. A trainer the master forgot registers again and asks once more. A
    /// trainer holds one task at a time: until it is reported, the master answers it again.
    fn get_task(
        &self,
        py: Python<'_>,
        pass_index: u32,
    ) -> PyResult<(&'static str, u32, Option<Task>)> {
        guarded("get_task", || {
            self.process.check("TaskClient")?;
            let (master, session) = (self.master.clone(), self.session.clone());
            let outcome = wait(py, get_task(master, session, pass_index))?;
            let outcome = outcome.map_err(Failure::from)?;
            Ok(match outcome {
                TaskOutcome::Task(task) => ("task", pass_index, Some(Task::from(task))),
                TaskOutcome::PassBefore { current } => ("pass_before", current, None),
                TaskOutcome::PassAfter { current } => ("pass_after", current, None),
                TaskOutcome::NoMoreAvailable => ("no_more_available", pass_index, None),
                TaskOutcome::NoDataset => ("no_dataset", pass_index, None),
                TaskOutcome::JobFinished => ("job_finished", pass_index, None),
                TaskOutcome::UnknownTrainer => {
                    let call = "GetTask";
                    return Err(Failure::from(ClientError::UnknownTrainer { call }).into());
                }
            })
        })
    }

    /// Reports a task done; `False` when the master had taken it back (its epoch is stale).
    fn finish(&self, py: Python<'_>, task_id: u64, epoch: u64) -> PyResult<bool> {
        guarded("finish", || {
            self.process.check("TaskClient")?;
            let master = self.master.clone();
            let finished = wait(py, async move { master.task_finished(task_id, epoch).await })?;
            let accepted = finished.map_err(Failure::from)?;
            if accepted {
                self.counters.tasks_done.fetch_add(1, Ordering::Relaxed);
            }
            Ok(accepted)
        })
    }

    /// Reports a task failed with `reason`; `fault` is `content` (the data is bad: counts
    /// against the task's failure budget) or `local` (this process could not read it).
    fn fail(
        &self,
        py: Python<'_>,
        task_id: u64,
        epoch: u64,
        reason: String,
        fault: &str,
    ) -> PyResult<bool> {
        guarded("fail", || {
            self.process.check("TaskClient")?;
            let fault = match fault {
                "content" => Fault::Content,
                "local" => Fault::Local,
                other => {
                    return Err(Failure::invalid(format!(
                        "fault {other:?} is neither \"content\" nor \"local\""
                    ))
                    .into())
                }
            };
            let master = self.master.clone();
            let failed =
                wait(py, async move { master.task_failed(task_id, epoch, &reason, fault).await })?;
            Ok(failed.map_err(Failure::from)?)
        })
    }

    /// Records an evaluation after pass `pass_index` (accuracy in 0..=1).
    fn record_eval(
        &self,
        py: Python<'_>,
        pass_index: u32,
        loss: f32,
        accuracy: f32,
    ) -> PyResult<()> {
        guarded("record_eval", || {
            self.process.check("TaskClient")?;
            let master = self.master.clone();
            let recorded =
                wait(py, async move { master.record_eval(pass_index, loss, accuracy).await })?;
            Ok(recorded.map_err(Failure::from)?)
        })
    }

    /// The job's status as JSON text, with the keys of `raftrain status --json`.
    fn status_json(&self, py: Python<'_>) -> PyResult<String> {
        guarded("status", || {
            self.process.check("TaskClient")?;
            let master = self.master.clone();
            let status = wait(py, async move { master.status().await })?;
            Ok(status.map_err(Failure::from)?.to_json().to_string())
        })
    }

    /// Stops heartbeating: the master takes a held task back once the lease runs out.
    fn close(&self) {
        let _ = self.stop.send(true);
    }
}

impl Drop for TaskClient {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

async fn get_task(
    master: Arc<MasterClient>,
    session: Arc<Session>,
    pass_index: u32,
) -> Result<TaskOutcome, ClientError> {
    match master.get_task(session.id(), pass_index).await? {
        TaskOutcome::UnknownTrainer => {
            session.renew().await?;
            match master.get_task(session.id(), pass_index).await? {
                TaskOutcome::UnknownTrainer => Err(ClientError::UnknownTrainer { call: "GetTask" }),
                outcome => Ok(outcome),
            }
        }
        outcome => Ok(outcome),
    }
}
