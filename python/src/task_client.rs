//! `TaskClient` (native half): one trainer of a named job. It registers when it first needs
//! to (after the process may have submitted the job by reporting its dataset), heartbeats on
//! the runtime (`client::Session`, as the Rust trainer's: it registers again when the master forgot it),
//! asks for tasks (the Python side walks the passes) and reports them, and records and
//! restores the job's progress checkpoints. The Python class in
//! `raftrain/task_client.py` adds iteration, `Task` objects and the context manager.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use client::{ClientError, Fault, MasterClient, Session, TaskOutcome};
use pyo3::prelude::*;
use tokio::sync::watch;

use crate::connection::Connection;
use crate::errors::{guarded, Failure};
use crate::process_bound::ProcessBound;
use crate::runtime::{runtime, wait};
use crate::task::Task;

#[pyclass(module = "raftrain._native", frozen)]
pub struct TaskClient {
    process: ProcessBound,
    master: Arc<MasterClient>,
    name: String,
    /// Registered on first use; two threads racing there may each register (the loser's
    /// trainer, never heartbeated, is dropped by the master when its lease ends).
    session: OnceLock<Arc<Session>>,
    /// Tasks this client reported done, which its heartbeats report.
    tasks_done: Arc<AtomicU64>,
    stop: watch::Sender<bool>,
    stopped: watch::Receiver<bool>,
}

#[pymethods]
impl TaskClient {
    /// A trainer named `name` of job `job` (empty: the group's only job); it registers on
    /// first use.
    #[new]
    #[pyo3(signature = (masters, name, job=String::new(), tls_ca=None, tls_cert=None, tls_key=None, token_file=None, deadline_s=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        masters: Vec<String>,
        name: String,
        job: String,
        tls_ca: Option<std::path::PathBuf>,
        tls_cert: Option<std::path::PathBuf>,
        tls_key: Option<std::path::PathBuf>,
        token_file: Option<std::path::PathBuf>,
        deadline_s: Option<f64>,
    ) -> PyResult<Self> {
        guarded("TaskClient", || {
            let connection =
                Connection { masters, tls_ca, tls_cert, tls_key, token_file, deadline_s, job };
            let master = connection.master_client()?;
            let tasks_done = Arc::new(AtomicU64::new(0));
            let (stop, stopped) = watch::channel(false);
            Ok(Self {
                process: ProcessBound::here(),
                master,
                name,
                session: OnceLock::new(),
                tasks_done,
                stop,
                stopped,
            })
        })
    }

    /// The trainer id the master knows this client by now (it registers first if it has not
    /// yet; the id changes if it registers again).
    #[getter]
    fn trainer_id(&self, py: Python<'_>) -> PyResult<u64> {
        guarded("trainer_id", || Ok(self.session(py)?.id()))
    }

    /// Records the job's progress (its pass and done tasks) as one replicated entry:
    /// `(checkpoint_id, pass_index, done)`.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<(u64, u32, u64)> {
        guarded("checkpoint", || {
            self.process.check("TaskClient")?;
            let master = self.master.clone();
            let taken = wait(py, async move { master.checkpoint_job(master.job()).await })?;
            let taken = taken.map_err(Failure::from)?;
            Ok((taken.id, taken.pass, taken.done))
        })
    }

    /// Puts the job back to progress checkpoint `checkpoint_id` (the pservers' model too
    /// unless `data_only`): `(pass_index, todo, reloading)`.
    #[pyo3(signature = (checkpoint_id, data_only=false))]
    fn restore(
        &self,
        py: Python<'_>,
        checkpoint_id: u64,
        data_only: bool,
    ) -> PyResult<(u32, u64, u32)> {
        guarded("restore", || {
            self.process.check("TaskClient")?;
            let master = self.master.clone();
            let restoring =
                async move { master.restore_job(master.job(), checkpoint_id, data_only).await };
            let restored = wait(py, restoring)?.map_err(Failure::from)?;
            Ok((restored.pass, restored.todo, restored.reloading))
        })
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
            client::check_job_name(&job).map_err(Failure::invalid)?;
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
            client::check_job_name(&job).map_err(Failure::invalid)?;
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
            let (master, session) = (self.master.clone(), self.session(py)?);
            let outcome = wait(py, get_task(master, session, pass_index))?;
            let outcome = outcome.map_err(Failure::from)?;
            Ok(match outcome {
                TaskOutcome::Task(task) => ("task", pass_index, Some(Task::from(task))),
                TaskOutcome::PassBefore { current } => ("pass_before", current, None),
                TaskOutcome::PassAfter { current } => ("pass_after", current, None),
                TaskOutcome::NoMoreAvailable => ("no_more_available", pass_index, None),
                TaskOutcome::NoDataset => ("no_dataset", pass_index, None),
                TaskOutcome::JobFinished => ("job_finished", pass_index, None),
                TaskOutcome::JobCancelled => ("job_cancelled", pass_index, None),
                TaskOutcome::UnknownTrainer => {
                    let call = "GetTask";
                    return Err(Failure::from(ClientError::UnknownTrainer { call }).into());
                }
            })
        })
    }

    /// Reports a task done; `False` when the master had taken it back (its epoch is stale) or
    /// the job was cancelled (the next ask says so).
    fn finish(&self, py: Python<'_>, task_id: u64, epoch: u64) -> PyResult<bool> {
        guarded("finish", || {
            self.process.check("TaskClient")?;
            let master = self.master.clone();
            let finished = wait(py, async move { master.task_finished(task_id, epoch).await })?;
            let accepted = not_if_cancelled(finished).map_err(Failure::from)?;
            if accepted {
                self.tasks_done.fetch_add(1, Ordering::Relaxed);
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
            Ok(not_if_cancelled(failed).map_err(Failure::from)?)
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
            let status = wait(py, async move { crate::status::status_with_jobs(&master).await })?;
            Ok(status.map_err(Failure::from)?)
        })
    }

    /// Stops heartbeating: the master takes a held task back once the lease runs out.
    fn close(&self) {
        let _ = self.stop.send(true);
    }
}

impl TaskClient {
    /// This trainer's registration, made now if it was not yet (and its heartbeats started).
    fn session(&self, py: Python<'_>) -> Result<Arc<Session>, PyErr> {
        if let Some(session) = self.session.get() {
            return Ok(session.clone());
        }
        let registered = wait(py, Session::register(self.master.clone(), self.name.clone()))?;
        let session = registered.map_err(Failure::from)?;
        let runtime = runtime().map_err(|error| Failure::new("INTERNAL", error.to_string()))?;
        let session = self.session.get_or_init(|| session).clone();
        runtime.spawn(session.clone().keep_alive(self.tasks_done.clone(), self.stopped.clone()));
        Ok(session)
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

/// A task report of a cancelled job is not an error: it was not accepted, and the trainer's
/// next ask learns the job was cancelled.
fn not_if_cancelled(reported: Result<bool, ClientError>) -> Result<bool, ClientError> {
    match reported {
        Err(ClientError::JobCancelled { .. }) => Ok(false),
        other => other,
    }
}
