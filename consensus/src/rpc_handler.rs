//! What a node does with each incoming Raft RPC: refuse what breaks `rpc_bounds` (a forged or
//! corrupt term must never reach openraft) and the votes [`EmptyLogGuard`] holds back, hand the
//! rest to openraft, and let [`StepUp`] and the guard watch AppendEntries and votes. The gRPC
//! service and the tests' in-memory router both go through here, so the tests exercise the
//! same handling as the wire.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use openraft::error::{Fatal, InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use openraft::{AnyError, ErrorSubject, ErrorVerb, StorageError, StorageIOError};

use crate::empty_log_guard::EmptyLogGuard;
use crate::handoff::{TimeoutNow, TimeoutNowGate};
use crate::rpc_bounds::{self, Refusal};
use crate::step_up::StepUp;
use crate::timeout_now_error::TimeoutNowRefusal;
use crate::{Raft, TypeConfig};

/// The receiving end of the Raft RPCs of one node; cheap to clone.
#[derive(Clone)]
pub struct RpcHandler {
    raft: Raft,
    step_up: Arc<StepUp>,
    timeout_now: Arc<TimeoutNowGate>,
    empty_log: Arc<EmptyLogGuard>,
    /// Turns true when the node's servers stop: the streams they hold open end (the append
    /// streams, `append_stream`; the master's ask streams).
    streams_end: Arc<watch::Sender<bool>>,
}

impl RpcHandler {
    /// The handler of `raft`, whose leader lease (`election_timeout_max`) is `leader_lease`;
    /// once `leaving` is set (the node hands leadership off before it stops) it never steps up
    /// to campaign; `had_vote` says whether its disk held a vote when it opened (see
    /// [`EmptyLogGuard`]). Every transport of the node must share this one handler (clones of it).
    pub(crate) fn new(
        raft: Raft,
        leader_lease: Duration,
        leaving: Arc<AtomicBool>,
        had_vote: bool,
    ) -> Self {
        let step_up = Arc::new(StepUp::new(leader_lease, leaving));
        let empty_log = Arc::new(EmptyLogGuard::new(had_vote));
        if !had_vote {
            tokio::spawn(Arc::clone(&empty_log).release_once_leading(raft.metrics()));
        }
        let streams_end = Arc::new(watch::Sender::new(false));
        Self { raft, step_up, timeout_now: Arc::default(), empty_log, streams_end }
    }

    /// When this node last heard from a leader (for the election timer).
    pub(crate) fn step_up(&self) -> Arc<StepUp> {
        Arc::clone(&self.step_up)
    }

    pub async fn append_entries(
        &self,
        request: AppendEntriesRequest<TypeConfig>,
    ) -> Result<AppendEntriesResponse<u64>, RaftError<u64>> {
        rpc_bounds::check_append(self.own_term(), &request).map_err(refused)?;
        let reaches_commit = self.empty_log.reaches_commit(&request);
        let result = self.raft.append_entries(request).await;
        self.step_up.after_append(&result);
        self.empty_log.after_append(reaches_commit, &result);
        result
    }

    pub async fn vote(
        &self,
        request: VoteRequest<u64>,
    ) -> Result<VoteResponse<u64>, RaftError<u64>> {
        rpc_bounds::check_vote(self.own_term(), &request).map_err(refused)?;
        self.empty_log.check_vote(&request).map_err(refused)?;
        let result = self.raft.vote(request.clone()).await;
        if let Ok(response) = &result {
            self.step_up.after_vote(&self.raft, &request, response);
        }
        result
    }

    pub async fn install_snapshot(
        &self,
        request: InstallSnapshotRequest<TypeConfig>,
    ) -> Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>> {
        rpc_bounds::check_install(self.own_term(), &request).map_err(refused)?;
        self.raft.install_snapshot(request).await
    }

    /// A leader about to stop asks this node to campaign now (see `handoff`); `Err` says why
    /// it did not.
    pub async fn timeout_now(&self, request: TimeoutNow) -> Result<(), TimeoutNowRefusal> {
        self.timeout_now.receive(&self.raft, request).await
    }

    /// The term this node has seen; the vote's term (a candidate's own) counts too.
    fn own_term(&self) -> u64 {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        metrics.current_term.max(metrics.vote.leader_id().term)
    }

    /// Ends every stream this node's servers hold open (after the message in hand), and any
    /// opened later at once. A server's graceful stop waits for its open calls, and a leader
    /// keeps its append stream (a client its ask stream) for seconds, so whatever stops a server
    /// of this node calls this first.
    pub fn end_streams(&self) {
        self.streams_end.send_replace(true);
    }

    /// Turns true when the node's streams must end ([`RpcHandler::end_streams`]).
    pub fn streams_end(&self) -> watch::Receiver<bool> {
        self.streams_end.subscribe()
    }

    /// The node's `Raft` handle (for `ClusterInfo` and metrics).
    pub fn raft(&self) -> &Raft {
        &self.raft
    }
}

/// The reply to a refused request. openraft's RPC replies carry only `RaftError`, whose
/// `Infallible` API error leaves `Fatal` as the one way to say no; the sender's openraft sees a
/// `RemoteError`, which it logs and retries like any failed RPC (it changes nothing there),
/// and the reason travels as the message. Nothing on this node has changed.
fn refused<E: std::error::Error>(refusal: Refusal) -> RaftError<u64, E> {
    tracing::warn!(rpc = refusal.rpc, reason = %refusal.reason, "refused a Raft request");
    let error = AnyError::error(refusal.to_string());
    let io = StorageIOError::new(ErrorSubject::None, ErrorVerb::Read, error);
    RaftError::Fatal(Fatal::StorageError(StorageError::IO { source: io }))
}
