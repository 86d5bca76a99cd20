//! The simulated master group: each node's disk and clock, and its running incarnation, which
//! is production code end to end: a `ConsensusNode` (batcher, pace, leadership cache, RPC
//! handler) over the simulated log store, snapshots and network, and a `master::Replica` (the
//! master service and the leader's duties) on it. Crashes, restarts and pauses; and, for
//! membership changes, nodes that join the running group (new ids, or an id whose disk was
//! wiped after its removal) and nodes retired for good.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use clap::Parser;
use consensus::{ConsensusNode, Handoff, Metrics, NodeStorage};
use master::state::MasterState;
use master::{MasterConfig, Replica, ReplicatedState};
use openraft::ServerState;
use tokio::time::Instant;

use crate::clock::{ClockSkew, SimClock};
use crate::config::SimulationConfig;
use crate::disk::SimDisk;
use crate::log_store::SimLogStore;
use crate::master_link::master_addr;
use crate::network::{Member, SimNetwork};
use crate::observer::SimObserver;
use crate::rng::SimRng;
use crate::snapshots::SimSnapshots;
use crate::trace::Trace;

/// Election timeouts are drawn per incarnation in this range: distinct timeouts break ties
/// without openraft's own (unseeded) random draw.
const ELECTION_TIMEOUT_MS: (u64, u64) = (150, 300);
/// A graceful stop's bound for handing leadership off (`raftrain master` allows 3 s at its
/// default timings; these are about three times shorter).
const HANDOFF_MS_MAX: u64 = 1_000;

/// One running process of a node.
#[derive(Clone)]
pub struct RunningNode {
    pub id: u64,
    pub incarnation: u64,
    pub node: ConsensusNode<ReplicatedState>,
    pub observer: SimObserver,
    pub disk: SimDisk,
    /// How many times its disk was wiped before this incarnation (a wiped node is a new
    /// member that happens to reuse the id).
    pub life: u64,
}

impl RunningNode {
    /// The node's latest published metrics.
    pub fn metrics(&self) -> Metrics {
        self.node.metrics().borrow().clone()
    }

    /// Whether openraft's core still runs. A fatal stop shows in `running_state`; a panic
    /// inside the core only drops the metrics sender, leaving the last value as it was.
    pub fn core_running(&self) -> bool {
        let metrics = self.node.metrics();
        metrics.has_changed().is_ok() && metrics.borrow().running_state.is_ok()
    }

    /// Whether the node believes it leads.
    pub fn is_leader(&self) -> bool {
        self.node.metrics().borrow().state == ServerState::Leader
    }

    /// A copy of the task-queue state it applied.
    pub fn master_state(&self) -> MasterState {
        self.node.read(|state| state.state().clone())
    }

    /// The same, with the index of the last entry it holds.
    pub fn master_state_applied(&self) -> (u64, MasterState) {
        self.node.read_applied(|state| state.state().clone())
    }
}

/// Parses a master's command line into its configuration, as `raftrain master` does.
#[derive(Parser)]
struct MasterArgs {
    #[command(flatten)]
    config: MasterConfig,
}

/// The whole group.
pub struct Cluster {
    config: SimulationConfig,
    network: SimNetwork,
    trace: Trace,
    rng: SimRng,
    origin: Instant,
    disks: BTreeMap<u64, SimDisk>,
    incarnations: BTreeMap<u64, u64>,
    /// The nodes that should run: the founders, joiners, not the retired.
    nodes: BTreeSet<u64>,
    /// Nodes that start with `--join` (added to the running group) instead of `--peers`.
    joiners: BTreeSet<u64>,
    /// How many times each node's disk was wiped.
    lives: BTreeMap<u64, u64>,
    running: BTreeMap<u64, RunningNode>,
    replicas: BTreeMap<u64, Replica>,
    /// Observers of crashed incarnations whose last applies the checkers still read.
    retired: Vec<SimObserver>,
}

impl Cluster {
    /// Starts every node; the lowest id bootstraps the group.
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
            origin: Instant::now(),
            disks: config.node_ids().into_iter().map(|id| (id, SimDisk::default())).collect(),
            incarnations: BTreeMap::new(),
            nodes: config.node_ids().into_iter().collect(),
            joiners: BTreeSet::new(),
            lives: BTreeMap::new(),
            running: BTreeMap::new(),
            replicas: BTreeMap::new(),
            retired: Vec::new(),
        };
        for id in config.node_ids() {
            cluster.start_node(id).await?;
        }
        Ok(cluster)
    }

    /// Master `id`'s configuration, from the command line a real master would get.
    fn master_config(&mut self, id: u64) -> anyhow::Result<MasterConfig> {
        let timeout_ms = self.rng.range(ELECTION_TIMEOUT_MS.0, ELECTION_TIMEOUT_MS.1);
        let founders = self.config.node_ids();
        let group = match self.joiners.contains(&id) {
            false => {
                let peers: Vec<String> =
                    founders.iter().map(|id| format!("{id}={}", master_addr(*id))).collect();
                vec![format!("--peers={}", peers.join(","))]
            }
            true => {
                let join: Vec<String> = founders.iter().map(|id| master_addr(*id)).collect();
                vec![
                    format!("--join={}", join.join(",")),
                    format!("--advertise={}", master_addr(id)),
                ]
            }
        };
        let settings = &self.config.master;
        let args = [
            "master".to_string(),
            format!("--id={id}"),
            "--listen=127.0.0.1:7000".to_string(),
            format!("--data-dir=sim/node-{id}"),
            format!("--heartbeat-ms={}", settings.heartbeat_ms),
            format!("--election-timeout-min-ms={timeout_ms}"),
            // One value wide: openraft's own draw from the thread RNG is then a constant.
            format!("--election-timeout-max-ms={}", timeout_ms + 1),
            format!("--snapshot-logs-since-last={}", settings.snapshot_logs_since_last),
            format!("--snapshot-logs-kept={}", settings.snapshot_logs_kept),
            format!("--task-timeout-min-ms={}", settings.task_timeout_min_ms),
            "--timeout-factor=2".to_string(),
            "--retry-failed-next-pass".to_string(),
            format!("--trainer-lease-ms={}", settings.trainer_lease_ms),
            format!("--pserver-lease-ms={}", settings.pserver_lease_ms),
        ];
        Ok(MasterArgs::try_parse_from(args.into_iter().chain(group))?.config)
    }

    /// Starts a new incarnation of node `id` on its disk, its clock skewed as drawn.
    pub async fn start_node(&mut self, id: u64) -> anyhow::Result<()> {
        let incarnation = self.incarnations.get(&id).map_or(0, |last| last + 1);
        self.incarnations.insert(id, incarnation);
        let disk = self.disks.get(&id).cloned().ok_or_else(|| anyhow::anyhow!("no node {id}"))?;
        let master_config = self.master_config(id)?;
        let mut node_config = master_config.node_config()?;
        node_config.write_timeout_ms = self.config.master.write_timeout_ms;
        let stream = 100 + id * 1000 + incarnation * 10;
        let seed = self.config.seed;
        let (log, log_closed) = SimLogStore::open(
            disk.clone(),
            SimRng::derive(seed, stream),
            self.config.flush_delay_ms,
            self.config.bugs.ack_before_durable,
        );
        let observer = SimObserver::default();
        let storage = NodeStorage {
            log: log.with_node_id(id),
            log_closed,
            snapshots: Arc::new(SimSnapshots::open(
                disk.clone(),
                id,
                SimRng::derive(seed, stream + 1),
            )),
            observer: Some(Arc::new(observer.clone())),
        };
        let factory = self.network.factory(id, incarnation);
        let node =
            ConsensusNode::open_with(node_config, ReplicatedState::default(), factory, storage)
                .await?;
        let clock = SimClock::new(self.origin);
        let skew = ClockSkew::draw(&mut self.rng);
        clock.set_skew(skew);
        if skew != ClockSkew::default() {
            self.trace.tally("skewed clock");
        }
        let levels = Arc::new(self.network.levels(id, incarnation));
        let replica =
            Replica::start_with_levels(node.clone(), &master_config, Arc::new(clock), levels)?;
        let member = Member { incarnation, raft: node.rpc_handler(), master: replica.service() };
        self.network.register(id, member);
        let timeout_ms = master_config.election_timeout_min_ms;
        self.trace.record(format!(
            "node {id} started incarnation {incarnation} timeout {timeout_ms} clock {skew:?}"
        ));
        node.bootstrap().await?;
        self.replicas.insert(id, replica);
        let life = self.life(id);
        self.running.insert(id, RunningNode { id, incarnation, node, observer, disk, life });
        Ok(())
    }

    /// Starts node `id`, never seen before, with an empty disk, as a master that joins the
    /// running group (`--join`): it waits to be added as a learner.
    pub async fn add_node(&mut self, id: u64) -> anyhow::Result<()> {
        self.disks.insert(id, SimDisk::default());
        self.joiners.insert(id);
        self.nodes.insert(id);
        self.trace.record(format!("node {id} is new: it joins the group"));
        self.trace.tally("new member joined");
        self.start_node(id).await
    }

    /// Node `id`, removed from the group, exits; its disk is wiped and it starts again as a
    /// master that joins the running group (`--join`), a new member with the old id.
    pub async fn wipe(&mut self, id: u64) -> anyhow::Result<()> {
        self.exit(id);
        self.disks.insert(id, SimDisk::default());
        *self.lives.entry(id).or_default() += 1;
        self.joiners.insert(id);
        self.nodes.insert(id);
        self.trace.record(format!("node {id}'s disk is wiped: it joins the group anew"));
        self.trace.tally("wiped and rejoined");
        self.start_node(id).await
    }

    /// Node `id`, removed from the group, exits and is never started again (as a removed
    /// master stops and refuses its directory).
    pub fn retire(&mut self, id: u64) {
        self.exit(id);
        self.nodes.remove(&id);
        self.trace.record(format!("node {id} retired"));
    }

    /// How many times node `id`'s disk was wiped.
    pub fn life(&self, id: u64) -> u64 {
        self.lives.get(&id).copied().unwrap_or(0)
    }

    /// How many times each node's disk was wiped (every node ever started).
    pub fn lives(&self) -> BTreeMap<u64, u64> {
        self.disks.keys().map(|id| (*id, self.life(*id))).collect()
    }

    /// The nodes that should run (crashed ones included), lowest first.
    pub fn nodes(&self) -> Vec<u64> {
        self.nodes.iter().copied().collect()
    }

    /// SIGTERM: node `id` hands leadership off as `raftrain master` does (see
    /// `consensus::handoff`), then its process exits. What its disk had not flushed yet is
    /// still lost, as in a crash: stricter than a real exit, which keeps the page cache.
    pub async fn stop_gracefully(&mut self, id: u64) {
        let Some(running) = self.running.get(&id).cloned() else { return };
        let handoff = self.network.handoff(id, running.incarnation);
        let bound = std::time::Duration::from_millis(HANDOFF_MS_MAX);
        let outcome = running.node.hand_off_leadership(&handoff, bound).await;
        self.trace.record(format!("node {id} stops gracefully: {outcome:?}"));
        self.trace.tally("graceful stop");
        if let Handoff::Done { .. } = outcome {
            self.trace.tally("leadership handed off");
        }
        if let Some(lost) = self.exit(id) {
            self.trace.record(format!("node {id} exited, {lost} unflushed writes lost"));
        }
    }

    /// Kills node `id` harder than kill -9: its unflushed writes are lost.
    pub fn crash(&mut self, id: u64) {
        let Some(lost) = self.exit(id) else { return };
        self.trace.record(format!("node {id} crashed, {lost} unflushed writes lost"));
        self.trace.tally("crash");
    }

    /// Node `id`'s process ends: its unflushed writes are lost (how many is returned), its
    /// messages stop, and its old tasks are stopped.
    fn exit(&mut self, id: u64) -> Option<usize> {
        let node = self.running.remove(&id)?;
        self.network.remove(id);
        self.network.resume(id);
        let lost = node.disk.crash();
        self.retired.push(node.observer.clone());
        let replica = self.replicas.remove(&id);
        // The old process stops on its own (its disk refuses it); stopping it only frees its
        // tasks sooner.
        tokio::spawn(async move {
            if let Some(replica) = replica {
                drop(replica.stop().await);
            }
            drop(node.node.shutdown().await);
        });
        Some(lost)
    }

    /// A master whose Raft core stopped on a fatal error exits (as `raftrain master` does) and
    /// its supervisor starts it again. A core that panicked is left for the `raft core` checker.
    pub async fn restart_stopped_cores(&mut self) -> anyhow::Result<()> {
        let stopped: Vec<(u64, String)> = self
            .running
            .values()
            .filter_map(|node| match &node.metrics().running_state {
                Err(fatal) => Some((node.id, fatal.to_string())),
                Ok(()) => None,
            })
            .collect();
        for (id, reason) in stopped {
            self.trace.record(format!("node {id} exits: its Raft core stopped: {reason}"));
            self.trace.tally("raft core stopped, master restarted");
            self.crash(id);
            self.start_node(id).await?;
        }
        Ok(())
    }

    /// The leader's disk fails its next flush (an fsync returning EIO). Whether there was a
    /// leader to fail.
    pub fn fail_leader_flush(&self) -> bool {
        let Some(leader) = self.leader().map(|leader| leader.id) else { return false };
        let Some(disk) = self.disk(leader) else { return false };
        self.trace.record(format!("node {leader}'s disk fails its next flush"));
        self.trace.tally("failed flush");
        disk.fail_next_flush();
        true
    }

    /// Stalls the leader's disk (every flush waits until [`Cluster::end_disk_stall`]): the
    /// leader's id and term, or `None` if no node leads.
    pub fn stall_leader_disk(&self) -> Option<(u64, u64)> {
        let leader = self.leader()?;
        let term = leader.metrics().current_term;
        let disk = self.disk(leader.id)?;
        self.trace.record(format!("node {}'s disk stalls in term {term}", leader.id));
        disk.set_faults(crate::disk::DiskFaults { slow_factor: 1, stalled: true });
        Some((leader.id, term))
    }

    /// Ends the stall of node `id`'s disk, which began while it led in `term`, and tallies
    /// whether it still leads in that term (no election while its disk stalled).
    pub fn end_disk_stall(&self, id: u64, term: u64) {
        if let Some(disk) = self.disk(id) {
            disk.set_faults(crate::disk::DiskFaults::default());
        }
        let leads = self.leader().map(|leader| (leader.id, leader.metrics().current_term));
        self.trace.record(format!("node {id}'s disk works again; leader {leads:?}"));
        self.trace.tally(if leads == Some((id, term)) {
            "leader kept its term through its disk stall"
        } else {
            "election during the leader's disk stall"
        });
    }

    /// Running nodes, by id.
    pub fn running(&self) -> Vec<RunningNode> {
        self.running.values().cloned().collect()
    }

    /// Ids of nodes that are down (and not retired).
    pub fn crashed(&self) -> Vec<u64> {
        self.nodes.iter().copied().filter(|id| !self.running.contains_key(id)).collect()
    }

    /// Observers of crashed incarnations.
    pub fn retired(&self) -> &[SimObserver] {
        &self.retired
    }

    /// The running node that leads with the highest term, if any.
    pub fn leader(&self) -> Option<RunningNode> {
        let leaders = self.running.values().filter(|node| node.is_leader());
        leaders.max_by_key(|node| node.metrics().current_term).cloned()
    }

    /// The disk of node `id`.
    pub fn disk(&self, id: u64) -> Option<&SimDisk> {
        self.disks.get(&id)
    }

    /// The network, for the fault injector.
    pub fn network(&self) -> &SimNetwork {
        &self.network
    }

    /// Stops every running node (the end of a run).
    pub async fn stop_all(&mut self) {
        for id in self.running.keys().copied().collect::<Vec<_>>() {
            self.crash(id);
        }
    }
}
