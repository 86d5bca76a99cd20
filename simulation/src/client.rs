//! A simulated trainer of one job, on the production `MasterClient` (leader discovery,
//! redirects, retries with backoff, exactly-once stamps) over the simulated network: in an
//! index job reports the dataset first (as each of the Python package's workers does),
//! registers, heartbeats, takes tasks, "works" for a seeded time (sometimes past the task's
//! deadline) between a pull of the model and a push of a gradient on the job's data plane
//! (`data_plane.rs`, when every slot is served), and reports them finished or failed until the
//! job is over. Every call names
//! its job in a run of several (`ClientOptions::job`) and lands in the history as invoke, then
//! ok or info (a failed call's outcome is unknown: a stamped write may still have happened);
//! what it is told about the dataset also lands there, for the dataset-answers checker, and
//! both are the job's.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use client::pserver::ModelBasis;
use client::{
    ClientError, ClientOptions, Fault, MasterClient, PassWalker, Step, Task, TrainerHeartbeat,
    Walked,
};

use crate::config::SimulationConfig;
use crate::data_plane::SimDataPlane;
use crate::dataset::SimDataset;
use crate::history::{AckedWrite, DatasetEvent, DatasetTold, Fact, History, OperationType};
use crate::job::SimJob;
use crate::master_link::master_addr;
use crate::network::SimNetwork;
use crate::rng::SimRng;
use crate::trace::Trace;
use crate::trainer_tasks::SimTasks;

/// Pause between polls when no task is available, and after a failed call.
const RETRY_MS: (u64, u64) = (20, 80);
/// Usual work time per task, and the slow case that outlives the task's deadline.
const WORK_MS: (u64, u64) = (20, 150);
const SLOW_WORK_MS: (u64, u64) = (350, 1_200);
const SLOW_WORK_PERCENT: u64 = 8;
const FAIL_PERCENT: u64 = 4;
/// Now and then a trainer stalls (no heartbeats either) for longer than its lease.
const STALL_PERCENT: u64 = 2;
/// Ids of the clients in the history start here.
pub const CLIENT_ID_BASE: u64 = 1_000;

/// What every client of a run shares, and the job a client works for.
#[derive(Clone)]
pub struct ClientContext {
    pub network: SimNetwork,
    pub history: History,
    pub trace: Trace,
    /// The client's job: its acknowledged facts and its events are that job's (empty for the
    /// submitter, whose reports name their jobs themselves).
    pub job: String,
    /// The job its calls name (`ClientOptions::job`): its job in a run of several; empty, the
    /// group's only job, in a run of one (as clients did before runs had two jobs).
    pub named_job: String,
}

impl ClientContext {
    /// The context of the submitter, which reports every job's dataset.
    pub fn new(network: SimNetwork, history: History, trace: Trace) -> Self {
        Self { network, history, trace, job: String::new(), named_job: String::new() }
    }

    /// The context of a client of `job`.
    pub fn in_job(&self, job: &SimJob, config: &SimulationConfig) -> Self {
        let named_job = if config.clients_name_jobs() { job.name.clone() } else { String::new() };
        Self { job: job.name.clone(), named_job, ..self.clone() }
    }

    /// A `MasterClient` of the run's masters over the simulated network, seeded by `seed`,
    /// naming the client's job.
    pub fn master_client(
        &self,
        config: &SimulationConfig,
        seed: u64,
    ) -> anyhow::Result<MasterClient> {
        let masters: Vec<String> = config.node_ids().into_iter().map(master_addr).collect();
        let options = ClientOptions {
            rpc_timeout: Duration::from_millis(config.client_rpc_timeout_ms),
            call_deadline: Some(Duration::from_millis(config.client_call_deadline_ms)),
            dialer: Some(self.network.dialer()),
            seed: Some(seed),
            job: self.named_job.clone(),
            ..ClientOptions::default()
        };
        Ok(MasterClient::new(&masters, options)?)
    }

    /// Records one call: invoke, then ok (with what it acknowledged) or info.
    pub async fn call<T>(
        &self,
        client: u64,
        seq: &mut u64,
        what: String,
        call: impl std::future::Future<Output = Result<T, ClientError>>,
        fact: impl FnOnce(&T) -> Option<Fact>,
    ) -> Result<T, ClientError> {
        let facts = |value: &T| fact(value).into_iter().collect();
        self.call_with_facts(client, seq, what, call, facts).await
    }

    /// Records one call that may acknowledge several facts (a hand-off: its finishes and the
    /// task it was handed).
    pub async fn call_with_facts<T>(
        &self,
        client: u64,
        seq: &mut u64,
        what: String,
        call: impl std::future::Future<Output = Result<T, ClientError>>,
        facts: impl FnOnce(&T) -> Vec<Fact>,
    ) -> Result<T, ClientError> {
        *seq += 1;
        self.history.record(client, *seq, OperationType::Invoke, what);
        match call.await {
            Ok(value) => {
                let acked = facts(&value);
                self.history.record(client, *seq, OperationType::Ok, format!("{acked:?}"));
                for fact in acked {
                    let (time_ms, job) = (self.trace.now_ms(), self.job.clone());
                    self.history.acked(AckedWrite { client, job, time_ms, fact });
                }
                Ok(value)
            }
            // A cancelled job's refusal is an answer: nothing was applied.
            Err(error @ ClientError::JobCancelled { .. }) => {
                self.history.record(client, *seq, OperationType::Fail, error.to_string());
                Err(error)
            }
            Err(error) => {
                self.history.record(client, *seq, OperationType::Info, error.to_string());
                Err(error)
            }
        }
    }
}

/// One trainer of one job.
pub struct SimTrainer {
    client: u64,
    /// Its calls so far (shared with its task calls: `trainer_tasks.rs`).
    calls: Arc<AtomicU64>,
    rng: SimRng,
    master: Arc<MasterClient>,
    context: ClientContext,
    lease_ms: u64,
    dataset: SimDataset,
    passes: u32,
    /// Its job's shuffle seed: every report of a job carries the same one.
    shuffle_seed: Option<u64>,
    plane: Arc<SimDataPlane>,
    /// The model restore its last whole pull came from, as `PServerClient` keeps it.
    basis: ModelBasis,
    /// Whether it reports finished tasks with its next ask (`SimulationConfig::hand_offs`),
    /// and the receipts of those not reported yet.
    hand_offs: bool,
    finished: Vec<(u64, u64)>,
}

impl SimTrainer {
    /// Trainer number `index` of the run, one of `job`'s, pushing on `plane`.
    pub fn new(
        index: u64,
        (job, plane): (&SimJob, &Arc<SimDataPlane>),
        config: &SimulationConfig,
        context: &ClientContext,
    ) -> anyhow::Result<Self> {
        let context = context.in_job(job, config);
        let rng = SimRng::derive(config.seed, 10 + index);
        let master = Arc::new(context.master_client(config, config.seed ^ (0x7a11 + index))?);
        let lease_ms = config.master.trainer_lease_ms;
        let (dataset, passes) = (job.dataset, job.passes);
        let client = CLIENT_ID_BASE + index;
        let (plane, basis) = (plane.clone(), ModelBasis::default());
        let calls = Arc::default();
        let shuffle_seed = job.shuffle_seed;
        Ok(Self {
            client,
            calls,
            rng,
            master,
            context,
            lease_ms,
            dataset,
            passes,
            shuffle_seed,
            plane,
            basis,
            hand_offs: config.hand_offs,
            finished: Vec::new(),
        })
    }

    /// Runs the trainer until the job is finished or cancelled.
    pub async fn run(mut self) {
        if let SimDataset::IndexRange { size, shard_size } = self.dataset {
            self.report_index_dataset(size, shard_size).await;
        }
        loop {
            let trainer = match self.register().await {
                Ok(trainer) => trainer,
                Err(ClientError::JobCancelled { .. }) => return,
                Err(_) => {
                    self.pause().await;
                    continue;
                }
            };
            let alive = Arc::new(AtomicBool::new(true));
            let done = Arc::new(AtomicU64::new(0));
            let beats = tokio::spawn(heartbeats(
                self.master.clone(),
                trainer,
                self.lease_ms / 4,
                alive.clone(),
                done.clone(),
            ));
            let finished = self.train(trainer, &alive, &done).await;
            beats.abort();
            if finished {
                return;
            }
        }
    }

    /// Reports the job's index dataset until a master answers (an answer or a refusal, which
    /// the checker judges; not reaching a leader is retried).
    async fn report_index_dataset(&mut self, size: u64, shard_size: u64) {
        loop {
            let master = self.master.clone();
            let job = &self.context.job;
            let (range, seed) = ((size, shard_size), self.shuffle_seed);
            let call = master.report_shuffled_index_dataset(job, range, self.passes, seed);
            let what = format!("report_index_dataset size {size} shard_size {shard_size}");
            let answer = match self.call(what, call, |_| None).await {
                Ok(sizes) => Ok(sizes.task_count),
                Err(error) if is_answer(&error) => Err(error.to_string()),
                Err(_) => {
                    self.pause().await;
                    continue;
                }
            };
            self.told(DatasetTold::Reported { answer });
            return;
        }
    }

    async fn register(&mut self) -> Result<u64, ClientError> {
        let name = format!("trainer-{}", self.client);
        let master = self.master.clone();
        let call = master.register_trainer(&name);
        let registration = self
            .call(format!("register {name}"), call, |reg| {
                Some(Fact::Registered { trainer: reg.trainer_id })
            })
            .await?;
        Ok(registration.trainer_id)
    }

    /// Takes and works tasks as `trainer`, walking the passes with the production walker;
    /// true once the job finished, false when the trainer must register again.
    async fn train(&mut self, trainer: u64, alive: &AtomicBool, done: &AtomicU64) -> bool {
        let (master, context, client) = (self.master.clone(), self.context.clone(), self.client);
        let calls = self.calls.clone();
        let mut walker = PassWalker::new(SimTasks { master, context, client, trainer, calls });
        loop {
            if !alive.load(Ordering::SeqCst) {
                return false;
            }
            match self.ask(&mut walker).await {
                Ok(Step::Walked(Walked::Task(task))) => {
                    self.told(DatasetTold::Handed {
                        task_id: task.task_id,
                        data: task.data.clone(),
                    });
                    self.work(&task, alive).await;
                    done.fetch_add(1, Ordering::SeqCst);
                }
                Ok(Step::Walked(Walked::PassOver { .. })) => {}
                Ok(Step::Walked(Walked::Finished | Walked::Cancelled)) => return true,
                Err(ClientError::UnknownTrainer { .. }) => return false,
                Ok(Step::Walked(Walked::PassRewound { .. }) | Step::Wait { .. }) | Err(_) => {
                    self.pause().await
                }
            }
        }
    }

    /// The next step of the walk: one ask, carrying the receipts of the tasks finished since
    /// the last one (hand-offs). A hand-off whose answer did not come may or may not have
    /// applied them: they are not sent again (a task not finished times out).
    async fn ask(&mut self, walker: &mut PassWalker<SimTasks>) -> Result<Step, ClientError> {
        if self.finished.is_empty() {
            return walker.step().await;
        }
        let finished = std::mem::take(&mut self.finished);
        walker.hand_off(&finished, &client::Together::Alone).await.map(|(_accepted, step)| step)
    }

    /// Records one call of this trainer's: invoke, then ok or info.
    async fn call<T>(
        &self,
        what: String,
        call: impl std::future::Future<Output = Result<T, ClientError>>,
        fact: impl FnOnce(&T) -> Option<Fact>,
    ) -> Result<T, ClientError> {
        let mut seq = self.calls.fetch_add(1, Ordering::Relaxed);
        self.context.call(self.client, &mut seq, what, call, fact).await
    }

    /// Remembers what the trainer was told about its job's dataset.
    fn told(&self, told: DatasetTold) {
        let (job, client) = (self.context.job.clone(), self.client);
        self.context.history.dataset_event(DatasetEvent { job, client, told });
    }

    async fn work(&mut self, task: &Task, alive: &AtomicBool) {
        let slow = self.rng.percent(SLOW_WORK_PERCENT);
        let (low, high) = if slow { SLOW_WORK_MS } else { WORK_MS };
        let pulled = self.plane.pull(&self.basis);
        tokio::time::sleep(Duration::from_millis(self.rng.range(low, high))).await;
        let (task_id, epoch) = (task.task_id, task.epoch);
        let master = self.master.clone();
        let failed = self.rng.percent(FAIL_PERCENT);
        if let (Some(pulled), false) = (&pulled, failed) {
            self.plane.push(pulled, &self.basis, self.client).await;
        }
        let fact =
            move |accepted: &bool| Some(Fact::Reported { task_id, epoch, accepted: *accepted });
        if self.hand_offs && !failed {
            self.finished.push((task_id, epoch));
            return self.maybe_stall(alive).await;
        }
        let reported = if failed {
            let call = master.task_failed(task_id, epoch, "simulated failure", Fault::Content);
            let what = format!("task_failed {task_id} epoch {epoch}");
            self.call(what, call, fact).await
        } else {
            let call = master.task_finished(task_id, epoch);
            let what = format!("task_finished {task_id} epoch {epoch}");
            self.call(what, call, fact).await
        };
        // Either way the trainer moves on: an unanswered report times the task out.
        if reported.is_err() {
            self.context
                .trace
                .record(format!("client {} leaves task {task_id} to time out", self.client));
        }
        self.maybe_stall(alive).await;
    }

    /// Now and then the trainer stalls past its lease after a task.
    async fn maybe_stall(&mut self, alive: &AtomicBool) {
        if self.rng.percent(STALL_PERCENT) {
            self.context.trace.record(format!("client {} stalls", self.client));
            alive.store(false, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(self.lease_ms * 2)).await;
        }
    }

    async fn pause(&mut self) {
        let pause_ms = self.rng.range(RETRY_MS.0, RETRY_MS.1);
        tokio::time::sleep(Duration::from_millis(pause_ms)).await;
    }
}

/// Whether `error` is a master's answer (a refusal, or an answer this client cannot read)
/// rather than a failure to reach a leader, which the caller retries.
fn is_answer(error: &ClientError) -> bool {
    matches!(
        error,
        ClientError::InvalidArgument { .. }
            | ClientError::Rejected { .. }
            | ClientError::Malformed { .. }
    )
}

/// Heartbeats every `interval_ms` while `alive`; a master that no longer knows the trainer
/// turns `alive` off (the trainer registers again).
async fn heartbeats(
    master: Arc<MasterClient>,
    trainer: u64,
    interval_ms: u64,
    alive: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
) {
    loop {
        tokio::time::sleep(Duration::from_millis(interval_ms)).await;
        if !alive.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(TrainerHeartbeat::Unknown | TrainerHeartbeat::JobEnded) =
            master.heartbeat(trainer, done.load(Ordering::SeqCst)).await
        {
            alive.store(false, Ordering::SeqCst);
            return;
        }
    }
}
