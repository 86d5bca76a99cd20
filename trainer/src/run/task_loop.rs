//! The task loop: joins the training on the pservers, then walks the passes (`PassWalker`),
//! working on each task it is given (`task_work.rs`), evaluating at each pass's end and
//! recording the result in the master, and at the job's end evaluating once more and writing
//! the model out.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use client::{MasterClient, PassWalker, Session, Walked};

use super::pserver_join::join;
use super::stopping::{cancelled, cancelled_or, unless_shutdown};
use super::task_work::work_or_stop;
use super::Summary;
use crate::config::TrainerConfig;
use crate::evaluation::evaluate_dataset;
use crate::local_faults::LocalFaults;
use crate::model::{Evaluation, ModelConfig};
use crate::progress::Progress;
use crate::step::Stepper;

/// Between asks while no task is available.
const IDLE_MS: u64 = 200;

pub(super) async fn train(
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
