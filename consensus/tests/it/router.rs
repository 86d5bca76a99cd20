//! An in-memory network between in-process nodes that can cut, delay and count messages,
//! after openraft's own test router.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use consensus::timeout_now_error::TimeoutNowError;
use consensus::{RpcHandler, TypeConfig};
use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{AnyError, BasicNode};

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<u64, BasicNode, RaftError<u64, E>>>;

/// Routes every RPC to the target's `Raft` handle, unless the link is cut.
#[derive(Clone, Default)]
pub struct Router {
    state: Arc<Mutex<RouterState>>,
}

#[derive(Default)]
struct RouterState {
    nodes: BTreeMap<u64, RpcHandler>,
    /// Directed links `(from, to)` whose messages are dropped.
    cut: BTreeSet<(u64, u64)>,
    /// Directed links whose messages wait this long before delivery.
    delays: BTreeMap<(u64, u64), Duration>,
    /// Snapshot chunks delivered, by receiving node.
    snapshot_chunks: BTreeMap<u64, u64>,
}

impl Router {
    fn state(&self) -> MutexGuard<'_, RouterState> {
        self.state.lock().expect("no test thread panics while holding the router lock")
    }

    /// Lets messages reach `handler` as node `id`.
    pub fn register(&self, id: u64, handler: RpcHandler) {
        self.state().nodes.insert(id, handler);
    }

    /// Makes node `id` unreachable, as if it had crashed.
    pub fn remove(&self, id: u64) {
        self.state().nodes.remove(&id);
    }

    /// Cuts every link between `id` and any other node, both ways.
    pub fn isolate(&self, id: u64, others: &[u64]) {
        let mut state = self.state();
        for other in others.iter().copied().filter(|other| *other != id) {
            state.cut.insert((id, other));
            state.cut.insert((other, id));
        }
    }

    /// Restores every cut link and removes every delay.
    pub fn heal(&self) {
        let mut state = self.state();
        state.cut.clear();
        state.delays.clear();
    }

    /// Drops every message from `from` to `to` (one direction).
    pub fn cut(&self, from: u64, to: u64) {
        self.state().cut.insert((from, to));
    }

    /// Delays every message from `from` to `to` (one direction).
    pub fn delay(&self, from: u64, to: u64, delay: Duration) {
        self.state().delays.insert((from, to), delay);
    }

    /// Snapshot chunks delivered to node `id` so far.
    pub fn snapshot_chunks_delivered(&self, id: u64) -> u64 {
        self.state().snapshot_chunks.get(&id).copied().unwrap_or(0)
    }

    /// The network factory node `id` uses.
    pub fn network(&self, id: u64) -> RouterNetwork {
        RouterNetwork { router: self.clone(), source: id }
    }

    /// The target's handle and the delay, or `Unreachable` if the link is cut.
    fn route(
        &self,
        source: u64,
        target: u64,
    ) -> Result<(RpcHandler, Option<Duration>), Unreachable> {
        let state = self.state();
        let unreachable =
            |why: &str| Unreachable::new(&AnyError::error(format!("{source}->{target}: {why}")));
        if state.cut.contains(&(source, target)) {
            return Err(unreachable("link cut"));
        }
        let raft = state.nodes.get(&target).cloned().ok_or_else(|| unreachable("node down"))?;
        Ok((raft, state.delays.get(&(source, target)).copied()))
    }

    /// Whether the reply from `target` gets back to `source`.
    fn reply_passes(&self, source: u64, target: u64) -> Result<(), Unreachable> {
        if self.state().cut.contains(&(target, source)) {
            return Err(Unreachable::new(&AnyError::error(format!(
                "{target}->{source}: link cut"
            ))));
        }
        Ok(())
    }
}

/// The network factory of one node.
pub struct RouterNetwork {
    router: Router,
    source: u64,
}

/// One node's link to another.
pub struct RouterConnection {
    router: Router,
    source: u64,
    target: u64,
}

impl RaftNetworkFactory<TypeConfig> for RouterNetwork {
    type Network = RouterConnection;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> RouterConnection {
        RouterConnection { router: self.router.clone(), source: self.source, target }
    }
}

impl RouterConnection {
    async fn deliver(&self) -> Result<RpcHandler, Unreachable> {
        let (raft, delay) = self.router.route(self.source, self.target)?;
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        Ok(raft)
    }

    // openraft's RPC error type is what the trait returns.
    #[allow(clippy::result_large_err)]
    fn answer<T, E: std::error::Error>(
        &self,
        result: Result<T, RaftError<u64, E>>,
    ) -> RpcResult<T, E> {
        self.router.reply_passes(self.source, self.target)?;
        result.map_err(|error| RPCError::RemoteError(RemoteError::new(self.target, error)))
    }
}

impl RaftNetwork<TypeConfig> for RouterConnection {
    async fn append_entries(
        &mut self,
        request: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<u64>> {
        let raft = self.deliver().await?;
        let result = raft.append_entries(request).await;
        self.answer(result)
    }

    async fn install_snapshot(
        &mut self,
        request: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, InstallSnapshotError> {
        let raft = self.deliver().await?;
        let result = raft.install_snapshot(request).await;
        if result.is_ok() {
            *self.router.state().snapshot_chunks.entry(self.target).or_default() += 1;
        }
        self.answer(result)
    }

    async fn vote(
        &mut self,
        request: VoteRequest<u64>,
        _option: RPCOption,
    ) -> RpcResult<VoteResponse<u64>> {
        let raft = self.deliver().await?;
        let result = raft.vote(request).await;
        self.answer(result)
    }
}

/// A handoff's `TimeoutNow` goes to the target's handler like any RPC (unless cut from it).
impl consensus::HandoffTransport for Router {
    fn timeout_now<'a>(
        &'a self,
        target: u64,
        _addr: &'a str,
        request: consensus::TimeoutNow,
    ) -> consensus::handoff::SendFuture<'a> {
        let handler = {
            let state = self.state();
            let cut = state.cut.contains(&(request.leader_id, target));
            state.nodes.get(&target).filter(|_| !cut).cloned()
        };
        Box::pin(async move {
            let handler = handler.ok_or_else(|| TimeoutNowError::Unreachable {
                reason: format!("node {target} is unreachable"),
            })?;
            Ok(handler.timeout_now(request).await?)
        })
    }
}
