//! The simulated network: openraft's `RaftNetworkFactory` over in-memory delivery, where a
//! seeded random stream decides each message's delay, loss and duplication, and partitions and
//! crashed nodes stop messages. A lost message fails as a network error after its delay, like
//! a timeout (not `Unreachable`, whose backoff would add a timer race). A paused node's
//! messages, both ways, wait until it resumes. Clients reach the masters' services through
//! the same network (`master_link`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use consensus::timeout_now_error::TimeoutNowError;
use consensus::{RpcHandler, TypeConfig};
use master::MasterRpc;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{AnyError, BasicNode};
use proto::master::master_service_server::MasterServiceServer;
use tokio::sync::Notify;

use crate::rng::SimRng;
use crate::trace::Trace;

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<u64, BasicNode, RaftError<u64, E>>>;

/// How the network misbehaves while faults are on.
#[derive(Clone, Copy, Debug)]
pub struct LinkFaults {
    /// Percent of requests, and separately of replies, that are lost.
    pub loss_percent: u64,
    /// Percent of requests delivered twice.
    pub duplicate_percent: u64,
    /// Percent of messages that are slow (delayed by `slow_delay_ms`), which reorders them.
    pub slow_percent: u64,
}

impl LinkFaults {
    /// A healthy network: no loss, no duplicates, no slow messages.
    pub const NONE: Self = Self { loss_percent: 0, duplicate_percent: 0, slow_percent: 0 };
}

/// The usual one-way delay range, and the delay range of a slow message.
const DELAY_MS: (u64, u64) = (1, 15);
const SLOW_DELAY_MS: (u64, u64) = (40, 400);

/// The shared network. Cheap to clone.
#[derive(Clone)]
pub struct SimNetwork {
    inner: Arc<Mutex<NetworkState>>,
    paused: Arc<Paused>,
    pub(crate) trace: Trace,
}

/// Paused nodes, and the wake-up of everything waiting for one to resume.
#[derive(Default)]
struct Paused {
    nodes: Mutex<BTreeSet<u64>>,
    resumed: Notify,
}

impl Paused {
    fn nodes(&self) -> MutexGuard<'_, BTreeSet<u64>> {
        self.nodes.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A running node as the network reaches it.
#[derive(Clone)]
pub struct Member {
    pub incarnation: u64,
    /// Where its Raft RPCs go (the handler production's gRPC server calls).
    pub raft: RpcHandler,
    /// Its master service, as production serves it.
    pub master: MasterServiceServer<MasterRpc>,
}

struct NetworkState {
    /// Running nodes, by id.
    nodes: BTreeMap<u64, Member>,
    /// Directed links `(from, to)` that drop every message.
    blocked: BTreeSet<(u64, u64)>,
    faults: LinkFaults,
    rng: SimRng,
    next_message: u64,
}

/// What will happen to one request, decided when it is sent.
pub(crate) struct Plan {
    pub(crate) message: u64,
    pub(crate) delay_ms: u64,
    pub(crate) request_lost: bool,
    duplicate_after_ms: Option<u64>,
    pub(crate) reply_delay_ms: u64,
    pub(crate) reply_lost: bool,
}

impl SimNetwork {
    /// A network with no nodes, drawing from `rng`.
    pub fn new(rng: SimRng, trace: Trace) -> Self {
        let state = NetworkState {
            nodes: BTreeMap::new(),
            blocked: BTreeSet::new(),
            faults: LinkFaults::NONE,
            rng,
            next_message: 0,
        };
        Self { inner: Arc::new(Mutex::new(state)), paused: Arc::default(), trace }
    }

    fn state(&self) -> MutexGuard<'_, NetworkState> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Lets messages reach node `id`.
    pub fn register(&self, id: u64, member: Member) {
        self.state().nodes.insert(id, member);
    }

    /// Node `id` as the network reaches it, if it runs.
    pub fn member(&self, id: u64) -> Option<Member> {
        self.state().nodes.get(&id).cloned()
    }

    /// Node `id` stops: whatever it sends or is sent waits until [`SimNetwork::resume`].
    pub fn pause(&self, id: u64) {
        self.paused.nodes().insert(id);
    }

    pub fn resume(&self, id: u64) {
        self.paused.nodes().remove(&id);
        self.paused.resumed.notify_waiters();
    }

    /// Paused nodes.
    pub fn paused(&self) -> BTreeSet<u64> {
        self.paused.nodes().clone()
    }

    /// Returns once neither node is paused. (A `Notify` wakes its waiters in the order they
    /// began waiting; a tokio `watch` would wake them in a random order.)
    pub async fn wait_running(&self, first: u64, second: u64) {
        loop {
            let resumed = self.paused.resumed.notified();
            tokio::pin!(resumed);
            resumed.as_mut().enable();
            let paused = self.paused();
            if !paused.contains(&first) && !paused.contains(&second) {
                return;
            }
            resumed.await;
        }
    }

    /// Node `id` crashed: nothing reaches it or leaves it any more.
    pub fn remove(&self, id: u64) {
        self.state().nodes.remove(&id);
    }

    /// Cuts `group` off from every other node, both ways.
    pub fn partition(&self, group: &BTreeSet<u64>, all: &[u64]) {
        let mut state = self.state();
        for inside in group {
            for outside in all.iter().filter(|node| !group.contains(node)) {
                state.blocked.insert((*inside, *outside));
                state.blocked.insert((*outside, *inside));
            }
        }
    }

    /// Sets how the links misbehave.
    pub fn set_faults(&self, faults: LinkFaults) {
        self.state().faults = faults;
    }

    /// Removes every partition and link fault, and resumes every paused node.
    pub fn heal(&self) {
        let mut state = self.state();
        state.blocked.clear();
        state.faults = LinkFaults::NONE;
        self.paused.nodes().clear();
        self.paused.resumed.notify_waiters();
    }

    /// The network factory of node `id` in incarnation `incarnation`.
    pub fn factory(&self, id: u64, incarnation: u64) -> SimNetworkFactory {
        SimNetworkFactory { network: self.clone(), source: id, incarnation }
    }

    pub(crate) fn plan(&self) -> Plan {
        let mut state = self.state();
        let faults = state.faults;
        let message = state.next_message;
        state.next_message += 1;
        let rng = &mut state.rng;
        let delay = |rng: &mut SimRng| {
            let slow = rng.percent(faults.slow_percent);
            let (low, high) = if slow { SLOW_DELAY_MS } else { DELAY_MS };
            rng.range(low, high)
        };
        let delay_ms = delay(rng);
        let request_lost = rng.percent(faults.loss_percent);
        let duplicate = rng.percent(faults.duplicate_percent);
        let duplicate_after_ms = duplicate.then(|| delay(rng));
        let reply_delay_ms = delay(rng);
        let reply_lost = rng.percent(faults.loss_percent);
        Plan { message, delay_ms, request_lost, duplicate_after_ms, reply_delay_ms, reply_lost }
    }

    /// Whether a message from `from` (in `incarnation`) to `to` gets through now; the target's
    /// handle if so.
    fn pass(&self, from: u64, incarnation: u64, to: u64) -> Result<RpcHandler, &'static str> {
        let state = self.state();
        match state.nodes.get(&from) {
            Some(member) if member.incarnation == incarnation => {}
            _ => return Err("sender crashed"),
        }
        if state.blocked.contains(&(from, to)) {
            return Err("partitioned");
        }
        state.nodes.get(&to).map(|member| member.raft.clone()).ok_or("target down")
    }
}

/// The network factory of one node incarnation.
pub struct SimNetworkFactory {
    network: SimNetwork,
    source: u64,
    incarnation: u64,
}

/// One node's link to another.
pub struct SimConnection {
    network: SimNetwork,
    source: u64,
    incarnation: u64,
    target: u64,
}

impl RaftNetworkFactory<TypeConfig> for SimNetworkFactory {
    type Network = SimConnection;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> SimConnection {
        SimConnection {
            network: self.network.clone(),
            source: self.source,
            incarnation: self.incarnation,
            target,
        }
    }
}

fn network_error<E: std::error::Error>(why: String) -> RPCError<u64, BasicNode, RaftError<u64, E>> {
    RPCError::Network(NetworkError::new(&AnyError::error(why)))
}

impl SimConnection {
    /// Waits out the request's delay and returns the target's handle, or fails as lost.
    async fn send<E: std::error::Error>(
        &self,
        kind: &str,
    ) -> Result<(Plan, RpcHandler), RPCError<u64, BasicNode, RaftError<u64, E>>> {
        let plan = self.network.plan();
        let (from, to, message) = (self.source, self.target, plan.message);
        tokio::time::sleep(Duration::from_millis(plan.delay_ms)).await;
        self.network.wait_running(from, to).await;
        let route = self.network.pass(from, self.incarnation, to);
        let trace = &self.network.trace;
        match route {
            Err(why) => {
                trace.record(format!("msg {message} {from}->{to} {kind} dropped: {why}"));
                Err(network_error(format!("{from}->{to}: {why}")))
            }
            Ok(_) if plan.request_lost => {
                trace.record(format!("msg {message} {from}->{to} {kind} lost"));
                Err(network_error(format!("{from}->{to}: request lost")))
            }
            Ok(raft) => {
                trace.record(format!("msg {message} {from}->{to} {kind} delivered"));
                Ok((plan, raft))
            }
        }
    }

    /// Waits out the reply's delay and hands the answer back, unless the reply is lost.
    async fn reply<T, E: std::error::Error>(
        &self,
        plan: &Plan,
        result: Result<T, RaftError<u64, E>>,
    ) -> RpcResult<T, E> {
        let (from, to, message) = (self.source, self.target, plan.message);
        tokio::time::sleep(Duration::from_millis(plan.reply_delay_ms)).await;
        self.network.wait_running(from, to).await;
        let back = self.network.reply_passes(to, from, self.incarnation);
        let trace = &self.network.trace;
        if let Err(why) = back {
            trace.record(format!("msg {message} reply {to}->{from} dropped: {why}"));
            return Err(network_error(format!("{to}->{from}: {why}")));
        }
        if plan.reply_lost {
            trace.record(format!("msg {message} reply {to}->{from} lost"));
            return Err(network_error(format!("{to}->{from}: reply lost")));
        }
        trace.record(format!("msg {message} reply {to}->{from} delivered"));
        result.map_err(|error| RPCError::RemoteError(RemoteError::new(to, error)))
    }

    fn duplicate<F>(&self, plan: &Plan, kind: &str, deliver: F)
    where
        F: std::future::Future + Send + 'static,
    {
        let Some(after_ms) = plan.duplicate_after_ms else { return };
        let (from, to, message) = (self.source, self.target, plan.message);
        self.network.trace.record(format!("msg {message} {from}->{to} {kind} duplicated"));
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(after_ms)).await;
            deliver.await;
        });
    }
}

impl SimNetwork {
    /// Whether a reply from `from` gets back to `to`: the link must not be cut, and the
    /// incarnation of `to` that sent the request must still be running.
    fn reply_passes(&self, from: u64, to: u64, incarnation: u64) -> Result<(), &'static str> {
        let state = self.state();
        if state.blocked.contains(&(from, to)) {
            return Err("partitioned");
        }
        match state.nodes.get(&to) {
            Some(member) if member.incarnation == incarnation => Ok(()),
            _ => Err("sender crashed"),
        }
    }
}

impl RaftNetwork<TypeConfig> for SimConnection {
    async fn append_entries(
        &mut self,
        request: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<u64>> {
        let kind = format!("append({})", request.entries.len());
        let (plan, raft) = self.send(&kind).await?;
        let (copy, duplicate) = (raft.clone(), request.clone());
        self.duplicate(&plan, &kind, async move { copy.append_entries(duplicate).await });
        let result = raft.append_entries(request).await;
        self.reply(&plan, result).await
    }

    async fn install_snapshot(
        &mut self,
        request: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, InstallSnapshotError> {
        let (plan, raft) = self.send("snapshot").await?;
        if request.done {
            self.network.trace.tally("snapshot installed");
        }
        let result = raft.install_snapshot(request).await;
        self.reply(&plan, result).await
    }

    async fn vote(
        &mut self,
        request: VoteRequest<u64>,
        _option: RPCOption,
    ) -> RpcResult<VoteResponse<u64>> {
        let kind = format!("vote({})", request.vote);
        let (plan, raft) = self.send(&kind).await?;
        let (copy, duplicate) = (raft.clone(), request.clone());
        self.duplicate(&plan, &kind, async move { copy.vote(duplicate).await });
        let result = raft.vote(request).await;
        if let Ok(response) = &result {
            let (from, to, message) = (self.source, self.target, plan.message);
            let granted = response.vote_granted;
            self.network.trace.record(format!(
                "msg {message} {to} answers {from}: granted {granted}, vote {}",
                response.vote
            ));
        }
        self.reply(&plan, result).await
    }
}

/// The `TimeoutNow` of a graceful stop's leadership handoff, delivered like every Raft message
/// (delay, loss, partitions, pauses).
pub struct SimHandoff {
    network: SimNetwork,
    source: u64,
    incarnation: u64,
}

impl SimNetwork {
    /// The handoff transport of node `id` in incarnation `incarnation`.
    pub fn handoff(&self, id: u64, incarnation: u64) -> SimHandoff {
        SimHandoff { network: self.clone(), source: id, incarnation }
    }
}

impl consensus::HandoffTransport for SimHandoff {
    fn timeout_now<'a>(
        &'a self,
        target: u64,
        _addr: &'a str,
        request: consensus::TimeoutNow,
    ) -> consensus::handoff::SendFuture<'a> {
        let (network, source, incarnation) = (self.network.clone(), self.source, self.incarnation);
        let connection = SimConnection { network, source, incarnation, target };
        Box::pin(async move {
            let kind = "timeout-now";
            let sent = connection.send::<openraft::error::Infallible>(kind).await;
            let unreachable = |error: &dyn std::fmt::Display| TimeoutNowError::Unreachable {
                reason: error.to_string(),
            };
            let (plan, handler) = sent.map_err(|error| unreachable(&error))?;
            let answer = handler.timeout_now(request).await;
            let replied = connection.reply::<(), openraft::error::Infallible>(&plan, Ok(())).await;
            replied.map_err(|error| unreachable(&error))?;
            Ok(answer?)
        })
    }
}

/// Members asked their feature levels, each question delivered like every Raft message (delay,
/// loss, partitions, pauses); every simulated master runs this build, so one that is reached
/// answers its level.
pub struct SimLevels {
    network: SimNetwork,
    source: u64,
    incarnation: u64,
}

impl SimNetwork {
    /// The feature-level transport of node `id` in incarnation `incarnation`.
    pub fn levels(&self, id: u64, incarnation: u64) -> SimLevels {
        SimLevels { network: self.clone(), source: id, incarnation }
    }
}

impl consensus::MemberLevels for SimLevels {
    fn level<'a>(&'a self, target: u64, _addr: &'a str) -> consensus::LevelFuture<'a> {
        let (network, source, incarnation) = (self.network.clone(), self.source, self.incarnation);
        let connection = SimConnection { network, source, incarnation, target };
        Box::pin(async move {
            let sent = connection.send::<openraft::error::Infallible>("feature-level").await;
            let (plan, _handler) = sent.ok()?;
            let replied = connection.reply::<(), openraft::error::Infallible>(&plan, Ok(())).await;
            replied.ok()?;
            Some(master::state::FEATURE_LEVEL)
        })
    }
}
