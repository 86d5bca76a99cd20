//! `Progress`: what this trainer has done so far, kept in its metrics.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::metrics::TrainerMetrics;
use crate::model::Evaluation;
use crate::run::Summary;

#[derive(Debug, Default)]
pub struct Progress {
    pub metrics: Arc<TrainerMetrics>,
    pub last_eval: Option<Evaluation>,
    /// Time spent on tasks, from taking each to reporting it.
    training: Duration,
}

impl Progress {
    /// Adds the time one task took, from when it was handed out to when it was reported.
    pub fn task_time(&mut self, took: Duration) {
        self.training += took;
    }

    pub fn task_done(&self, examples: u64) {
        self.metrics.examples.fetch_add(examples, Ordering::Relaxed);
        self.metrics.tasks_done.fetch_add(1, Ordering::Relaxed);
    }

    pub fn task_failed(&self) {
        self.metrics.tasks_failed.fetch_add(1, Ordering::Relaxed);
    }

    pub fn pass(&self, pass: u32) {
        self.metrics.pass.store(u64::from(pass), Ordering::Relaxed);
    }

    pub fn evaluated(&mut self, evaluation: Evaluation) {
        self.metrics.record_eval(evaluation.loss, evaluation.accuracy().unwrap_or(0.0));
        self.last_eval = Some(evaluation);
    }

    pub fn summary(&self) -> Summary {
        let load = |value: &std::sync::atomic::AtomicU64| value.load(Ordering::Relaxed);
        Summary {
            tasks_done: load(&self.metrics.tasks_done),
            tasks_failed: load(&self.metrics.tasks_failed),
            examples: load(&self.metrics.examples),
            last_eval: self.last_eval,
            training: self.training,
        }
    }
}
