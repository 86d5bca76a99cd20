//! The network gate of `durable_log`: an AppendEntries leaves the leader only once the commit
//! it announces (`leader_commit`) is durable in the leader's own log, so no follower applies an
//! entry, or snapshots it, while the leader's copy may still be lost. Wraps whatever network
//! the node runs on (gRPC, the tests' router, the simulation's), so all of them keep the rule.

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;

use crate::durable_log::DurableWatch;
use crate::TypeConfig;

/// A network factory whose connections hold back AppendEntries until their commit is durable.
pub(crate) struct DurableCommits<N> {
    inner: N,
    durable: DurableWatch,
}

impl<N> DurableCommits<N> {
    pub(crate) fn new(inner: N, durable: DurableWatch) -> Self {
        Self { inner, durable }
    }
}

impl<N: RaftNetworkFactory<TypeConfig>> RaftNetworkFactory<TypeConfig> for DurableCommits<N> {
    type Network = DurableCommitsConnection<N::Network>;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Self::Network {
        let inner = self.inner.new_client(target, node).await;
        DurableCommitsConnection { inner, durable: self.durable.clone() }
    }
}

/// One connection of [`DurableCommits`].
pub(crate) struct DurableCommitsConnection<C> {
    inner: C,
    durable: DurableWatch,
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<u64, BasicNode, RaftError<u64, E>>>;

impl<C: RaftNetwork<TypeConfig>> RaftNetwork<TypeConfig> for DurableCommitsConnection<C> {
    async fn append_entries(
        &mut self,
        request: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<u64>> {
        if let Some(commit) = request.leader_commit {
            // Normally long done: the commit waited for a follower's answer while the leader
            // flushed. Bounded like the RPC itself; openraft retries a failed one.
            let durable = self.durable.covers(commit);
            let waited = tokio::time::timeout(option.hard_ttl(), durable).await;
            let reason = match waited {
                Ok(Ok(())) => None,
                Ok(Err(reason)) => Some(reason),
                Err(_elapsed) => Some(format!("the commit {commit} is not durable here yet")),
            };
            if let Some(reason) = reason {
                // A network error, not `Unreachable`: the follower is fine, and openraft's
                // backoff after `Unreachable` races its timer against new events in an
                // unbiased `select!`, which the simulation cannot replay. openraft sends again
                // at once: after a timed-out wait that is one RPC time later; after a failed
                // flush it would be at once for ever, which is why a failed flush stops the
                // core (`node::stop_on_failed_flush`).
                return Err(RPCError::Network(NetworkError::new(&std::io::Error::other(reason))));
            }
        }
        self.inner.append_entries(request, option).await
    }

    async fn install_snapshot(
        &mut self,
        request: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, InstallSnapshotError> {
        self.inner.install_snapshot(request, option).await
    }

    async fn vote(
        &mut self,
        request: VoteRequest<u64>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<u64>> {
        self.inner.vote(request, option).await
    }

    fn backoff(&self) -> Backoff {
        self.inner.backoff()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use openraft::error::Unreachable;
    use openraft::{CommittedLeaderId, LogId, Vote};

    use super::*;
    use crate::DurableLog;

    /// Counts the AppendEntries that reach the wire and answers each with success.
    struct Wire {
        sent: Arc<AtomicUsize>,
    }

    impl RaftNetwork<TypeConfig> for Wire {
        async fn append_entries(
            &mut self,
            _request: AppendEntriesRequest<TypeConfig>,
            _option: RPCOption,
        ) -> RpcResult<AppendEntriesResponse<u64>> {
            self.sent.fetch_add(1, Ordering::SeqCst);
            Ok(AppendEntriesResponse::Success)
        }

        async fn install_snapshot(
            &mut self,
            _request: InstallSnapshotRequest<TypeConfig>,
            _option: RPCOption,
        ) -> RpcResult<InstallSnapshotResponse<u64>, InstallSnapshotError> {
            Err(RPCError::Unreachable(Unreachable::new(&std::io::Error::other("not in this test"))))
        }

        async fn vote(
            &mut self,
            _request: VoteRequest<u64>,
            _option: RPCOption,
        ) -> RpcResult<VoteResponse<u64>> {
            Err(RPCError::Unreachable(Unreachable::new(&std::io::Error::other("not in this test"))))
        }
    }

    fn append(leader_commit: Option<LogId<u64>>) -> AppendEntriesRequest<TypeConfig> {
        let vote = Vote::new_committed(2, 1);
        AppendEntriesRequest { vote, prev_log_id: None, entries: Vec::new(), leader_commit }
    }

    /// An AppendEntries announcing a commit that is not durable on the leader waits for the
    /// flush that covers it; one announcing nothing new goes at once.
    #[tokio::test]
    async fn a_commit_is_announced_only_once_durable_here() {
        let sent = Arc::new(AtomicUsize::new(0));
        let durable = DurableLog::new(None);
        let mut connection = DurableCommitsConnection {
            inner: Wire { sent: Arc::clone(&sent) },
            durable: durable.watch(),
        };
        let option = || RPCOption::new(Duration::from_secs(60));
        connection.append_entries(append(None), option()).await.expect("nothing to wait for");
        assert_eq!(sent.load(Ordering::SeqCst), 1);

        let commit = LogId::new(CommittedLeaderId::new(2, 1), 5);
        let held =
            tokio::spawn(
                async move { connection.append_entries(append(Some(commit)), option()).await },
            );
        tokio::task::yield_now().await;
        assert_eq!(sent.load(Ordering::SeqCst), 1, "entry 5 is not durable: nothing sent");
        durable.flushed(commit);
        held.await.expect("the task runs").expect("sent once durable");
        assert_eq!(sent.load(Ordering::SeqCst), 2);
    }

    /// An AppendEntries whose commit is still not durable when the RPC's time is up fails as a
    /// network error, which openraft sends again at once, not as `Unreachable`, whose
    /// backoff the simulation cannot replay; nothing reaches the wire.
    #[tokio::test(start_paused = true)]
    async fn a_commit_not_durable_in_time_fails_without_backoff() {
        let sent = Arc::new(AtomicUsize::new(0));
        let durable = DurableLog::new(None);
        let mut connection = DurableCommitsConnection {
            inner: Wire { sent: Arc::clone(&sent) },
            durable: durable.watch(),
        };
        let commit = LogId::new(CommittedLeaderId::new(2, 1), 5);
        let option = RPCOption::new(Duration::from_secs(1));
        let failed = connection.append_entries(append(Some(commit)), option).await;
        assert!(matches!(failed, Err(RPCError::Network(_))), "{failed:?}");
        assert_eq!(sent.load(Ordering::SeqCst), 0);
    }
}
