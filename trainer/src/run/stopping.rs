//! How a trainer stops: a shutdown that comes first (`unless_shutdown`), a cancelled job that
//! ends it with exit 0 (`cancelled`, `cancelled_or`), and its last word to the masters
//! (`sign_off`: leave the job, or a last heartbeat).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use client::{ClientError, MasterClient};

use super::Summary;
use crate::progress::Progress;

/// How long the exiting trainer waits for its last heartbeat to be answered.
const LAST_HEARTBEAT_MS_MAX: u64 = 5_000;

/// The trainer's last word to the masters, not waited for long (the client itself may wait for
/// a leader without limit). Leaving, it leaves the job, so a task it could not finish goes back
/// to the queue now rather than when its lease runs out; otherwise (the job ended) a last
/// heartbeat, so status shows its final count.
pub(super) async fn sign_off(master: &MasterClient, trainer: u64, tasks_done: u64, leaving: bool) {
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

/// The end of a trainer whose job was cancelled: exit 0, with what it did.
pub(super) fn cancelled(progress: Progress) -> anyhow::Result<Summary> {
    tracing::info!("the job was cancelled; stopping");
    Ok(progress.summary())
}

/// `error`, unless it says the job was cancelled (then the trainer stops as for `cancelled`).
pub(super) fn cancelled_or(error: anyhow::Error, progress: Progress) -> anyhow::Result<Summary> {
    let job_cancelled = error.chain().any(|cause| {
        matches!(cause.downcast_ref::<ClientError>(), Some(ClientError::JobCancelled { .. }))
    });
    match job_cancelled {
        true => cancelled(progress),
        false => Err(error),
    }
}

/// `work`'s output, or `None` if `shutdown` comes first.
pub(super) async fn unless_shutdown<T>(
    work: impl Future<Output = T>,
    shutdown: Pin<&mut impl Future<Output = ()>>,
) -> Option<T> {
    tokio::select! {
        output = work => Some(output),
        () = shutdown => None,
    }
}
