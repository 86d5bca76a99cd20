//! The task-queue workload: logical trainers that register, heartbeat, take tasks and report
//! them finished or failed, or vanish with a task in hand, each call recorded. A trainer whose
//! call ends with an unknown outcome (`Info`) retires, Jepsen style: a new logical process
//! takes its place under a new id.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use client::{ClientError, ClientOptions, Fault, MasterClient, PassWalker, Step, Walked};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use tokio::sync::watch;

use super::recorded_tasks::RecordedTasks;
use crate::history::{History, OpKind, Operation, Value};

/// The longest a client call keeps retrying before its outcome is unknown.
const CALL_DEADLINE_MS: u64 = 4_000;
/// How long a trainer holds a task before reporting it.
const WORK_MS_MAX: u64 = 200;
/// One task in `SLOW_ONE_IN` is held this long instead: past the harness's 1.5 s task
/// timeout, so it is taken back and handed out again, and the late report must be refused.
const SLOW_WORK_MS: (u64, u64) = (2_000, 3_000);
const SLOW_ONE_IN: u32 = 12;
/// Between asks while nothing is free.
const IDLE_MS: u64 = 100;
/// Heartbeat period: a third of the harness's 2 s trainer lease.
const HEARTBEAT_MS: u64 = 600;

/// The shared parts of every logical trainer.
#[derive(Clone)]
pub struct TaskQueue {
    pub masters: Vec<String>,
    pub history: Arc<History>,
    pub next_process: Arc<AtomicU64>,
    pub stop: watch::Receiver<bool>,
}

impl TaskQueue {
    /// Runs `clients` trainers, each replaced by a new process when it retires, until stop.
    pub async fn run(self, clients: usize, seed: u64) {
        let mut tasks = tokio::task::JoinSet::new();
        for slot in 0..clients {
            let workload = self.clone();
            let rng = StdRng::seed_from_u64(seed.wrapping_add(slot as u64));
            tasks.spawn(workload.client_slot(rng));
        }
        while tasks.join_next().await.is_some() {}
    }

    async fn client_slot(self, mut rng: StdRng) {
        while !*self.stop.borrow() {
            let process = self.next_process.fetch_add(1, Ordering::SeqCst);
            if let Err(error) = self.trainer(process, &mut rng).await {
                tracing::debug!(process, %error, "a trainer retired");
            }
        }
    }

    fn client(&self) -> Result<MasterClient, ClientError> {
        let options = ClientOptions {
            call_deadline: Some(Duration::from_millis(CALL_DEADLINE_MS)),
            rpc_timeout: Duration::from_millis(500),
            ..ClientOptions::default()
        };
        MasterClient::new(&self.masters, options)
    }

    /// One logical trainer's life: register, then tasks until it retires or the run stops.
    async fn trainer(&self, process: u64, rng: &mut StdRng) -> anyhow::Result<()> {
        let client = Arc::new(self.client()?);
        let registered = self
            .history
            .call(process, Operation::Register, async {
                match client.register_trainer(&format!("jepsen-{process}")).await {
                    Ok(registration) => (
                        OpKind::Ok,
                        Value::Trainer { id: registration.trainer_id },
                        Some(registration.trainer_id),
                    ),
                    Err(error) => (kind_of(&error), error_value(&error), None),
                }
            })
            .await;
        let (OpKind::Ok, Some(trainer)) = registered else {
            anyhow::bail!("registration ended {:?}", registered.0)
        };
        let heartbeats = tokio::spawn(heartbeat(client.clone(), trainer));
        let outcome = self.work(process, &client, trainer, rng).await;
        heartbeats.abort();
        outcome
    }

    async fn work(
        &self,
        process: u64,
        client: &Arc<MasterClient>,
        trainer: u64,
        rng: &mut StdRng,
    ) -> anyhow::Result<()> {
        let history = self.history.clone();
        let tasks = RecordedTasks { history, process, client: client.clone(), trainer };
        let mut walker = PassWalker::new(tasks).with_idle(Duration::from_millis(IDLE_MS));
        while !*self.stop.borrow() {
            match walker.step().await? {
                Step::Walked(Walked::Task(task)) => {
                    tokio::time::sleep(work_time(rng)).await;
                    let roll: f64 = rng.gen();
                    if roll < 0.05 {
                        anyhow::bail!("vanished holding task {}", task.task_id);
                    }
                    self.report(process, client, trainer, (task.task_id, task.epoch), roll < 0.15)
                        .await?;
                }
                Step::Walked(Walked::PassOver { .. } | Walked::PassRewound { .. }) => {}
                Step::Walked(Walked::Finished) => anyhow::bail!("the job finished"),
                Step::Walked(Walked::Cancelled) => anyhow::bail!("the job was cancelled"),
                Step::Wait { retry_in, .. } => tokio::time::sleep(retry_in).await,
            }
        }
        Ok(())
    }

    async fn report(
        &self,
        process: u64,
        client: &MasterClient,
        trainer: u64,
        (task_id, epoch): (u64, u64),
        failed: bool,
    ) -> anyhow::Result<()> {
        let f = match failed {
            true => Operation::TaskFailed { trainer, task_id, epoch },
            false => Operation::TaskFinished { trainer, task_id, epoch },
        };
        let (kind, _) = self
            .history
            .call(process, f, async {
                let reply = match failed {
                    true => {
                        client
                            .task_failed(
                                task_id,
                                epoch,
                                "jepsen: a planned failure",
                                Fault::Content,
                            )
                            .await
                    }
                    false => client.task_finished(task_id, epoch).await,
                };
                match reply {
                    Ok(accepted) => (OpKind::Ok, Value::Accepted { accepted }, ()),
                    Err(error) => (kind_of(&error), error_value(&error), ()),
                }
            })
            .await;
        anyhow::ensure!(kind == OpKind::Ok, "the report ended {kind:?}");
        Ok(())
    }
}

/// How long to hold a task: usually a moment, sometimes past its timeout.
fn work_time(rng: &mut StdRng) -> Duration {
    let work_ms = match rng.gen_ratio(1, SLOW_ONE_IN) {
        true => rng.gen_range(SLOW_WORK_MS.0..=SLOW_WORK_MS.1),
        false => rng.gen_range(0..=WORK_MS_MAX),
    };
    Duration::from_millis(work_ms)
}

/// Heartbeats until aborted; a failed one is retried at the next period.
async fn heartbeat(client: Arc<MasterClient>, trainer: u64) {
    loop {
        tokio::time::sleep(Duration::from_millis(HEARTBEAT_MS)).await;
        let _ = client.heartbeat(trainer, 0).await;
    }
}

/// `Info` when the call may have taken effect (no answer came), `Fail` when a master refused.
pub fn kind_of(error: &ClientError) -> OpKind {
    match error {
        ClientError::Deadline { .. }
        | ClientError::Connection { .. }
        | ClientError::Malformed { .. } => OpKind::Info,
        ClientError::Rejected {
            code:
                tonic::Code::Unavailable
                | tonic::Code::DeadlineExceeded
                | tonic::Code::Cancelled
                | tonic::Code::Unknown
                | tonic::Code::Internal,
            ..
        } => OpKind::Info,
        _ => OpKind::Fail,
    }
}

pub fn error_value(error: &ClientError) -> Value {
    Value::Error { message: error.to_string() }
}
