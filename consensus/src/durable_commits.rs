//! The network gate of `durable_log`: an AppendEntries leaves the leader announcing no commit
//! (`leader_commit`) beyond what is durable in the leader's own log, so no follower applies an
//! entry, or snapshots it, while the leader's copy may still be lost. It leaves at once, with
//! the commit lowered to the durable log id: waiting instead held every heartbeat while the
//! leader's disk stalled, and a stall longer than an election timeout (~300 ms) deposed a
//! leader that was fine. Wraps whatever network the node runs on (gRPC, the tests' router,
//! the simulation's), so all of them keep the rule.

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, LogId};

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

/// The commit an AppendEntries may announce: the leader's, lowered to what is durable here.
/// Both are log ids of the leader's own log, which orders them as it orders their indexes.
/// The followers learn the rest from a later AppendEntries (the next heartbeat at the latest).
fn announced(leader_commit: Option<LogId<u64>>, durable: Option<LogId<u64>>) -> Option<LogId<u64>> {
    leader_commit.min(durable)
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<u64, BasicNode, RaftError<u64, E>>>;

impl<C: RaftNetwork<TypeConfig>> RaftNetwork<TypeConfig> for DurableCommitsConnection<C> {
    async fn append_entries(
        &mut self,
        request: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<u64>> {
        let mut request = request;
        match self.durable.durable_now() {
            Ok(durable) => request.leader_commit = announced(request.leader_commit, durable),
            Err(reason) => {
                // A network error, not `Unreachable`: the follower is fine, and openraft's
                // backoff after `Unreachable` races its timer against new events in an
                // unbiased `select!`, which the simulation cannot replay. openraft sends again
                // at once, for ever, which is why a failed flush stops the core
                // (`node::stop_on_failed_flush`); meanwhile the followers hear no heartbeat
                // and elect a leader whose disk works.
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
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use openraft::error::Unreachable;
    use openraft::{CommittedLeaderId, LogId, Vote};

    use super::*;
    use crate::DurableLog;

    /// Records the commit each AppendEntries that reaches the wire announces, and answers
    /// each with success.
    struct Wire {
        announced: Arc<Mutex<Vec<Option<u64>>>>,
    }

    impl RaftNetwork<TypeConfig> for Wire {
        async fn append_entries(
            &mut self,
            request: AppendEntriesRequest<TypeConfig>,
            _option: RPCOption,
        ) -> RpcResult<AppendEntriesResponse<u64>> {
            let commit = request.leader_commit.map(|log_id| log_id.index);
            self.announced.lock().expect("no sender panics holding it").push(commit);
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

    fn log_id(index: u64) -> LogId<u64> {
        LogId::new(CommittedLeaderId::new(2, 1), index)
    }

    /// Whatever the leader's disk does, an AppendEntries (a heartbeat here) leaves at once,
    /// announcing the leader's commit lowered to what is durable on the leader, never more;
    /// only a log whose flush failed sends nothing, as a network error (openraft sends again
    /// at once; `Unreachable` would start a backoff the simulation cannot replay). Each row:
    /// the durable index (none: a stalled first flush), the leader's commit, whether a flush
    /// failed, and the commit announced on the wire (`Err` if refused).
    #[tokio::test(start_paused = true)]
    async fn an_append_leaves_at_once_announcing_only_the_durable_commit() {
        type Row = (Option<u64>, Option<u64>, bool, Result<Option<u64>, ()>);
        let rows: [Row; 6] = [
            (None, None, false, Ok(None)),
            (Some(5), Some(5), false, Ok(Some(5))),
            (Some(7), Some(5), false, Ok(Some(5))),
            (Some(3), Some(5), false, Ok(Some(3))),
            (None, Some(5), false, Ok(None)),
            (Some(5), Some(5), true, Err(())),
        ];
        for (durable_index, commit, failed, expected) in rows {
            let announced = Arc::new(Mutex::new(Vec::new()));
            let durable = DurableLog::new(durable_index.map(log_id));
            if failed {
                durable.failed(&std::io::Error::other("EIO"));
            }
            let mut connection = DurableCommitsConnection {
                inner: Wire { announced: Arc::clone(&announced) },
                durable: durable.watch(),
            };
            let vote = Vote::new_committed(2, 1);
            let leader_commit = commit.map(log_id);
            let heartbeat = AppendEntriesRequest {
                vote,
                prev_log_id: None,
                entries: Vec::new(),
                leader_commit,
            };
            let option = RPCOption::new(Duration::from_secs(60));
            let sent = connection.append_entries(heartbeat, option).await;
            let row = format!("durable {durable_index:?}, commit {commit:?}, failed {failed}");
            let wire = announced.lock().expect("no sender panics holding it").clone();
            match expected {
                Ok(expected) => {
                    assert!(sent.is_ok(), "{row}: {sent:?}");
                    assert_eq!(wire, vec![expected], "{row}");
                }
                Err(()) => {
                    assert!(matches!(sent, Err(RPCError::Network(_))), "{row}: {sent:?}");
                    assert!(wire.is_empty(), "{row}: sent from a failed log");
                }
            }
        }
    }
}
