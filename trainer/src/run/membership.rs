//! A trainer's membership of its job, start to end: join the job (`joined_job.rs`), register,
//! heartbeat while `task_loop.rs` trains, then stop the heartbeats and sign off
//! (`stopping.rs`: leave the job, or a last heartbeat when the job ended).

use std::future::Future;
use std::sync::Arc;

use anyhow::Context as _;
use client::{ClientError, MasterClient, Session};
use tokio::sync::watch;

use super::stopping::{cancelled, cancelled_or, sign_off, unless_shutdown};
use super::task_loop::train;
use super::Summary;
use crate::config::TrainerConfig;
use crate::feature_count::feature_count;
use crate::joined_job::JoinedJob;
use crate::progress::Progress;

/// Joins the job (waiting until it is submitted, or submitting it: the registration and the
/// pservers' claims name that job), registers, heartbeats, and trains until the job ends or
/// `shutdown` resolves.
pub(super) async fn join_and_train(
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

fn default_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "trainer".into());
    format!("{host}-{}", std::process::id())
}
