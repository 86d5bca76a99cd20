//! The simulated master group: each node's disk, its running incarnation (openraft + the
//! simulated log store + the master state machine), crashes and restarts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use consensus::{Metrics, Raft, RpcHandler};
use openraft::error::{InitializeError, RaftError};
use openraft::{BasicNode, Config, ServerState, SnapshotPolicy};

use crate::config::SimulationConfig;
use crate::disk::SimDisk;
use crate::log_store::SimLogStore;
use crate::machine::{FenceBreakingState, MasterMachine};
use crate::network::SimNetwork;
use crate::rng::SimRng;
use crate::state_machine_store::SimStateMachine;
use crate::trace::Trace;

/// Heartbeats every this many simulated milliseconds.
const HEARTBEAT_MS: u64 = 50;
/// Election timeouts are drawn per incarnation in this range: distinct timeouts break ties
/// without openraft's own (unseeded) random draw.
const ELECTION_TIMEOUT_MS: (u64, u64) = (150, 300);

/// One running process of a node.
#[derive(Clone)]
pub struct RunningNode {
    pub id: u64,
    pub incarnation: u64,
    pub raft: Raft,
    pub state_machine: SimStateMachine,
    pub disk: SimDisk,
}

impl RunningNode {
    /// The node's latest published metrics.
    pub fn metrics(&self) -> Metrics {
        self.raft.metrics().borrow().clone()
    }

    /// Whether openraft's core still runs. A fatal stop shows in `running_state`; a panic
    /// inside the core only drops the metrics sender, leaving the last value as it was.
    pub fn core_running(&self) -> bool {
        let metrics = self.raft.metrics();
        metrics.has_changed().is_ok() && metrics.borrow().running_state.is_ok()
    }

    /// Whether the node believes it leads.
    pub fn is_leader(&self) -> bool {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        metrics.state == ServerState::Leader
    }
}

/// The whole group.
pub struct Cluster {
    config: SimulationConfig,
    network: SimNetwork,
    trace: Trace,
    rng: SimRng,
    disks: BTreeMap<u64, SimDisk>,
    incarnations: BTreeMap<u64, u64>,
    running: BTreeMap<u64, RunningNode>,
    /// State machines of crashed incarnations whose last applies the checkers still read.
    retired: Vec<SimStateMachine>,
}

impl Cluster {
    /// Starts every node and bootstraps the group from the lowest id.
    pub async fn start(
        config: &SimulationConfig,
        network: SimNetwork,
        trace: Trace,
    ) -> anyhow::Result<Self> {
        let mut cluster = Self {
            config: config.clone(),
            network,
            trace,
            rng: SimRng::derive(config.seed, 1),
            disks: config.node_ids().into_iter().map(|id| (id, SimDisk::default())).collect(),
            incarnations: BTreeMap::new(),
            running: BTreeMap::new(),
            retired: Vec::new(),
        };
        for id in config.node_ids() {
            cluster.start_node(id).await?;
        }
        Ok(cluster)
    }

    fn raft_config(&mut self) -> anyhow::Result<Config> {
        let election_timeout_min = self.rng.range(ELECTION_TIMEOUT_MS.0, ELECTION_TIMEOUT_MS.1);
        let config = Config {
            cluster_name: "simulation".to_string(),
            heartbeat_interval: HEARTBEAT_MS,
            election_timeout_min,
            // One value wide: openraft's own draw from the thread RNG is then a constant.
            election_timeout_max: election_timeout_min + 1,
            snapshot_policy: SnapshotPolicy::Never,
            ..Config::default()
        };
        Ok(config.validate()?)
    }

    /// Starts a new incarnation of node `id` on its disk.
    pub async fn start_node(&mut self, id: u64) -> anyhow::Result<()> {
        let incarnation = self.incarnations.get(&id).map_or(0, |last| last + 1);
        self.incarnations.insert(id, incarnation);
        let disk = self.disks.get(&id).cloned().ok_or_else(|| anyhow::anyhow!("no node {id}"))?;
        let seed = self.config.seed;
        let disk_rng = SimRng::derive(seed, 100 + id * 1000 + incarnation);
        let bugs = self.config.bugs;
        let store = SimLogStore::open(
            disk.clone(),
            disk_rng,
            self.config.flush_delay_ms,
            bugs.ack_before_durable,
        )
        .with_node_id(id);
        let machine: Box<dyn MasterMachine> = if bugs.accept_stale_epoch {
            Box::new(FenceBreakingState::default())
        } else {
            Box::new(master::ReplicatedState::default())
        };
        let state_machine = SimStateMachine::new(machine);
        let raft_config = Arc::new(self.raft_config()?);
        let timeout_ms = raft_config.election_timeout_min;
        let lease = Duration::from_millis(raft_config.election_timeout_max);
        let factory = self.network.factory(id, incarnation);
        let raft = Raft::new(id, raft_config, factory, store, state_machine.clone()).await?;
        self.network.register(id, incarnation, RpcHandler::new(raft.clone(), lease));
        self.trace
            .record(format!("node {id} started incarnation {incarnation} timeout {timeout_ms}"));
        if Some(id) == self.config.node_ids().first().copied() {
            self.initialize(&raft).await?;
        }
        let node = RunningNode { id, incarnation, raft, state_machine, disk };
        self.running.insert(id, node);
        Ok(())
    }

    /// Static bootstrap as `consensus` does it: the lowest id initializes on every start, and
    /// a node whose log is not empty refuses, which is success.
    async fn initialize(&self, raft: &Raft) -> anyhow::Result<()> {
        let members: BTreeMap<u64, BasicNode> = self
            .config
            .node_ids()
            .into_iter()
            .map(|id| (id, BasicNode::new(format!("node-{id}"))))
            .collect();
        match raft.initialize(members).await {
            Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(error) => Err(anyhow::anyhow!("initialize: {error}")),
        }
    }

    /// Kills node `id` harder than kill -9: its unflushed writes are lost.
    pub fn crash(&mut self, id: u64) {
        let Some(node) = self.running.remove(&id) else { return };
        self.network.remove(id);
        let lost = node.disk.crash();
        self.trace.record(format!("node {id} crashed, {lost} unflushed writes lost"));
        self.retired.push(node.state_machine.clone());
        let raft = node.raft;
        // The old process stops on its own (its disk refuses it); shutting it down only frees
        // its tasks sooner.
        tokio::spawn(async move { drop(raft.shutdown().await) });
    }

    /// Running nodes, by id.
    pub fn running(&self) -> Vec<RunningNode> {
        self.running.values().cloned().collect()
    }

    /// Ids of nodes that are down.
    pub fn crashed(&self) -> Vec<u64> {
        let ids = self.config.node_ids();
        ids.into_iter().filter(|id| !self.running.contains_key(id)).collect()
    }

    /// State machines of crashed incarnations.
    pub fn retired(&self) -> &[SimStateMachine] {
        &self.retired
    }

    /// The running node that leads with the highest term, if any.
    pub fn leader(&self) -> Option<RunningNode> {
        let leaders = self.running.values().filter(|node| node.is_leader());
        leaders.max_by_key(|node| node.metrics().current_term).cloned()
    }

    /// The network, for the fault injector.
    pub fn network(&self) -> &SimNetwork {
        &self.network
    }
}
