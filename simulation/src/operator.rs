//! A simulated operator of a run's last job (with `--operator`), on the production
//! `MasterClient` as `raftrain job` uses it: at a seeded time of the fault phase it takes a
//! progress checkpoint of the job and restores it with the model (asking again while the
//! pservers have not all recorded their files for it), so the holders reload while trainers
//! push; a while later it takes another, then cancels the job while a restore of that
//! checkpoint (data only) is in flight, and asks for the restore once more after the cancel
//! was answered. Which
//! of the racing two applies first is the schedule's; a restore applied after the cancel must
//! be refused (the service refuses one of a job it sees cancelled before proposing it; one
//! proposed just before reaches the state machine): a cancelled job never runs again.
//! The checkers judge it on every node after every step (`check_transition`'s
//! `EndedJobRevived`, `check_invariants`' `EndedJobRestoring`); the operator itself only says
//! in the trace what it was answered.

use std::sync::Arc;
use std::time::Duration;

use client::MasterClient;

use crate::client::ClientContext;
use crate::config::SimulationConfig;
use crate::job::SimJob;
use crate::rng::SimRng;

/// The operator's random stream (far from every other component's).
const OPERATOR_STREAM: u64 = 1 << 42;
/// When, within the fault phase, the operator acts (a fraction of it, in percent).
const ACTS_AT_PERCENT: (u64, u64) = (20, 80);
/// Between a failed call and the next try, and between the cancel and the restore.
const PAUSE_MS: (u64, u64) = (50, 400);
/// Tries of one call before the operator gives it up (its outcome then stays unknown).
const TRIES_MAX: u32 = 20;
/// Between the restore with the model and the checkpoint the cancel races.
const TRAINS_BETWEEN_MS: (u64, u64) = (300, 1_500);

/// The operator of one job.
pub struct SimOperator {
    job: String,
    client: Arc<MasterClient>,
    context: ClientContext,
    rng: SimRng,
    acts_at_ms: u64,
}

impl SimOperator {
    /// The operator of `job` in `config`'s run.
    pub fn new(
        job: &SimJob,
        config: &SimulationConfig,
        context: &ClientContext,
    ) -> anyhow::Result<Self> {
        let context = context.in_job(job, config);
        let client = Arc::new(context.master_client(config, config.seed ^ 0x0be7)?);
        let mut rng = SimRng::derive(config.seed, OPERATOR_STREAM);
        let percent = rng.range(ACTS_AT_PERCENT.0, ACTS_AT_PERCENT.1);
        let acts_at_ms = config.fault_phase_ms * percent / 100;
        Ok(Self { job: job.name.clone(), client, context, rng, acts_at_ms })
    }

    /// Restores a checkpoint with the model, then checkpoints, cancels while a restore races
    /// it, and tries to restore the job.
    pub async fn run(mut self) {
        tokio::time::sleep(Duration::from_millis(self.acts_at_ms)).await;
        self.restore_with_model().await;
        let between = self.rng.range(TRAINS_BETWEEN_MS.0, TRAINS_BETWEEN_MS.1);
        tokio::time::sleep(Duration::from_millis(between)).await;
        self.cancel_while_restoring().await;
    }

    /// Takes a progress checkpoint and restores it with the model once every slot recorded
    /// its file for it (the restore is refused until then).
    async fn restore_with_model(&mut self) {
        let checkpoint = self
            .repeat("checkpoint", |client, job| async move { client.checkpoint_job(&job).await })
            .await;
        let Some(checkpoint) = checkpoint else { return };
        let restore = |client: Arc<MasterClient>, job: String| async move {
            client.restore_job(&job, checkpoint.id, false).await
        };
        if let Some(restored) = self.repeat("restore with the model", restore).await {
            self.context.trace.tally("model restored by the operator");
            self.record(format!("restore with the model: {restored:?}"));
        }
    }

    /// Checkpoints, cancels while a data-only restore races it, and restores once more.
    async fn cancel_while_restoring(&mut self) {
        let checkpoint = self
            .repeat("checkpoint", |client, job| async move { client.checkpoint_job(&job).await })
            .await;
        let Some(checkpoint) = checkpoint else { return };
        let (client, job) = (self.client.clone(), self.job.clone());
        let racing =
            tokio::spawn(async move { client.restore_job(&job, checkpoint.id, true).await });
        let cancel =
            |client: Arc<MasterClient>, job: String| async move { client.cancel_job(&job).await };
        let cancelled = self.repeat("cancel", cancel).await;
        let raced = racing.await.map_err(|error| error.to_string());
        self.record(format!("restore racing the cancel: {raced:?}"));
        if cancelled.is_none() {
            return;
        }
        self.context.trace.tally("job cancelled by the operator");
        self.pause().await;
        match self.client.restore_job(&self.job, checkpoint.id, true).await {
            Ok(restored) => self.record(format!("restore of the cancelled job: {restored:?}")),
            Err(error) => self.record(format!("restore of the cancelled job refused: {error}")),
        }
    }

    /// `call` until it succeeds, at most `TRIES_MAX` times; its answer.
    async fn repeat<T, F, Fut>(&mut self, what: &str, mut call: F) -> Option<T>
    where
        F: FnMut(Arc<MasterClient>, String) -> Fut,
        Fut: std::future::Future<Output = Result<T, client::ClientError>>,
    {
        for _ in 0..TRIES_MAX {
            match call(self.client.clone(), self.job.clone()).await {
                Ok(answer) => {
                    self.record(format!("{what} of job {:?} done", self.job));
                    return Some(answer);
                }
                Err(error) => self.record(format!("{what} of job {:?} failed: {error}", self.job)),
            }
            self.pause().await;
        }
        None
    }

    fn record(&self, line: String) {
        self.context.trace.record(format!("operator: {line}"));
    }

    async fn pause(&mut self) {
        let ms = self.rng.range(PAUSE_MS.0, PAUSE_MS.1);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}
