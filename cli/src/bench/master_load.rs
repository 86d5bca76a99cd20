//! Load for `bench master`: trainer clients that fetch and finish tasks as fast as the master
//! group allows, and the probe that times a failover from the kill to the first GetTask.

use anyhow::Context as _;
use client::{ClientOptions, MasterClient, TaskOutcome};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one client measured: RPCs that changed the queue, and each RPC's latency.
#[derive(Default)]
pub(crate) struct LoadReport {
    pub(crate) transitions: u64,
    pub(crate) latencies: Vec<Duration>,
}

/// A trainer of the benchmark: its own client (own id and stamps) and trainer id.
pub(crate) struct Trainer {
    client: MasterClient,
    id: u64,
    pass: u32,
}

impl Trainer {
    pub(crate) async fn register(
        masters: &[String],
        options: ClientOptions,
        name: String,
    ) -> anyhow::Result<Self> {
        let client = MasterClient::new(masters, options)?;
        let registration = client.register_trainer(&name).await?;
        Ok(Self { client, id: registration.trainer_id, pass: 0 })
    }

    /// One GetTask, and TaskFinished for the task if one came; counts queue transitions.
    pub(crate) async fn step(&mut self, report: &mut LoadReport) -> anyhow::Result<TaskOutcome> {
        let started = Instant::now();
        let outcome = self.client.get_task(self.id, self.pass).await?;
        match &outcome {
            TaskOutcome::Task(task) => {
                report.latencies.push(started.elapsed());
                let started = Instant::now();
                self.client.task_finished(task.id, task.epoch).await?;
                report.latencies.push(started.elapsed());
                report.transitions += 2;
            }
            TaskOutcome::PassBefore { current } | TaskOutcome::PassAfter { current } => {
                self.pass = *current;
            }
            TaskOutcome::NoMoreAvailable => tokio::time::sleep(Duration::from_millis(1)).await,
            other => anyhow::bail!("unexpected GetTask outcome {other:?}"),
        }
        Ok(outcome)
    }
}

/// Runs `clients` trainers for `duration` and merges what they measured.
pub(crate) async fn drive(
    masters: &[String],
    clients: usize,
    duration: Duration,
) -> anyhow::Result<LoadReport> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for index in 0..clients {
        let (masters, stop) = (masters.to_vec(), stop.clone());
        handles.push(tokio::spawn(async move { run_trainer(masters, index, stop).await }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut merged = LoadReport::default();
    for handle in handles {
        let report = handle.await.context("a load client panicked")??;
        merged.transitions += report.transitions;
        merged.latencies.extend(report.latencies);
    }
    Ok(merged)
}

/// One trainer's loop until `stop`.
pub(crate) async fn run_trainer(
    masters: Vec<String>,
    index: usize,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<LoadReport> {
    let mut trainer =
        Trainer::register(&masters, ClientOptions::default(), format!("bench-{index}")).await?;
    let mut report = LoadReport::default();
    while !stop.load(Ordering::Relaxed) {
        trainer.step(&mut report).await?;
    }
    Ok(report)
}

/// Time until a GetTask succeeds again, from `killed_at`.
pub(crate) async fn time_to_first_task(
    probe: &mut Trainer,
    killed_at: Instant,
) -> anyhow::Result<Duration> {
    let mut report = LoadReport::default();
    loop {
        match probe.step(&mut report).await? {
            TaskOutcome::Task(_) => return Ok(killed_at.elapsed()),
            _ => continue,
        }
    }
}
