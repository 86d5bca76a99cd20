//! One task: read and check its chunks, train on its batches, report it done; a task whose
//! data is unusable is reported failed with whose fault it was (a run of the trainer's own
//! faults backs off, then gives up). A shutdown leaves the task `SHUTDOWN_TASK_GRACE_MS` to end.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use anyhow::Context as _;
use client::{Fault, MasterClient, Task};

use crate::local_faults::{LocalFaults, LocalVerdict};
use crate::progress::Progress;
use crate::step::Stepper;
use crate::task_data::DataError;

/// After a shutdown signal, how long the current task may take to finish before it is dropped
/// unreported (the trainer waits for masters and pservers without limit otherwise).
const SHUTDOWN_TASK_GRACE_MS: u64 = 5_000;

/// Works on `task`; `false` if `shutdown` came meanwhile. The task then has
/// `SHUTDOWN_TASK_GRACE_MS` to end (the masters or a pserver may be out for long) and is
/// otherwise dropped unreported: the master hands it to another trainer.
pub(super) async fn work_or_stop(
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
