//! The trainer's Prometheus metrics, updated by the task loop.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Counters and gauges of one trainer.
#[derive(Debug, Default)]
pub struct TrainerMetrics {
    pub examples: AtomicU64,
    pub tasks_done: AtomicU64,
    pub tasks_failed: AtomicU64,
    pub pass: AtomicU64,
    /// The last evaluation's loss and accuracy, as f64 bits.
    pub eval_loss_bits: AtomicU64,
    pub eval_accuracy_bits: AtomicU64,
    /// Set once the trainer has joined its job and trains (what `/readyz` reports).
    pub training: AtomicBool,
}

impl TrainerMetrics {
    pub fn record_eval(&self, loss: f64, accuracy: f64) {
        self.eval_loss_bits.store(loss.to_bits(), Ordering::Relaxed);
        self.eval_accuracy_bits.store(accuracy.to_bits(), Ordering::Relaxed);
    }

    /// The Prometheus text: the gauges set from this trainer's counters, then everything
    /// recorded (`raftrain_trainer_task_seconds` comes from the task loop).
    pub fn render(&self) -> String {
        let load = |value: &AtomicU64| value.load(Ordering::Relaxed);
        metrics::counter!("raftrain_trainer_examples_total").absolute(load(&self.examples));
        metrics::counter!("raftrain_trainer_tasks_done_total").absolute(load(&self.tasks_done));
        metrics::counter!("raftrain_trainer_tasks_failed_total").absolute(load(&self.tasks_failed));
        metrics::gauge!("raftrain_trainer_pass").set(load(&self.pass) as f64);
        metrics::gauge!("raftrain_trainer_eval_loss")
            .set(f64::from_bits(load(&self.eval_loss_bits)));
        metrics::gauge!("raftrain_trainer_eval_accuracy")
            .set(f64::from_bits(load(&self.eval_accuracy_bits)));
        consensus::telemetry::render()
    }
}
