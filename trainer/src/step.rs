//! `Stepper`: the trainer's model state between the pservers and the data: the parameters it
//! last pulled, the gradient it has accumulated since its last push, the cadence of pushes
//! and pulls, and the exchange in flight while the next batch computes (`--staleness 1`).

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use client::pserver::layout::JobLayout;
use client::pserver::{PServerClient, PServerClientError};
use client::{Task, TaskData};
use tokio::runtime::RuntimeFlavor;

use crate::batch::Batch;
use crate::config::TrainerConfig;
use crate::exchange::InFlight;
use crate::model::{ModelConfig, Params};
use crate::task_data::{read_shuffled_task, read_task, DataError};

pub struct Stepper {
    model: ModelConfig,
    layout: Arc<JobLayout>,
    pservers: PServerClient,
    /// The parameters batches are computed on (shared with the pserver client, which keeps the
    /// newest it pulled).
    params: Arc<Params>,
    /// The buffer the next pull fills while batches are computed on `params`.
    spare: Option<Params>,
    /// The exchange under way (staleness 1 only), which the next one waits for.
    in_flight: Option<InFlight>,
    batch_size: usize,
    push_every: usize,
    pull_every: usize,
    staleness: u32,
    /// The summed gradients since the last push, and how many batches they hold.
    accumulated: Option<(Params, usize)>,
    batches_since_pull: usize,
    /// Gradients not pushed because they were not finite.
    pub nonfinite_dropped: u64,
}

impl Stepper {
    pub fn new(
        model: ModelConfig,
        layout: JobLayout,
        pservers: PServerClient,
        config: &TrainerConfig,
    ) -> Self {
        Self {
            model,
            layout: Arc::new(layout),
            pservers,
            params: Arc::new(Params::new()),
            spare: None,
            in_flight: None,
            batch_size: config.batch_size,
            push_every: config.push_every,
            pull_every: config.pull_every,
            staleness: config.staleness,
            accumulated: None,
            batches_since_pull: 0,
            nonfinite_dropped: 0,
        }
    }

    pub fn model(&self) -> &ModelConfig {
        &self.model
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Fresh parameters from the pservers (after the exchange under way, if any).
    pub async fn pull(&mut self) -> anyhow::Result<()> {
        self.settle().await?;
        let into = self.spare.take().unwrap_or_default();
        let pulled = self.pservers.pull_shared(&self.layout, into).await?;
        self.take_params(pulled);
        self.batches_since_pull = 0;
        Ok(())
    }

    /// The task's batches, or why its data is unusable (the reason `TaskFailed` carries). A
    /// task of an index range is an error: this trainer reads RecordIO chunks only (it joined
    /// a RecordIO job, whose report the master accepted, so it never gets one).
    pub async fn read(&self, task: &Task) -> anyhow::Result<Result<Vec<Batch>, DataError>> {
        let chunks = match &task.data {
            TaskData::Chunks(chunks) => chunks.clone(),
            TaskData::IndexRange { start, end } => anyhow::bail!(
                "task {} covers the indices {start}..{end} of an index-range job: \
                 `raftrain trainer` trains RecordIO datasets only; train this job with the \
                 Python package",
                task.task_id
            ),
        };
        let (model, batch_size) = (self.model, self.batch_size);
        // A shuffled job's samples are read in the task's seeded order, as Python reads them.
        let shuffled = task.shuffle_seed.map(|seed| (seed, task.pass, task.task_id));
        let read = tokio::task::spawn_blocking(move || match shuffled {
            Some(order) => read_shuffled_task(&model, &chunks, batch_size, order),
            None => read_task(&model, &chunks, batch_size),
        });
        read.await.context("reading a task panicked")
    }

    /// Trains on the batches; the examples seen. Every gradient of the task is pushed (or
    /// dropped, see `push_outcome`) before this returns, so the task can be reported.
    pub async fn train(&mut self, batches: &[Batch]) -> anyhow::Result<u64> {
        let started = Instant::now();
        let mut examples = 0;
        for batch in batches {
            let gradient = self.gradient(batch)?;
            self.accumulate(gradient);
            examples += batch.len() as u64;
            self.batches_since_pull += 1;
            let push_due =
                self.accumulated.as_ref().is_some_and(|(_, count)| *count >= self.push_every);
            let pull_due = self.batches_since_pull >= self.pull_every;
            self.exchange(push_due, pull_due).await?;
        }
        self.exchange(true, false).await?;
        self.settle().await?;
        tracing::debug!(examples, ms = started.elapsed().as_millis() as u64, "task trained");
        Ok(examples)
    }

    /// The batch's gradient on the current parameters. While an exchange is in flight the
    /// computation leaves this worker thread's other tasks (the exchange among them) to
    /// another thread, so they go on meanwhile.
    fn gradient(&self, batch: &Batch) -> anyhow::Result<Params> {
        let compute = || self.model.loss_and_gradient(&self.params, batch);
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread);
        let (_, gradient) = if self.in_flight.is_some() && multi_thread {
            tokio::task::block_in_place(compute)
        } else {
            compute()
        }?;
        Ok(gradient)
    }

    fn accumulate(&mut self, gradient: Params) {
        match &mut self.accumulated {
            None => self.accumulated = Some((gradient, 1)),
            Some((sum, count)) => {
                for (name, values) in sum.iter_mut() {
                    values.iter_mut().zip(&gradient[name]).for_each(|(total, g)| *total += g);
                }
                *count += 1;
            }
        }
    }

    /// Pushes the averaged accumulated gradient (if `push` and there is one), then pulls fresh
    /// parameters (if `pull`). With staleness 0 the next batch waits for both; with staleness
    /// 1 the exchange runs while the next batch computes (on parameters that lack this push)
    /// and the next exchange waits for it.
    async fn exchange(&mut self, push: bool, pull: bool) -> anyhow::Result<()> {
        let accumulated = if push { self.accumulated.take() } else { None };
        if accumulated.is_none() && !pull {
            return Ok(());
        }
        self.settle().await?;
        let pull_into = pull.then(|| self.spare.take().unwrap_or_default());
        if pull {
            self.batches_since_pull = 0;
        }
        let (pservers, layout) = (&self.pservers, &self.layout);
        self.in_flight = Some(InFlight::start(pservers, layout, accumulated, pull_into));
        if self.staleness == 0 {
            self.settle().await?;
        }
        Ok(())
    }

    /// `pulled` become the parameters batches compute on; the replaced ones are pulled into
    /// next time (nothing else holds them once a newer pull replaced them in the client).
    fn take_params(&mut self, pulled: Arc<Params>) {
        let replaced = std::mem::replace(&mut self.params, pulled);
        self.spare = Arc::try_unwrap(replaced).ok();
    }

    /// Waits for the exchange under way, if any: its pulled parameters become the current
    /// ones.
    async fn settle(&mut self) -> anyhow::Result<()> {
        let Some(in_flight) = self.in_flight.take() else { return Ok(()) };
        let exchanged = in_flight.finish().await?;
        if exchanged.nonfinite_dropped {
            tracing::warn!("a gradient holds NaN or an infinity (the model diverges: lower --learning-rate?); not pushed");
            self.nonfinite_dropped += 1;
        }
        if let Some(pulled) = exchanged.pulled {
            self.take_params(pulled?);
        }
        push_outcome(exchanged.pushed)
    }
}

/// A push whose outcome is unknown, or one computed on a model a restore replaced, is logged
/// and dropped (never sent twice, never applied to the restored model).
fn push_outcome(pushed: Result<(), PServerClientError>) -> anyhow::Result<()> {
    match pushed {
        Ok(()) => Ok(()),
        Err(PServerClientError::NotFiniteResult { slot, message }) => {
            tracing::warn!(slot, %message, "a push would overflow a parameter to NaN or an infinity (the model diverges: lower --learning-rate?); dropped");
            Ok(())
        }
        Err(PServerClientError::OutcomeUnknown { slot, message }) => {
            tracing::warn!(slot, %message, "a push's outcome is unknown; not sending it again");
            Ok(())
        }
        Err(PServerClientError::ModelRestored { slot, message }) => {
            tracing::warn!(slot, %message, "a gradient of the model a restore replaced was refused; dropped (the restore puts its data back in the queue)");
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}
