//! The trainer's Prometheus metrics, updated by the task loop, and its readiness.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use client::pserver::PServerClient;
use client::MasterClient;

/// Counters and gauges of one trainer.
#[derive(Debug, Default)]
pub struct TrainerMetrics {
    pub examples: AtomicU64,
    /// Shared with the trainer's `Session`, whose heartbeats report it.
    pub tasks_done: std::sync::Arc<AtomicU64>,
    pub tasks_failed: AtomicU64,
    pub pass: AtomicU64,
    /// The last evaluation's loss and accuracy, as f64 bits.
    pub eval_loss_bits: AtomicU64,
    pub eval_accuracy_bits: AtomicU64,
    /// Set once the trainer has joined its job and trains (what `/readyz` reports).
    pub training: AtomicBool,
    /// The job's pservers as this trainer reaches them, once it has joined: `/readyz` answers
    /// 503 while one of its slots is waited for.
    pub pservers: OnceLock<PServerClient>,
}

impl TrainerMetrics {
    pub fn record_eval(&self, loss: f64, accuracy: f64) {
        self.eval_loss_bits.store(loss.to_bits(), Ordering::Relaxed);
        self.eval_accuracy_bits.store(accuracy.to_bits(), Ordering::Relaxed);
    }

    /// `/readyz`: ready while training, not while it waits for a master leader or for a
    /// pserver slot to be served (or has not joined its job yet).
    pub fn readiness(&self, master: &MasterClient) -> Result<(), String> {
        if master.waiting_for_leader() {
            return Err("waiting for a master leader to answer".to_string());
        }
        if self.pservers.get().is_some_and(PServerClient::waiting_for_slot) {
            return Err("waiting for a pserver slot to be served".to_string());
        }
        match self.training.load(Ordering::Relaxed) {
            true => Ok(()),
            false => {
                Err("not training yet (waiting for pservers or the first initializer)".to_string())
            }
        }
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
        platform::telemetry::render()
    }
}

/// The HELP lines of the trainer's metrics (`raftrain_trainer_*`), for
/// `platform::telemetry::install`.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!("raftrain_trainer_examples_total", "Examples trained on.");
    describe_counter!("raftrain_trainer_tasks_done_total", "Tasks trained and reported finished.");
    describe_counter!("raftrain_trainer_tasks_failed_total", "Tasks reported failed for bad data.");
    describe_gauge!("raftrain_trainer_pass", "The pass this trainer works on.");
    describe_gauge!("raftrain_trainer_eval_loss", "The latest evaluation's loss.");
    describe_gauge!("raftrain_trainer_eval_accuracy", "The latest evaluation's accuracy.");
    describe_histogram!(
        "raftrain_trainer_task_seconds",
        Unit::Seconds,
        "From taking a task to reporting it."
    );
}
