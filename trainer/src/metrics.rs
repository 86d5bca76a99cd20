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

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let load = |value: &AtomicU64| value.load(Ordering::Relaxed);
        let rows = [
            (
                "raftrain_trainer_examples_total",
                "counter",
                "Examples trained on.",
                load(&self.examples) as f64,
            ),
            (
                "raftrain_trainer_tasks_done_total",
                "counter",
                "Tasks trained and reported finished.",
                load(&self.tasks_done) as f64,
            ),
            (
                "raftrain_trainer_tasks_failed_total",
                "counter",
                "Tasks reported failed for bad data.",
                load(&self.tasks_failed) as f64,
            ),
            (
                "raftrain_trainer_pass",
                "gauge",
                "The pass this trainer works on.",
                load(&self.pass) as f64,
            ),
            (
                "raftrain_trainer_eval_loss",
                "gauge",
                "The latest evaluation's loss.",
                f64::from_bits(load(&self.eval_loss_bits)),
            ),
            (
                "raftrain_trainer_eval_accuracy",
                "gauge",
                "The latest evaluation's accuracy.",
                f64::from_bits(load(&self.eval_accuracy_bits)),
            ),
        ];
        let mut text = String::new();
        for (name, kind, help, value) in rows {
            text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"));
        }
        text
    }
}
