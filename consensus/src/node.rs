//! One member of the replicated log: opens storage, runs openraft, bootstraps the static
//! group, and offers writes, linearizable reads and cluster information to the application.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ForwardToLeader, InitializeError, RaftError};
use openraft::network::RaftNetworkFactory;
use openraft::{BasicNode, ServerState};
use proto::raft::raft_service_server::RaftServiceServer;
use tokio::sync::watch;

use crate::batcher::{forward_to_leader, Batcher};
use crate::cluster_info::ClusterInfo;
use crate::durable_commits::DurableCommits;
use crate::durable_log::DurableWatch;
use crate::election_timer::{self, ElectionSwitches, ElectionTiming};
use crate::error::ShutdownError;
use crate::grpc_handoff::GrpcHandoff;
use crate::handoff::{Handoff, HandoffTransport, Successor};
use crate::handoff_failure::HandoffFailure;
use crate::leadership::Leadership;
use crate::log_store::{BootstrapRecord, ENTRY_BYTES_MAX};
use crate::log_store_closed::LogStoreClosed;
use crate::network::Network;
use crate::raft_log::{NodeStorage, RaftLog};
use crate::rpc_handler::RpcHandler;
use crate::service::RaftServer;
use crate::state_machine_store::StateMachineStore;
use crate::{Metrics, NodeConfig, Raft, StartError, StateMachine, TypeConfig, WriteError};

/// The largest command `write` accepts: an entry is the command plus a small header, and must
/// stay under [`ENTRY_BYTES_MAX`].
pub const COMMAND_BYTES_MAX: usize = ENTRY_BYTES_MAX - 1024;

/// After `Raft::shutdown`, how long to wait for the log's files to close.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// A running member of the group. Cheap to clone: clones share the node.
pub struct ConsensusNode<S> {
    pub(crate) inner: Arc<Inner<S>>,
}

pub(crate) struct Inner<S> {
    pub(crate) config: NodeConfig,
    pub(crate) raft: Raft,
    pub(crate) state_machine: StateMachineStore<S>,
    pub(crate) log_store_closed: LogStoreClosed,
    pub(crate) rpc_handler: RpcHandler,
    pub(crate) batcher: Batcher,
    pub(crate) leadership: Leadership,
    /// Set once by [`ConsensusNode::hand_off_leadership`]: this node will stop, and acts as a
    /// leader no more (no writes, confirmations or linearizable reads).
    pub(crate) leaving: Arc<AtomicBool>,
    /// Where held callers go once this node has left (found once, answered in arrival order).
    pub(crate) successor: Arc<Successor>,
    /// Cleared by [`ConsensusNode::enable_elections`]: this node's election timer then never
    /// campaigns (openraft's own switch has no getter, so the timer keeps this copy).
    pub(crate) elections: Arc<AtomicBool>,
    /// When this node last became leader (seen from its metrics), while it leads.
    pub(crate) leading_since: Arc<std::sync::Mutex<Option<(u64, tokio::time::Instant)>>>,
    /// How far the log is durable, or why it never will be (a failed flush stops the core).
    pub(crate) durable: DurableWatch,
}

/// What `start_raft` opened: Raft on the log, and whether the log held a vote.
struct Started<S> {
    raft: Raft,
    state_machine: StateMachineStore<S>,
    durable: DurableWatch,
    had_vote: bool,
}

impl<S> Clone for ConsensusNode<S> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

impl<S: StateMachine> ConsensusNode<S> {
    /// Opens the node's storage and starts Raft over the tonic network. Binds no socket.
    pub async fn open(config: NodeConfig, state_machine: S) -> Result<Self, StartError> {
        let network = Network::new(
            Duration::from_millis(config.heartbeat_ms),
            config.security.clone(),
            config.raft_addrs.clone(),
        );
        Self::open_with_network(config, state_machine, network).await
    }

    /// Like [`ConsensusNode::open`], over any network (tests route messages in memory).
    pub async fn open_with_network<N: RaftNetworkFactory<TypeConfig>>(
        config: NodeConfig,
        state_machine: S,
        network: N,
    ) -> Result<Self, StartError> {
        config.validate()?;
        let storage = NodeStorage::open_dir(&config.data_dir)?;
        Self::open_with(config, state_machine, network, storage).await
    }

    /// Like [`ConsensusNode::open_with_network`], on any storage (the simulation's disk).
    pub async fn open_with<N: RaftNetworkFactory<TypeConfig>, L: RaftLog>(
        config: NodeConfig,
        state_machine: S,
        network: N,
        storage: NodeStorage<L>,
    ) -> Result<Self, StartError> {
        config.validate()?;
        let NodeStorage { log, log_closed, snapshots, observer } = storage;
        let state_machine = StateMachineStore::open_in(snapshots, observer, state_machine);
        let started = match state_machine {
            Ok(state_machine) => Self::start_raft(&config, state_machine, network, log).await,
            Err(error) => {
                drop(log);
                Err(error)
            }
        };
        match started {
            Ok(started) => {
                tracing::info!(node = config.id, dir = %config.data_dir.display(), "raft node started");
                Ok(Self::assemble(config, started, log_closed))
            }
            Err(error) => {
                // The store is dropped by now; wait for its files to close so that a caller
                // may fix the configuration and open the directory again at once.
                if let Err(reason) = log_closed.wait(CLOSE_TIMEOUT).await {
                    tracing::warn!(%reason, "the failed start left the log open");
                }
                Err(error)
            }
        }
    }

    /// The node around a running Raft: its batcher, RPC handler and leadership cache.
    fn assemble(config: NodeConfig, started: Started<S>, log_store_closed: LogStoreClosed) -> Self {
        let Started { raft, state_machine, durable, had_vote } = started;
        let leaving = Arc::new(AtomicBool::new(false));
        let successor = Arc::new(Successor::default());
        let timeout_ms = config.write_timeout_ms;
        let leave = (leaving.clone(), successor.clone());
        let batcher = Batcher::start(raft.clone(), COMMAND_BYTES_MAX, timeout_ms, leave);
        let lease = Duration::from_millis(config.election_timeout_max_ms);
        let rpc_handler = RpcHandler::new(raft.clone(), lease, leaving.clone(), had_vote);
        let timing = ElectionTiming::of(&config);
        let elections = Arc::new(AtomicBool::new(true));
        let switches = ElectionSwitches { leaving: leaving.clone(), elections: elections.clone() };
        election_timer::start(raft.clone(), rpc_handler.step_up(), timing, switches);
        let leadership = Leadership::new(raft.clone(), config.election_timeout_min_ms);
        let leading_since = Arc::new(std::sync::Mutex::new(None));
        tokio::spawn(crate::leader_changes::count_leader_changes(
            raft.server_metrics(),
            leading_since.clone(),
        ));
        let inner = Inner {
            config,
            raft,
            state_machine,
            log_store_closed,
            batcher,
            rpc_handler,
            leadership,
            leaving,
            successor,
            elections,
            leading_since,
            durable,
        };
        Self { inner: Arc::new(inner) }
    }

    async fn start_raft<N: RaftNetworkFactory<TypeConfig>, L: RaftLog>(
        config: &NodeConfig,
        state_machine: StateMachineStore<S>,
        network: N,
        mut log_store: L,
    ) -> Result<Started<S>, StartError> {
        let record = BootstrapRecord { node_id: config.id, peers: config.peers.clone() };
        log_store.check_bootstrap(&record).await?;
        let had_vote = log_store
            .read_vote()
            .await
            .map_err(|error| StartError::Raft(format!("reading the vote: {error}")))?
            .is_some();
        log_store.purge_behind(state_machine.durable_snapshots());
        // The gates that let the leader replicate while it flushes (see `durable_log`).
        state_machine.apply_when_durable(log_store.durable());
        let network = DurableCommits::new(network, log_store.durable());
        let durable = log_store.durable();
        let raft_config =
            config.raft_config().validate().map_err(|error| StartError::Raft(error.to_string()))?;
        let raft =
            Raft::new(config.id, Arc::new(raft_config), network, log_store, state_machine.clone())
                .await
                .map_err(|error| StartError::Raft(error.to_string()))?;
        tokio::spawn(crate::core_stop::stop_on_failed_flush(durable.clone(), raft.clone()));
        Ok(Started { raft, state_machine, durable, had_vote })
    }

    /// Static bootstrap: the lowest id of `peers` initializes the group with every peer as a
    /// voter, once. Every other node, a node that joins a running group, and any node with a
    /// non-empty log, does nothing.
    #[tracing::instrument(skip_all, fields(node = self.inner.config.id, term = self.term()))]
    pub async fn bootstrap(&self) -> Result<(), StartError> {
        let config = &self.inner.config;
        let lowest = config.peers.keys().next().copied();
        if config.joins || lowest != Some(config.id) {
            return Ok(());
        }
        // A node that voted, committed or holds a snapshot was initialized before: openraft
        // would refuse again, logging an error at every restart.
        let started_before = self.inner.raft.with_raft_state(|state| {
            state.vote_ref().leader_id().get_term() > 0
                || state.committed.is_some()
                || state.snapshot_meta.last_log_id.is_some()
        });
        if started_before.await.map_err(|error| StartError::Raft(error.to_string()))? {
            return Ok(());
        }
        let members: BTreeMap<u64, BasicNode> =
            config.peers.iter().map(|(id, addr)| (*id, BasicNode::new(addr))).collect();
        match self.inner.raft.initialize(members).await {
            Ok(()) => {
                tracing::info!(peers = %crate::format_peers(&config.peers), "initialized the group");
                Ok(())
            }
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(error) => Err(StartError::Raft(error.to_string())),
        }
    }

    /// The receiving end of this node's Raft RPCs, for a transport other than gRPC.
    pub fn rpc_handler(&self) -> RpcHandler {
        self.inner.rpc_handler.clone()
    }

    /// The tonic service to add to a router; the application may serve its own beside it.
    pub fn raft_service(&self) -> RaftServiceServer<RaftServer> {
        let config = &self.inner.config;
        RaftServer::service(self.rpc_handler(), config.id, config.feature_level)
    }

    /// Replicates `command`, waits until it is applied here, and returns the response.
    pub async fn write(&self, command: Vec<u8>) -> Result<Vec<u8>, WriteError> {
        self.write_together(command, 1).await
    }

    /// [`ConsensusNode::write`] of one of `together` writes sent at once (by one client, each
    /// on its own): the entry that takes this one waits a moment for the others (at most
    /// [`crate::TOGETHER_MAX`] count), so that they share one entry and its disk syncs. A hint:
    /// each write is applied and answered as if sent alone.
    #[tracing::instrument(level = "debug", skip_all, fields(node = self.inner.config.id, term = self.term()))]
    pub async fn write_together(
        &self,
        command: Vec<u8>,
        together: usize,
    ) -> Result<Vec<u8>, WriteError> {
        if command.len() > COMMAND_BYTES_MAX {
            let size_bytes = command.len();
            return Err(WriteError::CommandTooLarge {
                size_bytes,
                size_bytes_max: COMMAND_BYTES_MAX,
            });
        }
        self.redirect_if_leaving().await?;
        let timeout_ms = self.inner.config.write_timeout_ms;
        let started = std::time::Instant::now();
        let write = self.inner.batcher.write(command, together);
        let result = match tokio::time::timeout(Duration::from_millis(timeout_ms), write).await {
            Err(_elapsed) => Err(WriteError::Timeout { timeout_ms }),
            Ok(result) => result,
        };
        match &result {
            Ok(_) => {
                metrics::histogram!("raftrain_raft_commit_seconds")
                    .record(started.elapsed().as_secs_f64());
                metrics::counter!("raftrain_raft_proposals_committed_total").increment(1);
            }
            Err(_) => metrics::counter!("raftrain_raft_proposals_failed_total").increment(1),
        }
        result
    }

    /// Returns once this node has confirmed it leads and has applied everything committed
    /// before the call, so a following [`ConsensusNode::read`] is linearizable.
    #[tracing::instrument(level = "debug", skip_all, fields(node = self.inner.config.id, term = self.term()))]
    pub async fn ensure_linearizable(&self) -> Result<(), WriteError> {
        self.redirect_if_leaving().await?;
        let timeout_ms = self.inner.config.write_timeout_ms;
        // openraft's `ensure_linearizable` in two steps, waiting for the apply on the state
        // machine's own index rather than on openraft's metrics (see `applied_index`). A core
        // that stops meanwhile applies nothing more: the wait ends at the timeout.
        let check = async {
            let (read_log_id, _applied) = self.inner.raft.get_read_log_id().await?;
            let index = read_log_id.map_or(0, |log_id| log_id.index);
            self.inner.state_machine.applied_reaches(index).await;
            Ok(())
        };
        match tokio::time::timeout(Duration::from_millis(timeout_ms), check).await {
            Err(_elapsed) => Err(WriteError::Timeout { timeout_ms }),
            Ok(Ok(())) => Ok(()),
            Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(forward)))) => {
                Err(self.forward_to_leader(forward))
            }
            Ok(Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(error)))) => {
                Err(WriteError::NoQuorum { reason: error.to_string() })
            }
            Ok(Err(RaftError::Fatal(fatal))) => {
                Err(WriteError::Stopped { reason: fatal.to_string() })
            }
        }
    }

    /// Returns this node's term if a quorum acknowledged it as leader in that term recently
    /// (within [`ConsensusNode::leadership_fresh_for`] of the acknowledged heartbeat's sending),
    /// so no other node can have been elected meanwhile. Answers from the last confirmation
    /// while it is fresh; otherwise runs one round of heartbeats, shared by concurrent callers.
    /// A leader cut off from the majority answers `Err` within twice that bound. Unlike
    /// [`ConsensusNode::ensure_linearizable`], it does not wait for the state to be applied.
    pub async fn confirm_leadership(&self) -> Result<u64, WriteError> {
        self.redirect_if_leaving().await?;
        self.inner.leadership.confirm().await
    }

    /// Before a planned stop: stops acting as a leader for good (writes, confirmations and
    /// linearizable reads are held until another member leads, then refused naming it), and
    /// if this node leads, hands leadership to a caught-up follower through `transport` within
    /// `bound`. See `handoff`.
    pub async fn hand_off_leadership(
        &self,
        transport: &dyn HandoffTransport,
        bound: Duration,
    ) -> Handoff {
        self.inner.leaving.store(true, Ordering::SeqCst);
        // A node about to stop must not campaign either: it would win back what it hands off.
        self.inner.raft.runtime_config().elect(false);
        // Entries proposed before the flag was set still reach the log: pick the follower to
        // hand off to only once they have (each is answered within the write timeout).
        let drained = self.inner.batcher.drained();
        if tokio::time::timeout(bound, drained).await.is_err() {
            return Handoff::Failed { reason: HandoffFailure::WritesInFlight { bound } };
        }
        let since = self.leading_since().map(|(_term, since)| since);
        let lease = Duration::from_millis(self.inner.config.election_timeout_max_ms);
        crate::handoff::hand_off(&self.inner.raft, transport, bound, lease, since).await
    }

    /// Lets this node start elections when its timer runs out, or not (a test that makes
    /// another member win). A leader elected with this node's vote is followed either way.
    pub fn enable_elections(&self, enabled: bool) {
        self.inner.elections.store(enabled, Ordering::SeqCst);
        self.inner.raft.runtime_config().elect(enabled);
    }

    /// The term this node leads and when it began leading it (as its metrics first showed),
    /// if it leads.
    pub fn leading_since(&self) -> Option<(u64, tokio::time::Instant)> {
        *self.inner.leading_since.lock().unwrap_or_else(|poison| poison.into_inner())
    }

    /// The gRPC transport of a handoff, dialling peers as this node's Raft network does.
    pub fn grpc_handoff(&self) -> GrpcHandoff {
        let config = &self.inner.config;
        GrpcHandoff::new(config.security.clone(), config.raft_addrs.clone())
    }

    /// The gRPC transport that asks members their feature levels, dialling as a handoff does.
    pub fn grpc_member_levels(&self) -> crate::GrpcMemberLevels {
        let config = &self.inner.config;
        crate::GrpcMemberLevels::new(config.security.clone(), config.raft_addrs.clone())
    }

    /// The feature level this node answers (`NodeConfig::feature_level`).
    pub fn feature_level(&self) -> u32 {
        self.inner.config.feature_level
    }

    /// Whether [`ConsensusNode::hand_off_leadership`] was called.
    pub fn is_leaving(&self) -> bool {
        self.inner.leaving.load(Ordering::SeqCst)
    }

    /// While this node hands leadership off, holds the caller until another member leads,
    /// then sends it there (see `handoff::successor`).
    async fn redirect_if_leaving(&self) -> Result<(), WriteError> {
        if !self.is_leaving() {
            return Ok(());
        }
        Err(self.inner.successor.redirect(&self.inner.raft).await)
    }

    /// How long a confirmation of [`ConsensusNode::confirm_leadership`] is trusted:
    /// `election_timeout_min_ms / 2`.
    pub fn leadership_fresh_for(&self) -> Duration {
        self.inner.leadership.fresh_for()
    }

    fn forward_to_leader(&self, forward: ForwardToLeader<u64, BasicNode>) -> WriteError {
        forward_to_leader(&self.inner.raft, forward)
    }

    /// Runs `read` on the state applied on this node (not linearizable by itself).
    pub fn read<R>(&self, read: impl FnOnce(&S) -> R) -> R {
        self.inner.state_machine.read(read)
    }

    /// Like [`ConsensusNode::read`], with the index of the last entry the state holds.
    pub fn read_applied<R>(&self, read: impl FnOnce(&S) -> R) -> (u64, R) {
        self.inner.state_machine.read_applied(read)
    }

    /// Like [`ConsensusNode::read`], with the (index, term) of the last entry the state holds.
    pub fn read_applied_log_id<R>(&self, read: impl FnOnce(&S) -> R) -> ((u64, u64), R) {
        self.inner.state_machine.read_applied_log_id(read)
    }

    /// This node's view of the group.
    pub fn cluster_info(&self) -> ClusterInfo {
        let mut info = ClusterInfo::from_metrics(&self.inner.raft.metrics().borrow());
        info.feature_level = self.inner.config.feature_level;
        info
    }

    /// Raft metrics, updated as they change (sent at every turn of openraft's core: a task
    /// waiting on them wakes several times for each entry).
    pub fn metrics(&self) -> watch::Receiver<Metrics> {
        self.inner.raft.metrics()
    }

    /// Raft's server metrics (vote, state, leader, membership), sent only when one changes:
    /// for tasks that wait for the role to change.
    pub fn server_metrics(&self) -> watch::Receiver<crate::ServerMetrics> {
        self.inner.raft.server_metrics()
    }

    /// If this node leads: how long ago the newest heartbeat a quorum acknowledged was sent
    /// (openraft's `millis_since_quorum_ack`), plus two heartbeat intervals for how stale
    /// those metrics may be (the core refreshes them at least every 1.5 heartbeats), so the
    /// age is never understated. `None` if this node does not lead or no quorum acknowledged
    /// it yet. A leader cut off from its quorum keeps believing it leads (openraft 0.9 does not
    /// step down by itself), and nothing a lease holder sends it meanwhile can be confirmed.
    pub fn quorum_ack_age(&self) -> Option<Duration> {
        let acked_ms = self.inner.raft.metrics().borrow().millis_since_quorum_ack?;
        let stale_ms = 2 * self.inner.config.heartbeat_ms;
        self.is_leader().then(|| Duration::from_millis(acked_ms.saturating_add(stale_ms)))
    }

    /// Whether this node leads and a quorum acknowledged it within the leader lease
    /// (`election_timeout_max_ms`; see [`ConsensusNode::quorum_ack_age`]).
    pub fn quorum_heard_recently(&self) -> bool {
        let lease = Duration::from_millis(self.inner.config.election_timeout_max_ms);
        self.quorum_ack_age().is_some_and(|age| age <= lease)
    }

    /// Whether this node currently believes it leads.
    pub fn is_leader(&self) -> bool {
        let metrics = self.inner.raft.metrics();
        let metrics = metrics.borrow();
        let leads =
            metrics.state == ServerState::Leader && metrics.current_leader == Some(metrics.id);
        leads && !self.is_leaving()
    }

    /// The TLS and token settings its Raft traffic uses, for servers that serve it.
    pub fn security(&self) -> &platform::security::Security {
        &self.inner.config.security
    }

    /// This node's id.
    pub fn id(&self) -> u64 {
        self.inner.config.id
    }

    /// The current Raft term as this node sees it.
    pub fn term(&self) -> u64 {
        self.inner.raft.metrics().borrow().current_term
    }

    /// The openraft handle, for what this type does not wrap (triggering snapshots in tests).
    pub fn raft(&self) -> &Raft {
        &self.inner.raft
    }

    /// Stops Raft and waits until the log's files are closed, so the data directory can be
    /// opened again.
    pub async fn shutdown(&self) -> Result<(), ShutdownError> {
        self.inner
            .raft
            .shutdown()
            .await
            .map_err(|error| ShutdownError { reason: error.to_string() })?;
        let closed = self.inner.log_store_closed.wait(CLOSE_TIMEOUT).await;
        closed.map_err(|reason| ShutdownError { reason })
    }
}
