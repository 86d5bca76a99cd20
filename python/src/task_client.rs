//! `TaskClient` (native half): one trainer of a named job. It registers when it first needs
//! to (after the process may have submitted the job by reporting its dataset), heartbeats on
//! the runtime (`client::Session`, as the Rust trainer's: it registers again when the master forgot it),
//! walks the job's passes with `client::PassWalker` one typed step at a time (`WalkStep`; the
//! Python side waits as a step says) and reports tasks, and records and restores the job's
//! progress checkpoints. The Python class in
//! `raftrain/task_client.py` adds iteration and `raftrain/task.py` the `Task` objects and their context manager.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use client::{
    ClientError, Fault, JobDataset, JobSpec, MasterClient, PassWalker, PolicyOverrides, Session,
    Together,
};
use pyo3::prelude::*;
use tokio::sync::{watch, Mutex as AsyncMutex};

use crate::ask_gather::AskGather;
use crate::connection::Connection;
use crate::errors::{guarded, Failure};
use crate::pending_step::{walk_step, PendingStep, Walked};
use crate::process_bound::ProcessBound;
use crate::runtime::{runtime, wait};
use crate::walk_step::WalkStep;

/// The walk through the job's passes, as this trainer.
type Walker = Arc<AsyncMutex<PassWalker<Arc<Session>>>>;

#[pyclass(module = "raftrain._native", frozen)]
pub struct TaskClient {
    process: ProcessBound,
    master: Arc<MasterClient>,
    name: String,
    /// Registered on first use; two threads racing there may each register (the loser's
    /// trainer, never heartbeated, is dropped by the master when its lease ends).
    session: OnceLock<Arc<Session>>,
    /// The walk through the passes, made with the session.
    walker: OnceLock<Walker>,
    /// The pass the walk asks for next, as its last step left it.
    pass_index: Arc<AtomicU32>,
    /// Tasks this client reported done, which its heartbeats report.
    tasks_done: Arc<AtomicU64>,
    stop: watch::Sender<bool>,
    stopped: watch::Receiver<bool>,
}

#[pymethods]
impl TaskClient {
    /// A trainer named `name` of job `job` (empty: the group's only job); it registers on
    /// first use, or acts as the registered trainer `trainer_id` that another client keeps
    /// alive (`client::Session::attached`).
    #[new]
    #[pyo3(signature = (masters, name, job=String::new(), tls_ca=None, tls_cert=None, tls_key=None, token_file=None, deadline_s=None, trainer_id=None))]
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
        trainer_id: Option<u64>,
    ) -> PyResult<Self> {
        guarded("TaskClient", || {
            let connection =
                Connection { masters, tls_ca, tls_cert, tls_key, token_file, deadline_s, job };
            let master = connection.master_client()?;
            let tasks_done = Arc::new(AtomicU64::new(0));
            let (stop, stopped) = watch::channel(false);
            let session = OnceLock::new();
            if let Some(id) = trainer_id {
                let _ = session.set(Session::attached(master.clone(), name.clone(), id));
            }
            Ok(Self {
                process: ProcessBound::here(),
                master,
                name,
                session,
                walker: OnceLock::new(),
                pass_index: Arc::default(),
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

    /// Submits job `name` from its spec: RecordIO `patterns` or an `index` range
    /// `(size, shard_size)`, its passes and the queue policy values it overrides (`None`: the
    /// masters' flag). The same spec again changes nothing; another spec under a used name is
    /// refused naming what differs. With `restart`, a job of this name that ended (finished
    /// or cancelled) gets a new incarnation with this spec; a running one is joined.
    /// `shuffle_seed` shuffles the job (`None`: in order); the seed is part of its spec. Answers
    /// (tasks, chunks, records).
    #[pyo3(signature = (name, passes, patterns=None, index=None, chunks_per_task=None, task_timeout_min_ms=None, timeout_factor=None, max_task_failures=None, retry_failed_next_pass=None, restart=false, shuffle_seed=None))]
    #[allow(clippy::too_many_arguments)]
    fn submit_job(
        &self,
        py: Python<'_>,
        name: String,
        passes: u32,
        patterns: Option<Vec<String>>,
        index: Option<(u64, u64)>,
        chunks_per_task: Option<u32>,
        task_timeout_min_ms: Option<u64>,
        timeout_factor: Option<u32>,
        max_task_failures: Option<u32>,
        retry_failed_next_pass: Option<bool>,
        restart: bool,
        shuffle_seed: Option<u64>,
    ) -> PyResult<(u64, u64, u64)> {
        guarded("submit_job", || {
            self.process.check("TaskClient")?;
            let dataset = match (patterns, index) {
                (Some(patterns), None) => JobDataset::RecordIo { patterns },
                (None, Some((size, shard_size))) => JobDataset::Index { size, shard_size },
                _ => {
                    return Err(Failure::invalid(
                        "give either patterns or index=(size, shard_size)",
                    )
                    .into())
                }
            };
            let policy = PolicyOverrides {
                chunks_per_task,
                task_timeout_min_ms,
                timeout_factor,
                max_task_failures,
                retry_failed_next_pass,
            };
            let spec = JobSpec { job: name, dataset, passes, policy, restart, shuffle_seed };
            let master = self.master.clone();
            let submitted = wait(py, async move { master.submit_job(&spec).await })?;
            let sizes = submitted.map_err(Failure::from)?;
            Ok((sizes.task_count, sizes.chunk_count, sizes.record_count))
        })
    }

    /// Reports a RecordIO dataset (shuffled with `shuffle_seed`, if given); answers (tasks,
    /// chunks, records) of the accepted one.
    #[pyo3(signature = (job, patterns, passes, shuffle_seed=None))]
    fn report_dataset(
        &self,
        py: Python<'_>,
        job: String,
        patterns: Vec<String>,
        passes: u32,
        shuffle_seed: Option<u64>,
    ) -> PyResult<(u64, u64, u64)> {
        guarded("report_dataset", || {
            self.process.check("TaskClient")?;
            client::check_job_name(&job).map_err(Failure::invalid)?;
            let master = self.master.clone();
            let reported = wait(py, async move {
                master.report_shuffled_dataset(&job, &patterns, passes, shuffle_seed).await
            })?;
            let sizes = reported.map_err(Failure::from)?;
            Ok((sizes.task_count, sizes.chunk_count, sizes.record_count))
        })
    }

    /// Reports an index dataset: `[0, size)` in tasks of `shard_size` indices, which the
    /// masters never read (shuffled with `shuffle_seed`, if given); answers the accepted job's
    /// task count.
    #[pyo3(signature = (job, size, shard_size, passes, shuffle_seed=None))]
    fn report_index_dataset(
        &self,
        py: Python<'_>,
        job: String,
        size: u64,
        shard_size: u64,
        passes: u32,
        shuffle_seed: Option<u64>,
    ) -> PyResult<u64> {
        guarded("report_index_dataset", || {
            self.process.check("TaskClient")?;
            client::check_job_name(&job).map_err(Failure::invalid)?;
            let master = self.master.clone();
            let reported = wait(py, async move {
                let range = (size, shard_size);
                master.report_shuffled_index_dataset(&job, range, passes, shuffle_seed).await
            })?;
            Ok(reported.map_err(Failure::from)?.task_count)
        })
    }

    /// One step of the walk through the job's passes (one ask, no waiting): a task, a pass
    /// over or rewound, a wait (with how long), or the job's end. A trainer the master forgot
    /// registers again and asks once more. A trainer holds one task at a time: until it is
    /// reported, the master answers it again. `finished` (receipts `(task_id, dispatch)` of
    /// tasks done, this process's) are reported first, in the same write where the masters
    /// can: the step's `finished` says which were accepted.
    #[pyo3(signature = (finished=Vec::new()))]
    fn step(&self, py: Python<'_>, finished: Vec<(u64, u64)>) -> PyResult<WalkStep> {
        guarded("step", || {
            self.process.check("TaskClient")?;
            self.still_open()?;
            let walking =
                walk_once(self.walker(py)?, self.pass_index.clone(), finished, Together::Alone);
            let walked = wait(py, walking)?.map_err(Failure::from)?;
            walk_step(py, walked, &self.tasks_done)
        })
    }

    /// `step(finished)` started on the runtime, returning at once: its answer is the
    /// `PendingStep`'s `result()`. No Python thread waits for it meanwhile. `together`: how
    /// many clients' steps (this one included, at most 8) the caller starts at once, which the
    /// masters then write together (one log entry, one disk sync on each); `gather`, given:
    /// the round those steps belong to, whose asks go in one call.
    #[pyo3(signature = (finished=Vec::new(), together=1, gather=None))]
    fn step_ahead(
        &self,
        py: Python<'_>,
        finished: Vec<(u64, u64)>,
        together: u32,
        gather: Option<PyRef<'_, AskGather>>,
    ) -> PyResult<PendingStep> {
        guarded("step_ahead", || {
            self.process.check("TaskClient")?;
            self.still_open()?;
            let together = gather.map_or(Together::Sent(together), |gather| gather.together());
            let walking = walk_once(self.walker(py)?, self.pass_index.clone(), finished, together);
            let runtime = runtime().map_err(|error| Failure::new("INTERNAL", error.to_string()))?;
            Ok(PendingStep::new(runtime.spawn(walking), self.tasks_done.clone()))
        })
    }

    /// The pass the walk asks for next.
    #[getter]
    fn pass_index(&self) -> u32 {
        self.pass_index.load(Ordering::SeqCst)
    }

    /// Walks pass `pass_index` from now on (a restore answered where the job is).
    fn go_to(&self, py: Python<'_>, pass_index: u32) -> PyResult<()> {
        guarded("go_to", || {
            let walker = self.walker(py)?;
            wait(py, async move { walker.lock().await.go_to(pass_index) })?;
            self.pass_index.store(pass_index, Ordering::SeqCst);
            Ok(())
        })
    }

    /// Reports that this trainer is still at work on a task: its deadline moves to a whole
    /// timeout from now. The timeout in seconds (report again well within it), or `None` when
    /// the task is no longer held under that dispatch or the job was cancelled.
    fn progress(&self, py: Python<'_>, task_id: u64, dispatch: u64) -> PyResult<Option<f64>> {
        guarded("progress", || {
            self.process.check("TaskClient")?;
            let master = self.master.clone();
            let extended = wait(py, async move { master.task_progress(task_id, dispatch).await })?;
            match extended {
                Err(ClientError::JobCancelled { .. }) => Ok(None),
                extended => {
                    Ok(extended.map_err(Failure::from)?.map(|timeout| timeout.as_secs_f64()))
                }
            }
        })
    }

    /// Reports a task done; `False` when the master had taken it back (a newer dispatch holds
    /// it) or the job was cancelled (the next ask says so).
    fn finish(&self, py: Python<'_>, task_id: u64, dispatch: u64) -> PyResult<bool> {
        guarded("finish", || {
            self.process.check("TaskClient")?;
            let master = self.master.clone();
            let finished = wait(py, async move { master.task_finished(task_id, dispatch).await })?;
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
        dispatch: u64,
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
                wait(
                    py,
                    async move { master.task_failed(task_id, dispatch, &reason, fault).await },
                )?;
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
    /// Every job of the group, as `raftrain job list --json` prints it.
    fn jobs_json(&self, py: Python<'_>) -> PyResult<String> {
        guarded("jobs", || {
            self.process.check("TaskClient")?;
            let master = self.master.clone();
            let listed = wait(py, async move { master.list_jobs().await })?;
            Ok(listed.map_err(Failure::from)?.to_json().to_string())
        })
    }

    /// Cancels job `job`: its trainers and pservers stop; it never runs again.
    fn cancel_job(&self, py: Python<'_>, job: String) -> PyResult<()> {
        guarded("cancel", || {
            self.process.check("TaskClient")?;
            let master = self.master.clone();
            let cancelled = wait(py, async move { master.cancel_job(&job).await })?;
            Ok(cancelled.map_err(Failure::from)?)
        })
    }

    /// The job's status as JSON text; with `lists`, every job and rendezvous run too (two
    /// more linearizable reads, each a heartbeat round of the leader's).
    #[pyo3(signature = (lists=true))]
    fn status_json(&self, py: Python<'_>, lists: bool) -> PyResult<String> {
        guarded("status", || {
            self.process.check("TaskClient")?;
            let master = self.master.clone();
            let status = wait(py, async move {
                if lists {
                    crate::status::status_with_jobs(&master).await
                } else {
                    master.status().await.map(|status| status.to_json().to_string())
                }
            })?;
            Ok(status.map_err(Failure::from)?)
        })
    }

    /// Stops heartbeating: the master takes a held task back once the lease runs out.
    fn close(&self) {
        let _ = self.stop.send(true);
    }

    /// Leaves the job (a planned stop): stops heartbeating, and the tasks this trainer holds
    /// go back to the queue now, counting no failure against them. How many went back (0 for
    /// a client that never registered, which sends nothing).
    fn leave(&self, py: Python<'_>) -> PyResult<u64> {
        guarded("leave", || {
            self.process.check("TaskClient")?;
            let _ = self.stop.send(true);
            let Some(trainer) = self.session.get().map(|session| session.id()) else {
                return Ok(0);
            };
            let master = self.master.clone();
            let left = wait(py, async move { master.leave_job(trainer).await })?;
            Ok(left.map_err(Failure::from)?)
        })
    }
}

impl TaskClient {
    /// Refuses an ask once the client was closed: no heartbeat would keep a task it took.
    fn still_open(&self) -> Result<(), Failure> {
        if *self.stopped.borrow() {
            let closed =
                "this TaskClient was closed, so its heartbeats stopped and a task it took \
                          would be taken back: make a new TaskClient";
            return Err(Failure::new("FAILED_PRECONDITION", closed));
        }
        Ok(())
    }

    /// The walk through the passes, with this trainer's registration (made now if it was not).
    fn walker(&self, py: Python<'_>) -> Result<Walker, PyErr> {
        if let Some(walker) = self.walker.get() {
            return Ok(walker.clone());
        }
        let session = self.session(py)?;
        let walker = Arc::new(AsyncMutex::new(PassWalker::new(session)));
        Ok(self.walker.get_or_init(|| walker).clone())
    }

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

/// One step of `walker` (reporting `finished` first, in the same write, when there are any),
/// one of `together` started at once; `pass_index` follows the walk.
async fn walk_once(
    walker: Walker,
    pass_index: Arc<AtomicU32>,
    finished: Vec<(u64, u64)>,
    together: Together,
) -> Walked {
    let mut walker = walker.lock().await;
    let step = match finished.is_empty() && together.is_alone() {
        true => walker.step().await.map(|step| (Vec::new(), step)),
        false => walker.hand_off(&finished, &together).await,
    };
    pass_index.store(walker.pass(), Ordering::SeqCst);
    step.map(|step| (step, walker.pass()))
}

/// A task report of a cancelled job is not an error: it was not accepted, and the trainer's
/// next ask learns the job was cancelled.
fn not_if_cancelled(reported: Result<bool, ClientError>) -> Result<bool, ClientError> {
    match reported {
        Err(ClientError::JobCancelled { .. }) => Ok(false),
        other => other,
    }
}
