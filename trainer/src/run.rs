//! `run`: one trainer. Joins its job (`joined_job.rs`: takes a submitted job's spec, submits
//! the job from `--dataset`, or waits for it; an index-range job is refused, this trainer reads
//! RecordIO only), registers, waits for every pserver slot, offers its initial parameters (the
//! first trainer's win), then takes tasks until the job finishes:
//! read and check the task's chunks, train on its batches (pushing every n, pulling every m),
//! report it done (or failed, with the reason). After each pass it evaluates and records the
//! result in the master; at the end it writes the model out.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use client::pserver::layout::{JobLayout, ParamSpec};
use client::pserver::{PServerClient, PServerClientOptions};
use client::{ClientError, ClientOptions, Fault, MasterClient, PassWalker, Task, Walked};
use platform::security::Security;
use tokio::sync::watch;

use crate::config::TrainerConfig;
use crate::evaluation::evaluate_dataset;
use crate::feature_count::feature_count;
use crate::joined_job::JoinedJob;
use crate::local_faults::{LocalFaults, LocalVerdict};
use crate::metrics::TrainerMetrics;
use crate::model::{Evaluation, ModelConfig, Params};
use crate::progress::Progress;
use crate::step::Stepper;
use crate::task_data::DataError;
use client::Session;

/// Between asks while no task is available.
const IDLE_MS: u64 = 200;
/// How long the exiting trainer waits for its last heartbeat to be answered.
const LAST_HEARTBEAT_MS_MAX: u64 = 5_000;
/// After a shutdown signal, how long the current task may take to finish before it is dropped
/// unreported (the trainer waits for masters and pservers without limit otherwise).
const SHUTDOWN_TASK_GRACE_MS: u64 = 5_000;

/// What a finished trainer did.
#[derive(Debug)]
pub struct Summary {
    pub tasks_done: u64,
    pub tasks_failed: u64,
    pub examples: u64,
    pub last_eval: Option<Evaluation>,
    /// From the start of the first task to the end of the last: the steady-state training
    /// time (start-up, waits for other trainers and the final evaluation excluded).
    pub training: Duration,
}

/// Runs a trainer until the job finishes (or `shutdown` resolves: then it stops after its
/// current task, or within `SHUTDOWN_TASK_GRACE_MS` without reporting it, and the master hands
/// the task to another trainer; a trainer waiting for the masters or a pserver stops at once).
pub async fn run(
    config: TrainerConfig,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<Summary> {
    config.validate()?;
    // Bound before anything is registered, so a bad address fails with nothing to undo.
    let metrics_listener = platform::metrics_http::bind(config.metrics_listen).await?;
    if metrics_listener.is_some() {
        platform::telemetry::install(&[crate::metrics::describe]);
    }
    let security = Security::load(&config.security)?;
    // No deadline unless --master-wait-s asks for one: a trainer waits out a master outage.
    let options = ClientOptions {
        security,
        call_deadline: config.master_wait(),
        job: config.job.clone(),
        ..ClientOptions::default()
    };
    let master = Arc::new(MasterClient::new(&config.masters, options)?);
    // Metrics and readiness are served from the start: a trainer waiting for the masters or
    // its job answers its probes (503 on /readyz) instead of looking dead.
    let progress = Progress::default();
    let (stop, stopped) = watch::channel(false);
    let metrics = metrics_listener.map(|listener| {
        serve_metrics(
            listener,
            &config.port_limits,
            progress.metrics.clone(),
            master.clone(),
            stopped,
        )
    });
    let trained = join_and_train(&config, master, progress, shutdown).await;
    let _ = stop.send(true);
    if let Some(metrics) = metrics {
        metrics.await.context("the metrics server panicked")?;
    }
    trained
}

/// Joins the job (waiting until it is submitted, or submitting it: the registration and the
/// pservers' claims name that job), registers, heartbeats, and trains until the job ends or
/// `shutdown` resolves.
async fn join_and_train(
    config: &TrainerConfig,
    master: Arc<MasterClient>,
    progress: Progress,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<Summary> {
    tokio::pin!(shutdown);
    let joining = JoinedJob::join(config, &master);
    let Some(joined) = unless_shutdown(joining, shutdown.as_mut()).await else {
        return Ok(progress.summary());
    };
    let joined = match joined {
        Ok(joined) => joined,
        Err(error) => return cancelled_or(error, progress),
    };
    let model = config.model_config(feature_count(config, &joined).await?)?;
    let name = config.name.clone().unwrap_or_else(default_name);
    let registered = unless_shutdown(Session::register(master.clone(), name), shutdown.as_mut());
    let Some(session) = registered.await else { return Ok(progress.summary()) };
    let session = match session {
        Err(ClientError::JobCancelled { .. }) => return cancelled(progress),
        registered => registered.context("register with the master")?,
    };
    let (stop, stopped) = watch::channel(false);
    let tasks_done = progress.metrics.tasks_done.clone();
    let heartbeats = tokio::spawn(session.clone().keep_alive(tasks_done, stopped));
    let counters = progress.metrics.clone();
    // Every line the loop logs carries the trainer's id (and, within a task, the task's).
    let span = tracing::info_span!("trainer", trainer = session.id());
    // A cancelled job stops the loop as a shutdown would (its pservers may be gone already,
    // and a push would wait for them without limit).
    let shut_down = std::sync::atomic::AtomicBool::new(false);
    let until = async {
        tokio::select! {
            () = shutdown.as_mut() => shut_down.store(true, std::sync::atomic::Ordering::Relaxed),
            () = session.job_ended() => tracing::info!("the job was cancelled; stopping"),
        }
    };
    let trained = tracing::Instrument::instrument(
        train(config, model, master.clone(), session.clone(), progress, until),
        span,
    )
    .await;
    // The heartbeats end first (they stop at once): one answered after a leave would
    // register the trainer again.
    let _ = stop.send(true);
    heartbeats.await.context("the heartbeat loop panicked")?;
    let tasks_done = counters.tasks_done.load(std::sync::atomic::Ordering::Relaxed);
    // A trainer that stops for any reason but its job's end leaves (a SIGTERM, or an error:
    // --pserver-wait-s, a broken view of the data), so its task need not wait for its lease.
    let leaving = shut_down.load(std::sync::atomic::Ordering::Relaxed) || trained.is_err();
    sign_off(&master, session.id(), tasks_done, leaving).await;
    trained
}

/// The trainer's last word to the masters, not waited for long (the client itself may wait for
/// a leader without limit). Leaving, it leaves the job, so a task it could not finish goes back
/// to the queue now rather than when its lease runs out; otherwise (the job ended) a last
/// heartbeat, so status shows its final count.
async fn sign_off(master: &MasterClient, trainer: u64, tasks_done: u64, leaving: bool) {
    let bound = Duration::from_millis(LAST_HEARTBEAT_MS_MAX);
    if leaving {
        match tokio::time::timeout(bound, master.leave_job(trainer)).await {
            Ok(Ok(requeued)) => tracing::info!(requeued, "left the job"),
            Ok(Err(error)) => tracing::warn!(%error, "could not leave the job; its lease will end"),
            Err(_) => {
                tracing::warn!("leaving the job was not answered in time; its lease will end")
            }
        }
        return;
    }
    match tokio::time::timeout(bound, master.heartbeat(trainer, tasks_done)).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => tracing::debug!(%error, "the last heartbeat was not answered"),
        Err(_) => tracing::debug!("the last heartbeat was not answered in time"),
    }
}

async fn train(
    config: &TrainerConfig,
    model: ModelConfig,
    master: Arc<MasterClient>,
    session: Arc<Session>,
    mut progress: Progress,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<Summary> {
    tokio::pin!(shutdown);
    let joined =
        unless_shutdown(join(config, model, &master, &session, &progress), shutdown.as_mut());
    let Some(stepper) = joined.await else { return Ok(progress.summary()) };
    let mut stepper = stepper?;
    progress.metrics.training.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut walker = PassWalker::new(session.clone()).with_idle(Duration::from_millis(IDLE_MS));
    let mut local_faults = LocalFaults::new(config.local_failures_max);
    loop {
        let walked = tokio::select! {
            walked = walker.next() => walked.context("ask the master for a task")?,
            () = &mut shutdown => return Ok(progress.summary()),
        };
        match walked {
            Walked::Task(task) => {
                let started = std::time::Instant::now();
                let stopping = shutdown.as_mut();
                let faults = &mut local_faults;
                let worked =
                    work_or_stop(&master, &mut stepper, &task, (&mut progress, faults), stopping);
                match worked.await {
                    Ok(true) => {}
                    Ok(false) => return Ok(progress.summary()),
                    Err(error) => return cancelled_or(error, progress),
                }
                progress.task_time(started.elapsed());
                metrics::histogram!("raftrain_trainer_task_seconds")
                    .record(started.elapsed().as_secs_f64());
            }
            Walked::PassOver { pass, next } => {
                if let Some(evaluation) = end_of_pass(config, &master, &mut stepper, pass).await? {
                    progress.evaluated(evaluation);
                }
                progress.pass(next);
            }
            Walked::PassRewound { to, .. } => progress.pass(to),
            Walked::Finished => break,
            Walked::Cancelled => return cancelled(progress),
        }
    }
    finish(config, &master, &mut stepper, walker.pass(), &mut progress).await?;
    Ok(progress.summary())
}

/// Joins the training: waits for every pserver slot, initializes the pservers (or waits for
/// the first trainer to), pulls the model.
async fn join(
    config: &TrainerConfig,
    model: ModelConfig,
    master: &Arc<MasterClient>,
    session: &Session,
    progress: &Progress,
) -> anyhow::Result<Stepper> {
    let options =
        PServerClientOptions { replace_wait: config.pserver_wait(), ..Default::default() };
    let pservers = PServerClient::new(master.clone(), session.id(), options);
    let _ = progress.metrics.pservers.set(pservers.clone());
    tracing::info!("waiting for every pserver slot to be held");
    let table =
        pservers.wait_for_slots(config.pserver_wait()).await.context("wait for the pservers")?;
    tracing::info!(pservers = table.desired, "pservers ready");
    let layout = layout(config, &model, table.desired);
    let initial = model.init(config.seed);
    pservers.init_or_wait(&layout, &tensors(&initial)).await.context("initialize the pservers")?;
    let mut stepper = Stepper::new(model, layout, pservers, config);
    stepper.pull().await?;
    Ok(stepper)
}

/// The end of a trainer whose job was cancelled: exit 0, with what it did.
fn cancelled(progress: Progress) -> anyhow::Result<Summary> {
    tracing::info!("the job was cancelled; stopping");
    Ok(progress.summary())
}

/// `error`, unless it says the job was cancelled (then the trainer stops as for `cancelled`).
fn cancelled_or(error: anyhow::Error, progress: Progress) -> anyhow::Result<Summary> {
    let job_cancelled = error.chain().any(|cause| {
        matches!(cause.downcast_ref::<ClientError>(), Some(ClientError::JobCancelled { .. }))
    });
    match job_cancelled {
        true => cancelled(progress),
        false => Err(error),
    }
}

/// `work`'s output, or `None` if `shutdown` comes first.
async fn unless_shutdown<T>(
    work: impl Future<Output = T>,
    shutdown: Pin<&mut impl Future<Output = ()>>,
) -> Option<T> {
    tokio::select! {
        output = work => Some(output),
        () = shutdown => None,
    }
}

/// Works on `task`; `false` if `shutdown` came meanwhile. The task then has
/// `SHUTDOWN_TASK_GRACE_MS` to end (the masters or a pserver may be out for long) and is
/// otherwise dropped unreported: the master hands it to another trainer.
async fn work_or_stop(
    master: &MasterClient,
    stepper: &mut Stepper,
    task: &Task,
    (progress, local_faults): (&mut Progress, &mut LocalFaults),
    shutdown: Pin<&mut impl Future<Output = ()>>,
) -> anyhow::Result<bool> {
    let work = work_on(master, stepper, task, progress, local_faults);
    tokio::pin!(work);
    tokio::select! {
        done = &mut work => return done.map(|()| true),
        () = shutdown => {}
    }
    let grace = Duration::from_millis(SHUTDOWN_TASK_GRACE_MS);
    match tokio::time::timeout(grace, work).await {
        Ok(done) => done.map(|()| false),
        Err(_) => {
            tracing::warn!(
                task = task.task_id,
                "stopping before the task could be finished and reported"
            );
            Ok(false)
        }
    }
}

/// Trains on one task and reports it; a task whose data is bad is reported failed.
#[tracing::instrument(level = "info", name = "task", skip_all, fields(task = task.task_id, epoch = task.epoch, pass = task.pass))]
async fn work_on(
    master: &MasterClient,
    stepper: &mut Stepper,
    task: &Task,
    progress: &mut Progress,
    local_faults: &mut LocalFaults,
) -> anyhow::Result<()> {
    let batches = match stepper.read(task).await? {
        Ok(batches) => batches,
        Err(error) => return report_unreadable(master, task, &error, progress, local_faults).await,
    };
    local_faults.read_ok();
    let examples = stepper.train(&batches).await?;
    let accepted =
        master.task_finished(task.task_id, task.epoch).await.context("report a finished task")?;
    if !accepted {
        tracing::info!(
            task = task.task_id,
            epoch = task.epoch,
            "the master had already given the task to another trainer"
        );
    }
    progress.task_done(examples);
    Ok(())
}

/// Reports a task whose data this trainer could not use, with whose fault it was. A run of
/// local faults (this trainer's view of the data) backs off between tasks, then ends the
/// trainer with an error naming the file and offset: its view is broken, the data is not.
async fn report_unreadable(
    master: &MasterClient,
    task: &Task,
    error: &DataError,
    progress: &mut Progress,
    local_faults: &mut LocalFaults,
) -> anyhow::Result<()> {
    let fault = error.fault();
    let reason = error.to_string();
    tracing::warn!(task = task.task_id, ?fault, %reason, "task data unusable; reporting it failed");
    master
        .task_failed(task.task_id, task.epoch, &reason, fault)
        .await
        .context("report a failed task")?;
    progress.task_failed();
    if fault == Fault::Content {
        return Ok(());
    }
    match local_faults.failed() {
        LocalVerdict::Continue => Ok(()),
        LocalVerdict::BackOff(wait) => {
            tracing::warn!(
                wait_ms = wait.as_millis() as u64,
                "backing off after local read failures"
            );
            tokio::time::sleep(wait).await;
            Ok(())
        }
        LocalVerdict::GiveUp { consecutive } if error.is_model_mismatch() => Err(anyhow::anyhow!(
            "this trainer's model does not fit the data: {consecutive} tasks in a row \
             (--local-failures-max) had records beyond it (check --classes and --features, or \
             the job's model if another trainer chose it), the last: {reason}"
        )),
        LocalVerdict::GiveUp { consecutive } => Err(anyhow::anyhow!(
            "this trainer failed to read {consecutive} tasks in a row (--local-failures-max); \
             its view of the data is broken (a bad mount, a truncated copy?), the last: {reason}"
        )),
    }
}

/// After `pass`: pull, evaluate, record the result in the master.
async fn end_of_pass(
    config: &TrainerConfig,
    master: &MasterClient,
    stepper: &mut Stepper,
    pass: u32,
) -> anyhow::Result<Option<Evaluation>> {
    if config.eval_dataset.is_empty() {
        return Ok(None);
    }
    stepper.pull().await?;
    let (model, params, patterns) =
        (*stepper.model(), stepper.params().clone(), config.eval_dataset.clone());
    let evaluation =
        tokio::task::spawn_blocking(move || evaluate_dataset(&model, &params, &patterns))
            .await
            .context("evaluation panicked")??;
    let accuracy = evaluation.accuracy().unwrap_or(0.0);
    tracing::info!(
        pass,
        loss = evaluation.loss,
        accuracy,
        examples = evaluation.examples,
        "evaluated"
    );
    master
        .record_eval(pass, evaluation.loss as f32, accuracy as f32)
        .await
        .context("record the evaluation")?;
    Ok(Some(evaluation))
}

/// The job finished: the last evaluation and the model out.
async fn finish(
    config: &TrainerConfig,
    master: &MasterClient,
    stepper: &mut Stepper,
    pass: u32,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    tracing::info!("the job finished");
    if let Some(evaluation) = end_of_pass(config, master, stepper, pass).await? {
        progress.evaluated(evaluation);
    }
    if let Some(path) = &config.model_out {
        stepper.pull().await?;
        crate::saved_model::save(path, stepper.model(), stepper.params())?;
        tracing::info!(path = %path.display(), "model written");
    }
    Ok(())
}

fn layout(config: &TrainerConfig, model: &ModelConfig, slot_count: u32) -> JobLayout {
    let params = model
        .param_shapes()
        .into_iter()
        .map(|(name, shape)| ParamSpec {
            name,
            shape: shape.iter().map(|&dim| dim as u64).collect(),
        })
        .collect();
    JobLayout {
        params,
        block_elements: config.block_elements,
        slot_count,
        optimizer: config.optimizer(),
    }
}

pub(crate) fn tensors(params: &Params) -> Vec<(&str, &[f32])> {
    params.iter().map(|(name, values)| (name.as_str(), values.as_slice())).collect()
}

/// Serves the trainer's metrics until `stopped` turns true; ready while it trains (see
/// `TrainerMetrics::readiness`).
fn serve_metrics(
    listener: tokio::net::TcpListener,
    limits: &platform::PortLimits,
    metrics: Arc<TrainerMetrics>,
    master: Arc<MasterClient>,
    stopped: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let ready_metrics = metrics.clone();
    let render: platform::metrics_http::Render = Arc::new(move || metrics.render());
    let ready: platform::metrics_http::Ready = Arc::new(move || ready_metrics.readiness(&master));
    platform::metrics_http::spawn(
        listener,
        limits.clone(),
        platform::metrics_http::Endpoints { render, ready },
        stopped,
    )
}

fn default_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "trainer".into());
    format!("{host}-{}", std::process::id())
}
