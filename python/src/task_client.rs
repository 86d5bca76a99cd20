//! `TaskClient` (native half): one registered trainer of a job. It registers, heartbeats on
//! the runtime (the trainer's own `Session`: it registers again when the master forgot it),
//! takes tasks across passes until the job finishes, and reports them. The Python class in
//! `raftrain/task_client.py` adds iteration, `Task` objects and the context manager.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

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

/// Between asks while no task is available (as the Rust trainer waits).
const IDLE_MS: u64 = 200;

#[pyclass(module = "raftrain._native", frozen)]
pub struct TaskClient {
    process: ProcessBound,
    master: Arc<MasterClient>,
    session: Arc<Session>,
    counters: Arc<TrainerMetrics>,
    /// The pass this trainer asks tasks of; moves as the master answers.
    pass: Arc<AtomicU32>,
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
            Ok(Self {
                process: ProcessBound::here(),
                master,
                session,
                counters,
                pass: Arc::new(AtomicU32::new(0)),
                stop,
            })
        })
    }

    /// The trainer id the master knows this client by now (it changes if it registers again).
    #[getter]
    fn trainer_id(&self) -> u64 {
        self.session.id()
    }

    /// The pass this client takes tasks of.
    #[getter]
    fn pass_index(&self) -> u32 {
        self.pass.load(Ordering::SeqCst)
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

    /// The next task, waiting while none is available and moving to later passes; `None`
    /// once the job finished. A trainer holds one task at a time: until it is reported, the
    /// master answers it again.
    fn next_task(&self, py: Python<'_>) -> PyResult<Option<Task>> {
        guarded("next_task", || {
            self.process.check("TaskClient")?;
            let (master, session, pass) =
                (self.master.clone(), self.session.clone(), self.pass.clone());
            let next = wait(py, next_task(master, session, pass))?;
            Ok(next.map_err(Failure::from)?.map(Task::from))
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

async fn next_task(
    master: Arc<MasterClient>,
    session: Arc<Session>,
    pass: Arc<AtomicU32>,
) -> Result<Option<client::Task>, ClientError> {
    loop {
        match master.get_task(session.id(), pass.load(Ordering::SeqCst)).await? {
            TaskOutcome::Task(task) => return Ok(Some(task)),
            TaskOutcome::PassBefore { current } | TaskOutcome::PassAfter { current } => {
                pass.store(current, Ordering::SeqCst)
            }
            TaskOutcome::NoMoreAvailable | TaskOutcome::NoDataset => {
                tokio::time::sleep(Duration::from_millis(IDLE_MS)).await
            }
            TaskOutcome::UnknownTrainer => {
                session.renew().await?;
            }
            TaskOutcome::JobFinished => return Ok(None),
        }
    }
}
