//! A simulated trainer: registers, reports the dataset, then takes tasks, "works" for a seeded
//! time (sometimes past the task's deadline), and reports them finished or failed, until the
//! job is over. Every write goes through `Raft::client_write` on whichever node it believes
//! leads, stamped for exactly-once retries, and lands in the history.

use std::time::Duration;

use consensus::{Commands, Raft};
use master::state::{
    decode_response, encode_request, ChunkRef, ClientStamp, Command, QueuePolicy, Request, Response,
};
use openraft::error::{ClientWriteError, RaftError};

use crate::config::SimulationConfig;
use crate::history::{AckedWrite, History, OperationType};
use crate::leases::Leases;
use crate::network::SimNetwork;
use crate::rng::SimRng;
use crate::trace::Trace;

/// A write attempt that has not answered in this long is given up (outcome unknown).
const WRITE_TIMEOUT_MS: u64 = 1_000;
/// Pause before retrying a write, and between polls when no task is available.
const RETRY_MS: (u64, u64) = (20, 80);
/// Usual work time per task, and the slow case that outlives the task's deadline.
const WORK_MS: (u64, u64) = (20, 150);
const SLOW_WORK_MS: (u64, u64) = (350, 1_200);
const SLOW_WORK_PERCENT: u64 = 8;
const FAIL_PERCENT: u64 = 4;
/// Now and then a trainer stalls after a task for longer than its lease, and is declared lost.
const STALL_MS: u64 = 2_500;
const STALL_PERCENT: u64 = 2;
/// Ids of the clients' sessions start here, apart from trainer ids.
const CLIENT_ID_BASE: u64 = 1_000;

/// The queue policy every run uses: tasks time out after 300 ms unless they usually take long.
pub const POLICY: QueuePolicy = QueuePolicy {
    chunks_per_task: 1,
    task_timeout_min_ms: 300,
    timeout_factor: 2,
    max_task_failures: 3,
    retry_failed_next_pass: true,
};

/// What every trainer of a run shares.
#[derive(Clone)]
pub struct ClientContext {
    pub network: SimNetwork,
    pub history: History,
    pub leases: Leases,
    pub trace: Trace,
}

/// One trainer.
pub struct SimClient {
    client: u64,
    seq: u64,
    trainer: Option<u64>,
    rng: SimRng,
    network: SimNetwork,
    history: History,
    leases: Leases,
    trace: Trace,
    config: SimulationConfig,
}

impl SimClient {
    /// Trainer number `index` of the run.
    pub fn new(index: u64, config: &SimulationConfig, context: ClientContext) -> Self {
        let rng = SimRng::derive(config.seed, 10 + index);
        let client = CLIENT_ID_BASE + index;
        let ClientContext { network, history, leases, trace } = context;
        let config = config.clone();
        Self { client, seq: 0, trainer: None, rng, network, history, leases, trace, config }
    }

    /// Runs the trainer until the job is finished.
    pub async fn run(mut self) {
        let mut pass = 0;
        loop {
            let Some(trainer) = self.trainer else {
                let name = format!("trainer-{}", self.client);
                if let Response::TrainerRegistered { trainer } =
                    self.write(Command::RegisterTrainer { name }).await
                {
                    self.trainer = Some(trainer);
                }
                continue;
            };
            match self.write(Command::GetTask { trainer, pass }).await {
                Response::Task(task) => self.work(task.task, task.epoch).await,
                Response::PassBefore { current } => pass = current,
                Response::PassAfter { current } => {
                    pass = current;
                    self.pause().await;
                }
                Response::NoDataset => {
                    self.write(self.dataset()).await;
                }
                Response::UnknownTrainer => self.trainer = None,
                Response::JobFinished => return,
                _ => self.pause().await,
            }
        }
    }

    fn dataset(&self) -> Command {
        let chunk = |index: u64| ChunkRef {
            path: "simulated.recordio".to_string(),
            offset: index * 100,
            compressed_size: 100,
            record_count: 10,
        };
        let chunks = (0..self.config.task_count).map(chunk).collect();
        Command::ReportDataset {
            job: "simulated".to_string(),
            chunks,
            passes: self.config.passes,
            policy: POLICY,
        }
    }

    async fn work(&mut self, task: u64, epoch: u64) {
        let slow = self.rng.percent(SLOW_WORK_PERCENT);
        let (low, high) = if slow { SLOW_WORK_MS } else { WORK_MS };
        let work_ms = self.rng.range(low, high);
        tokio::time::sleep(Duration::from_millis(work_ms)).await;
        let command = if self.rng.percent(FAIL_PERCENT) {
            Command::TaskFailed { task, epoch, reason: "simulated failure".to_string() }
        } else {
            Command::TaskFinished { task, epoch }
        };
        self.write(command).await;
        if self.rng.percent(STALL_PERCENT) {
            self.trace.record(format!("client {} stalls", self.client));
            tokio::time::sleep(Duration::from_millis(STALL_MS)).await;
        }
    }

    async fn pause(&mut self) {
        let pause_ms = self.rng.range(RETRY_MS.0, RETRY_MS.1);
        tokio::time::sleep(Duration::from_millis(pause_ms)).await;
    }

    /// Writes `command` until some attempt is answered; every attempt uses the same stamp.
    async fn write(&mut self, command: Command) -> Response {
        self.seq += 1;
        let stamp = ClientStamp { client_id: self.client, seq: self.seq };
        loop {
            if let Some(response) = self.attempt(stamp, &command).await {
                return response;
            }
            self.pause().await;
        }
    }

    /// The node to write to: the leader as a random running node knows it, else that node.
    fn pick_node(&mut self) -> Option<Raft> {
        let nodes = self.network.running_nodes();
        if nodes.is_empty() {
            return None;
        }
        let (_, asked) = &nodes[self.rng.index(nodes.len())];
        let leader = asked.metrics().borrow().current_leader;
        let target =
            nodes.iter().find(|(id, _)| Some(*id) == leader).map_or(asked, |(_, raft)| raft);
        Some(target.clone())
    }

    async fn attempt(&mut self, stamp: ClientStamp, command: &Command) -> Option<Response> {
        let (client, seq) = (stamp.client_id, stamp.seq);
        let now_ms = self.trace.now_ms();
        let request = encode_request(&Request {
            client: Some(stamp),
            now_ms,
            term: None,
            command: command.clone(),
        });
        self.history.record(client, seq, OperationType::Invoke, format!("{command:?}"));
        let Some(raft) = self.pick_node() else {
            self.history.record(client, seq, OperationType::Fail, "no node running".to_string());
            return None;
        };
        let write = raft.client_write(Commands(vec![request.clone()]));
        let result = tokio::time::timeout(Duration::from_millis(WRITE_TIMEOUT_MS), write).await;
        let reply = match result {
            Ok(Ok(reply)) => reply,
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => {
                self.history.record(client, seq, OperationType::Fail, "not leader".to_string());
                return None;
            }
            Ok(Err(error)) => {
                self.history.record(client, seq, OperationType::Info, format!("{error}"));
                return None;
            }
            Err(_elapsed) => {
                self.history.record(client, seq, OperationType::Info, "timed out".to_string());
                return None;
            }
        };
        let bytes = reply.data.0.into_iter().next().unwrap_or_default();
        let response = match decode_response(&bytes) {
            Ok(response) => response,
            Err(error) => Response::Rejected { reason: format!("undecodable response: {error}") },
        };
        self.history.record(
            client,
            seq,
            OperationType::Ok,
            format!("{} {response:?}", reply.log_id),
        );
        self.history.acked(AckedWrite { client, log_id: reply.log_id, request, response: bytes });
        if let Some(trainer) = self.trainer {
            self.leases.heard(trainer, self.trace.now_ms());
        }
        Some(response)
    }
}
