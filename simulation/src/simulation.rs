//! One simulated run: start the group and the trainers on a paused-clock current-thread
//! runtime, inject faults while checking every invariant after every step, then heal and
//! require the job to finish within a bounded simulated time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use consensus::Commands;
use master::state::{encode_request, Command, Request};
use tokio::task::JoinHandle;

use crate::checker::{Checkers, NodeView, Observation, Violation};
use crate::client::{ClientContext, SimClient};
use crate::cluster::Cluster;
use crate::config::SimulationConfig;
use crate::history::History;
use crate::leases::Leases;
use crate::nemesis::Nemesis;
use crate::network::SimNetwork;
use crate::rng::SimRng;
use crate::trace::Trace;

/// The leader checks for expired tasks and leases this often.
const DUTY_INTERVAL_MS: u64 = 100;
/// The leader's own write (`ExpireTasks`, `TrainerLost`) is given up after this long.
const DUTY_WRITE_TIMEOUT_MS: u64 = 1_000;

/// What a run found.
#[derive(Clone, Debug)]
pub struct SimulationReport {
    pub seed: u64,
    /// The hash of the event trace: equal for two runs of one seed.
    pub trace_hash: u64,
    pub event_count: u64,
    /// Simulated time the run took.
    pub simulated_ms: u64,
    /// The first violated invariant, if any.
    pub violation: Option<Violation>,
    /// The last events before the end, to read a failure.
    pub trace_tail: Vec<String>,
}

impl SimulationReport {
    /// The command that replays this run.
    pub fn replay_command(&self) -> String {
        format!("cargo run -p simulation --release -- --seed {}", self.seed)
    }
}

/// Runs one simulation on its own paused-clock runtime.
pub fn run(config: &SimulationConfig) -> anyhow::Result<SimulationReport> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build()?;
    runtime.block_on(drive(config))
}

/// Everything a run holds while it runs.
struct Run {
    config: SimulationConfig,
    trace: Trace,
    cluster: Cluster,
    history: History,
    clients: Vec<JoinHandle<()>>,
    checkers: Checkers,
    leases: Leases,
    duty_in_flight: Arc<AtomicBool>,
}

async fn drive(config: &SimulationConfig) -> anyhow::Result<SimulationReport> {
    let trace = Trace::new();
    let network = SimNetwork::new(SimRng::derive(config.seed, 2), trace.clone());
    let cluster = Cluster::start(config, network.clone(), trace.clone()).await?;
    let history = History::new(trace.clone());
    let leases = Leases::default();
    let context = ClientContext {
        network: network.clone(),
        history: history.clone(),
        leases: leases.clone(),
        trace: trace.clone(),
    };
    let clients = (0..config.client_count)
        .map(|index| {
            let client = SimClient::new(index, config, context.clone());
            tokio::spawn(client.run())
        })
        .collect();
    let mut run = Run {
        config: config.clone(),
        trace: trace.clone(),
        cluster,
        history,
        clients,
        checkers: Checkers::default(),
        leases,
        duty_in_flight: Arc::default(),
    };
    let violation = run.phases().await?.err();
    if let Some(violation) = &violation {
        trace.record(format!("violation {violation}"));
    }
    for client in &run.clients {
        client.abort();
    }
    Ok(SimulationReport {
        seed: config.seed,
        trace_hash: trace.hash(),
        event_count: trace.event_count(),
        simulated_ms: trace.now_ms(),
        violation,
        trace_tail: trace.tail(),
    })
}

impl Run {
    /// The fault phase, the heal, and the liveness phase. The outer error is a harness
    /// failure; the inner one is a violation found in the system.
    async fn phases(&mut self) -> anyhow::Result<Result<(), Violation>> {
        let mut nemesis = Nemesis::new(SimRng::derive(self.config.seed, 3), self.trace.clone());
        let step_ms = self.config.step_ms.max(1);
        let mut elapsed_ms = 0;
        while elapsed_ms < self.config.fault_phase_ms {
            tokio::time::sleep(Duration::from_millis(step_ms)).await;
            elapsed_ms += step_ms;
            if elapsed_ms.is_multiple_of(self.config.fault_interval_ms.max(1)) {
                nemesis.act(&mut self.cluster).await?;
            }
            if let Err(violation) = self.step(elapsed_ms) {
                return Ok(Err(violation));
            }
        }
        self.trace.record("faults heal");
        self.cluster.network().heal();
        for id in self.cluster.crashed() {
            self.cluster.start_node(id).await?;
        }
        let deadline_ms = elapsed_ms + self.config.liveness_ms_max;
        while elapsed_ms < deadline_ms {
            tokio::time::sleep(Duration::from_millis(step_ms)).await;
            elapsed_ms += step_ms;
            if let Err(violation) = self.step(elapsed_ms) {
                return Ok(Err(violation));
            }
            if self.finished() {
                self.trace.record("job finished");
                return Ok(Ok(()));
            }
        }
        Ok(Err(self.liveness_violation()))
    }

    /// The leader's duty, then every checker.
    fn step(&mut self, elapsed_ms: u64) -> Result<(), Violation> {
        if elapsed_ms.is_multiple_of(DUTY_INTERVAL_MS) {
            self.propose_duty();
        }
        let observation = self.observe();
        self.checkers.check(&observation)
    }

    fn observe(&self) -> Observation {
        let mut applied = Vec::new();
        for state_machine in self.cluster.retired() {
            applied.extend(state_machine.take_applied().into_iter().map(|entry| (0, entry)));
        }
        let mut nodes = Vec::new();
        for node in self.cluster.running() {
            for entry in node.state_machine.take_applied() {
                let (id, log_id, hash) = (node.id, entry.log_id, entry.payload_hash);
                self.trace.record(format!("node {id} applied {log_id} hash {hash:016x}"));
                applied.push((node.id, entry));
            }
            nodes.push(NodeView {
                id: node.id,
                incarnation: node.incarnation,
                metrics: node.metrics(),
                core_running: node.core_running(),
                log: node.disk.summary(),
                durable_vote: node.disk.durable_vote(),
                state: node.state_machine.master_state(),
            });
        }
        Observation { nodes, applied, acked: self.history.take_acked() }
    }

    /// As the real leader does: propose `ExpireTasks` only when its applied state has an
    /// expired deadline, else `TrainerLost` for a registered trainer whose lease ran out; one
    /// proposal at a time.
    fn propose_duty(&self) {
        let Some(leader) = self.cluster.leader() else { return };
        let now_ms = self.trace.now_ms();
        let state = leader.state_machine.master_state();
        let command = if state.has_expired(now_ms) {
            Command::ExpireTasks
        } else {
            let registered: Vec<u64> = state.trainers().iter().map(|view| view.trainer).collect();
            match self.leases.expired(&registered, now_ms) {
                Some(trainer) => Command::TrainerLost { trainer },
                None => return,
            }
        };
        if self.duty_in_flight.swap(true, Ordering::SeqCst) {
            return;
        }
        let (in_flight, trace, id) = (self.duty_in_flight.clone(), self.trace.clone(), leader.id);
        trace.record(format!("node {id} proposes {command:?}"));
        let request = encode_request(&Request { client: None, now_ms, term: None, command });
        tokio::spawn(async move {
            let write = leader.raft.client_write(Commands(vec![request]));
            let result =
                tokio::time::timeout(Duration::from_millis(DUTY_WRITE_TIMEOUT_MS), write).await;
            let outcome = match result {
                Ok(Ok(reply)) => format!("committed at {}", reply.log_id),
                Ok(Err(error)) => format!("failed: {error}"),
                Err(_elapsed) => "timed out".to_string(),
            };
            trace.record(format!("node {id} duty {outcome}"));
            in_flight.store(false, Ordering::SeqCst);
        });
    }

    /// Every trainer saw `JobFinished`, and so does the leader's state.
    fn finished(&self) -> bool {
        let clients_done = self.clients.iter().all(JoinHandle::is_finished);
        let leader_done = self
            .cluster
            .leader()
            .is_some_and(|leader| leader.state_machine.master_state().job_finished());
        clients_done && leader_done
    }

    fn liveness_violation(&self) -> Violation {
        let leader = self.cluster.leader().map(|leader| leader.id);
        let unfinished = self.clients.iter().filter(|client| !client.is_finished()).count();
        let status = self.cluster.leader().map(|leader| {
            let status = leader.state_machine.master_state().status();
            format!(
                "pass {} todo {} pending {} done {} failed {}",
                status.pass,
                status.todo_count,
                status.pending_count,
                status.done_count,
                status.failed_count
            )
        });
        Violation::new(
            "liveness",
            format!(
                "{} ms after the faults healed: leader {leader:?}, {unfinished} trainers unfinished, {status:?}",
                self.config.liveness_ms_max
            ),
        )
    }
}
