//! `Session`: a trainer's registration with the master, kept alive by heartbeats; when the
//! master forgets it (a lease missed, say during a long pause) it registers again and carries on
//! under a new id. The Rust trainer and the Python package's `TaskClient` both hold one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::{ClientError, MasterClient, TrainerHeartbeat};

/// Heartbeats per lease.
const HEARTBEATS_PER_LEASE: u32 = 3;

#[derive(Debug)]
pub struct Session {
    master: Arc<MasterClient>,
    name: String,
    id: AtomicU64,
    lease: Duration,
    /// Set once a heartbeat hears the job was cancelled or removed: the training loop stops
    /// even while it waits on pservers that already left.
    job_ended: watch::Sender<bool>,
}

impl Session {
    /// Registers `name` with the master.
    pub async fn register(
        master: Arc<MasterClient>,
        name: String,
    ) -> Result<Arc<Self>, ClientError> {
        let registration = master.register_trainer(&name).await?;
        tracing::info!(trainer = registration.trainer_id, %name, "registered with the master");
        let lease = Duration::from_millis(registration.lease_ms);
        let (id, job_ended) = (AtomicU64::new(registration.trainer_id), watch::Sender::new(false));
        Ok(Arc::new(Self { master, name, id, lease, job_ended }))
    }

    /// Acts as trainer `id`, registered as `name` by another client that keeps it alive (a
    /// DataLoader worker asking for tasks as its training process's trainer): no call, and
    /// no heartbeats of its own. If the master forgot the trainer (its owner's heartbeats
    /// stopped for a lease), [`Session::renew`] registers one of its own, which no heartbeat
    /// keeps: the masters drop it a lease later and take back what it holds, trained again
    /// (at least once), and the next ask registers again.
    pub fn attached(master: Arc<MasterClient>, name: String, id: u64) -> Arc<Self> {
        let (id, job_ended) = (AtomicU64::new(id), watch::Sender::new(false));
        // The lease paces heartbeats, and an attached session sends none.
        Arc::new(Self { master, name, id, lease: Duration::ZERO, job_ended })
    }

    /// Returns once a heartbeat heard that the job was cancelled or removed.
    pub async fn job_ended(&self) {
        let mut ended = self.job_ended.subscribe();
        // The sender lives as long as `self`: `wait_for` cannot fail while this borrow does.
        let _ = ended.wait_for(|ended| *ended).await;
    }

    /// Whether a heartbeat heard that the job was cancelled or removed.
    pub fn is_job_ended(&self) -> bool {
        *self.job_ended.borrow()
    }

    /// The masters this trainer is registered with.
    pub fn master(&self) -> &Arc<MasterClient> {
        &self.master
    }

    pub fn id(&self) -> u64 {
        self.id.load(Ordering::SeqCst)
    }

    /// Registers again (the master no longer knows this trainer); the new id.
    pub async fn renew(&self) -> Result<u64, ClientError> {
        let registration = self.master.register_trainer(&self.name).await?;
        tracing::warn!(
            trainer = registration.trainer_id,
            "the master had forgotten this trainer; registered again"
        );
        self.id.store(registration.trainer_id, Ordering::SeqCst);
        Ok(registration.trainer_id)
    }

    /// Heartbeats until `stop` turns true, each saying how many tasks `tasks_done` counts.
    pub async fn keep_alive(
        self: Arc<Self>,
        tasks_done: Arc<AtomicU64>,
        mut stop: watch::Receiver<bool>,
    ) {
        let interval = (self.lease / HEARTBEATS_PER_LEASE).max(Duration::from_millis(10));
        loop {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = stop.wait_for(|stop| *stop) => return,
            }
            let tasks_done = tasks_done.load(Ordering::Relaxed);
            // The client may wait for a leader without limit: stopping must not wait for it.
            tokio::select! {
                () = self.beat(tasks_done) => {}
                _ = stop.wait_for(|stop| *stop) => return,
            }
        }
    }

    /// One heartbeat; registers again if the master forgot this trainer.
    async fn beat(&self, tasks_done: u64) {
        match self.master.heartbeat(self.id(), tasks_done).await {
            Ok(TrainerHeartbeat::Known) => {}
            // The training loop stops, even while it waits on pservers that already left.
            Ok(TrainerHeartbeat::JobEnded) => {
                if !self.job_ended.send_replace(true) {
                    tracing::info!("the master says the job was cancelled or removed");
                }
            }
            Ok(TrainerHeartbeat::Unknown) | Err(ClientError::UnknownTrainer { .. }) => {
                if let Err(error) = self.renew().await {
                    tracing::warn!(%error, "registering again failed; retrying");
                }
            }
            Err(error) => tracing::warn!(%error, "trainer heartbeat failed"),
        }
    }
}
