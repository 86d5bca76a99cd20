//! `Stepper`: the trainer's model state between the pservers and the data: the parameters it
//! last pulled, the gradient it has accumulated since its last push, and the cadence of pushes
//! and pulls.

use std::time::Instant;

use anyhow::Context as _;
use client::{Task, TaskData};
use pserver::client::{PServerClient, PServerClientError};
use pserver::layout::JobLayout;

use crate::batch::Batch;
use crate::config::TrainerConfig;
use crate::model::{ModelConfig, Params};
use crate::run::tensors;
use crate::task_data::{read_task, DataError};

pub struct Stepper {
    model: ModelConfig,
    layout: JobLayout,
    pservers: PServerClient,
    params: Params,
    batch_size: usize,
    push_every: usize,
    pull_every: usize,
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
            layout,
            pservers,
            params: Params::new(),
            batch_size: config.batch_size,
            push_every: config.push_every,
            pull_every: config.pull_every,
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

    /// Fresh parameters from the pservers.
    pub async fn pull(&mut self) -> Result<(), PServerClientError> {
        self.pservers.pull_into(&self.layout, &mut self.params).await?;
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
                task.id
            ),
        };
        let (model, batch_size) = (self.model, self.batch_size);
        let read = tokio::task::spawn_blocking(move || read_task(&model, &chunks, batch_size));
        read.await.context("reading a task panicked")
    }

    /// Trains on the batches; the examples seen. A push whose outcome is unknown is logged and
    /// dropped (never sent twice).
    pub async fn train(&mut self, batches: &[Batch]) -> anyhow::Result<u64> {
        let started = Instant::now();
        let mut examples = 0;
        for batch in batches {
            let (_, gradient) =
                self.model.loss_and_gradient(&self.params, batch).map_err(anyhow::Error::msg)?;
            self.accumulate(gradient);
            examples += batch.len() as u64;
            self.batches_since_pull += 1;
            let push_due =
                self.accumulated.as_ref().is_some_and(|(_, count)| *count >= self.push_every);
            let pull_due = self.batches_since_pull >= self.pull_every;
            self.exchange(push_due, pull_due).await?;
        }
        self.exchange(true, false).await?;
        tracing::debug!(examples, ms = started.elapsed().as_millis() as u64, "task trained");
        Ok(examples)
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

    /// Pushes the averaged accumulated gradient (if `push` and there is one) and pulls fresh
    /// parameters (if `pull`), both at once: one round trip instead of two. The pull may or
    /// may not see this push, as with any other trainer's (asynchronous SGD).
    async fn exchange(&mut self, push: bool, pull: bool) -> anyhow::Result<()> {
        let gradient = if push { self.averaged_gradient() } else { None };
        // A diverging model yields NaN or infinite gradients; the pservers would refuse them
        // (and count them), so they are dropped here with a warning instead of ending the task.
        let gradient = gradient.filter(|sum| {
            let finite = sum.values().flatten().all(|value| value.is_finite());
            if !finite {
                tracing::warn!("a gradient holds NaN or an infinity (the model diverges: lower --learning-rate?); not pushed");
                self.nonfinite_dropped += 1;
            }
            finite
        });
        let pushed = async {
            match &gradient {
                Some(sum) => self.pservers.push(&self.layout, &tensors(sum)).await,
                None => Ok(()),
            }
        };
        let pulled = async {
            if pull {
                self.pservers.pull_into(&self.layout, &mut self.params).await?;
            }
            Ok::<_, PServerClientError>(())
        };
        let (pushed, pulled) = tokio::join!(pushed, pulled);
        pulled?;
        if pull {
            self.batches_since_pull = 0;
        }
        push_outcome(pushed)
    }

    /// The accumulated gradient averaged over its batches; the accumulator starts over.
    fn averaged_gradient(&mut self) -> Option<Params> {
        let (mut sum, count) = self.accumulated.take()?;
        if count > 1 {
            let scale = 1.0 / count as f32;
            sum.values_mut().flatten().for_each(|value| *value *= scale);
        }
        Some(sum)
    }
}

/// A push whose outcome is unknown is logged and dropped (never sent twice).
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
        Err(error) => Err(error.into()),
    }
}
