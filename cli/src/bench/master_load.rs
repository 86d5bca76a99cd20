//! Load for `bench master`: trainer clients that fetch and finish tasks as fast as the master
//! group allows, and the probe that times a failover from the kill to the first GetTask.

use anyhow::Context as _;
use client::{ClientOptions, MasterClient, PassWalker, Session, Step, Waiting, Walked};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one client measured: RPCs that changed the queue, and each RPC's latency.
#[derive(Default)]
pub(crate) struct LoadReport {
    pub(crate) transitions: u64,
    pub(crate) latencies: Vec<Duration>,
}

/// A trainer of the benchmark: its own client (own id and stamps), registration and walk.
pub(crate) struct Trainer {
    walker: PassWalker<Arc<Session>>,
}

impl Trainer {
    pub(crate) async fn register(
        masters: &[String],
        options: ClientOptions,
        name: String,
    ) -> anyhow::Result<Self> {
        let client = Arc::new(MasterClient::new(masters, options)?);
        let session = Session::register(client, name).await?;
        Ok(Self { walker: PassWalker::new(session).with_idle(Duration::from_millis(1)) })
    }

    /// One GetTask, and TaskFinished for the task if one came; counts queue transitions.
    /// When the task came, if one did.
    pub(crate) async fn step(
        &mut self,
        report: &mut LoadReport,
    ) -> anyhow::Result<Option<Instant>> {
        let started = Instant::now();
        match self.walker.step().await? {
            Step::Walked(Walked::Task(task)) => {
                let came = Instant::now();
                report.latencies.push(came - started);
                let started = Instant::now();
                self.walker.source().master().task_finished(task.task_id, task.epoch).await?;
                report.latencies.push(started.elapsed());
                report.transitions += 2;
                return Ok(Some(came));
            }
            Step::Walked(Walked::PassOver { .. } | Walked::PassRewound { .. }) => {}
            Step::Wait { why: Waiting::HeldElsewhere, retry_in } => {
                tokio::time::sleep(retry_in).await
            }
            other => anyhow::bail!("unexpected step of the walk: {other:?}"),
        }
        Ok(None)
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

/// Steps `probe` until it walks a task: its pass is then the job's current one. A probe left
/// idle while the other trainers finished passes would spend its first GetTask after a
/// take-down learning that its pass is over (a round trip that measures the probe's idleness,
/// not the failover), as a trainer at work never does.
pub(crate) async fn catch_up(probe: &mut Trainer) -> anyhow::Result<()> {
    let mut report = LoadReport::default();
    for _ in 0..CATCH_UP_STEPS_MAX {
        if probe.step(&mut report).await?.is_some() {
            return Ok(());
        }
    }
    anyhow::bail!("the probe walked no task in {CATCH_UP_STEPS_MAX} steps")
}

/// Steps a probe may take to reach a task before a take-down (passes over, tasks held by
/// other trainers at a pass's end).
const CATCH_UP_STEPS_MAX: usize = 10_000;

/// Time until a GetTask succeeds again, from `killed_at`.
pub(crate) async fn time_to_first_task(
    probe: &mut Trainer,
    killed_at: Instant,
) -> anyhow::Result<Duration> {
    let mut report = LoadReport::default();
    loop {
        // Until the GetTask answered: the TaskFinished after it is not part of the failover.
        if let Some(came) = probe.step(&mut report).await? {
            return Ok(came - killed_at);
        }
    }
}
