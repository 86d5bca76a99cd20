//! Load for `bench master`: trainer clients that fetch and finish tasks as fast as the master
//! group allows, and the probe that times a failover from the kill to the first GetTask.

use anyhow::Context as _;
use master::client::{ClientOptions, MasterClient};
use proto::master::get_task_reply::Outcome;
use proto::master::{GetTaskRequest, RegisterTrainerRequest, TaskFinishedRequest};
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
        let reply = client
            .write("RegisterTrainer", |mut service, stamp| {
                let request = RegisterTrainerRequest { stamp: Some(stamp), name: name.clone() };
                async move { service.register_trainer(request).await }
            })
            .await?;
        Ok(Self { client, id: reply.trainer_id, pass: 0 })
    }

    /// One GetTask, and TaskFinished for the task if one came; counts queue transitions.
    pub(crate) async fn step(&mut self, report: &mut LoadReport) -> anyhow::Result<Outcome> {
        let started = Instant::now();
        let (id, pass) = (self.id, self.pass);
        let reply = self
            .client
            .write("GetTask", |mut service, stamp| async move {
                service.get_task(GetTaskRequest { stamp: Some(stamp), trainer_id: id, pass }).await
            })
            .await?;
        let outcome = Outcome::try_from(reply.outcome).context("unknown GetTask outcome")?;
        match (outcome, reply.task) {
            (Outcome::Task, Some(task)) => {
                report.latencies.push(started.elapsed());
                let started = Instant::now();
                let (task_id, epoch) = (task.task_id, task.epoch);
                self.client
                    .write("TaskFinished", |mut service, stamp| async move {
                        let request = TaskFinishedRequest { stamp: Some(stamp), task_id, epoch };
                        service.task_finished(request).await
                    })
                    .await?;
                report.latencies.push(started.elapsed());
                report.transitions += 2;
            }
            (Outcome::PassBefore | Outcome::PassAfter, _) => self.pass = reply.current_pass,
            (Outcome::NoMoreAvailable, _) => tokio::time::sleep(Duration::from_millis(1)).await,
            (outcome, _) => anyhow::bail!("unexpected GetTask outcome {outcome:?}"),
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
            Outcome::Task => return Ok(killed_at.elapsed()),
            _ => continue,
        }
    }
}
