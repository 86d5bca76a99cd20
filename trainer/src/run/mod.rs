//! `run`: one trainer. Joins its job (`joined_job.rs`: takes a submitted job's spec, submits
//! the job from `--dataset`, or waits for it; an index-range job is refused, this trainer reads
//! RecordIO only), registers, waits for every pserver slot, offers its initial parameters (the
//! first trainer's win), then takes tasks until the job finishes:
//! read and check the task's chunks, train on its batches (pushing every n, pulling every m),
//! report it done (or failed, with the reason). After each pass it evaluates and records the
//! result in the master; at the end it writes the model out.
//!
//! This file holds `run` and its `Summary`; the areas live beside it: `membership.rs` (join the
//! job, register, heartbeat, train, sign off), `pserver_join.rs` (wait for the slots, initialize
//! the pservers, pull), `task_loop.rs` (the pass walk, each pass's evaluation, the model out),
//! `task_work.rs` (one task: train and report it, or report its data unusable), `stopping.rs`
//! (shutdown, cancellation and the last word to the masters), `metrics_server.rs`.

mod membership;
mod metrics_server;
mod pserver_join;
mod stopping;
mod task_loop;
mod task_work;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use client::{ClientOptions, MasterClient};
use platform::security::Security;
use tokio::sync::watch;

use crate::config::TrainerConfig;
use crate::model::Evaluation;
use crate::progress::Progress;

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
        metrics_server::serve_metrics(
            listener,
            &config.port_limits,
            progress.metrics.clone(),
            master.clone(),
            stopped,
        )
    });
    let trained = membership::join_and_train(&config, master, progress, shutdown).await;
    let _ = stop.send(true);
    if let Some(metrics) = metrics {
        metrics.await.context("the metrics server panicked")?;
    }
    trained
}
