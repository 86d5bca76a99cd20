//! A forged Raft message whose term (or log id, or snapshot offset) would overflow or is absurdly
//! far ahead is refused before openraft sees it: the node's term, vote and leader do not move,
//! and the group keeps committing. Through the `RpcHandler` (as the in-memory router delivers)
//! and through the gRPC service with a raw tonic client.

use platform::security::Security;
use std::collections::BTreeMap;

use bincode::Options;
use consensus::kv::KvStore;
use consensus::network::{endpoint, raft_client};
use consensus::{ConsensusNode, Metrics, RpcHandler, TypeConfig};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{CommittedLeaderId, LeaderId, LogId, SnapshotMeta, Vote};
use proto::raft::RaftRequest;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::cluster::{put, test_config, Cluster};

/// What a forged message must not change.
fn seen(metrics: &Metrics) -> (u64, Vote<u64>, Option<u64>) {
    (metrics.current_term, metrics.vote, metrics.current_leader)
}

fn forged_vote(term: u64) -> Vote<u64> {
    Vote { leader_id: LeaderId::new(term, 99), committed: true }
}

fn vote_request(term: u64) -> VoteRequest<u64> {
    let last_log_id = Some(LogId::new(CommittedLeaderId::new(term, 99), 1_000_000));
    VoteRequest { vote: Vote::new(term, 99), last_log_id }
}

fn append_request(term: u64) -> AppendEntriesRequest<TypeConfig> {
    AppendEntriesRequest {
        vote: forged_vote(term),
        prev_log_id: None,
        entries: Vec::new(),
        leader_commit: None,
    }
}

fn install_request(term: u64, offset: u64) -> InstallSnapshotRequest<TypeConfig> {
    let meta = SnapshotMeta {
        last_log_id: Some(LogId::new(CommittedLeaderId::new(term, 99), 10)),
        last_membership: Default::default(),
        snapshot_id: "forged".to_string(),
    };
    InstallSnapshotRequest { vote: forged_vote(term), meta, offset, data: vec![1; 16], done: false }
}

/// Every kind of forged request, built from the target's current term.
async fn send_forged(handler: &RpcHandler, term: u64) {
    for forged in [u64::MAX, u64::MAX - 1, term + (1 << 20) + 1] {
        let vote = handler.vote(vote_request(forged)).await;
        assert!(vote.is_err(), "a vote of term {forged} is refused: {vote:?}");
        let append = handler.append_entries(append_request(forged)).await;
        assert!(append.is_err(), "an append of term {forged} is refused: {append:?}");
        let install = handler.install_snapshot(install_request(forged, 0)).await;
        assert!(install.is_err(), "a snapshot of term {forged} is refused: {install:?}");
    }
    let far = handler.install_snapshot(install_request(term, u64::MAX - 4)).await;
    assert!(far.is_err(), "a chunk at an overflowing offset is refused: {far:?}");
}

/// Forged requests to the leader and a follower through their handlers change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_terms_are_refused_by_the_rpc_handler() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;
    put(cluster.node(leader), "before", "1").await?;
    cluster.converge().await?;
    let follower = cluster.ids().into_iter().find(|id| *id != leader).expect("three nodes");

    for target in [follower, leader] {
        tracing::info!(target, "--- forged votes, appends and snapshots");
        let before = seen(&cluster.node(target).metrics().borrow());
        send_forged(&cluster.node(target).rpc_handler(), before.0).await;
        let after = seen(&cluster.node(target).metrics().borrow());
        assert_eq!(after, before, "node {target}: term, vote and leader unchanged");
    }

    tracing::info!("--- the same leader keeps committing");
    put(cluster.node(leader), "after", "2").await?;
    cluster.converge().await?;
    assert_eq!(cluster.leader().await?, leader);
    cluster.stop_all().await
}

fn encode<T: serde::Serialize>(value: &T) -> anyhow::Result<RaftRequest> {
    let options = bincode::DefaultOptions::new().with_fixint_encoding();
    Ok(RaftRequest { payload: options.serialize(value)?.into() })
}

fn decode<T: serde::de::DeserializeOwned>(payload: &[u8]) -> anyhow::Result<T> {
    Ok(bincode::DefaultOptions::new().with_fixint_encoding().deserialize(payload)?)
}

/// A raw gRPC client sending forged requests to a one-node group gets refusals, and the node
/// keeps its term, vote and leadership and keeps committing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_terms_are_refused_over_grpc() -> anyhow::Result<()> {
    crate::init_tracing();
    let root = tempfile::tempdir()?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    let peers = BTreeMap::from([(1, addr.clone())]);
    let node =
        ConsensusNode::open(test_config(1, &peers, root.path().join("d1")), KvStore::default())
            .await?;
    let (stop, stopped) = oneshot::channel::<()>();
    let server =
        tokio::spawn(consensus::serve(listener, node.clone(), Default::default(), async move {
            let _ = stopped.await;
        }));
    node.bootstrap().await?;
    node.raft()
        .wait(Some(std::time::Duration::from_secs(10)))
        .current_leader(1, "the one node leads")
        .await?;
    node.ensure_linearizable().await?;
    put(&node, "before", "1").await?;
    let before = seen(&node.metrics().borrow());

    tracing::info!("--- forged Vote and AppendEntries over gRPC are answered with an error");
    let mut client = raft_client(endpoint(&Security::default(), &addr)?.connect().await?.into());
    for forged in [u64::MAX, before.0 + (1 << 20) + 1] {
        let reply = client.vote(encode(&vote_request(forged))?).await?.into_inner();
        let vote: Result<VoteResponse<u64>, RaftError<u64>> = decode(&reply.payload)?;
        assert!(vote.is_err(), "refused: {vote:?}");
        let reply = client.append_entries(encode(&append_request(forged))?).await?.into_inner();
        let append: Result<AppendEntriesResponse<u64>, RaftError<u64>> = decode(&reply.payload)?;
        assert!(append.is_err(), "refused: {append:?}");
        let reply = client.install_snapshot(encode(&install_request(forged, 0))?).await?;
        let install: Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>> =
            decode(&reply.into_inner().payload)?;
        assert!(install.is_err(), "refused: {install:?}");
    }
    assert_eq!(seen(&node.metrics().borrow()), before, "term, vote and leader unchanged");

    tracing::info!("--- a forged append on the append stream is refused, garbage ends the stream");
    let (requests, receiver) = tokio::sync::mpsc::channel(4);
    let stream = tokio_stream::wrappers::ReceiverStream::new(receiver);
    let mut replies = client.append_entries_stream(stream).await?.into_inner();
    requests.send(encode(&append_request(u64::MAX))?).await?;
    let reply = replies.message().await?.expect("the forged append is answered");
    let append: Result<AppendEntriesResponse<u64>, RaftError<u64>> = decode(&reply.payload)?;
    assert!(append.is_err(), "refused: {append:?}");
    requests.send(RaftRequest { payload: vec![0xff; 7].into() }).await?;
    let garbage = replies.message().await.expect_err("garbage fails the stream");
    assert_eq!(garbage.code(), tonic::Code::InvalidArgument, "{garbage:?}");
    assert_eq!(seen(&node.metrics().borrow()), before, "term, vote and leader unchanged");

    tracing::info!("--- the node still leads and commits");
    node.ensure_linearizable().await?;
    put(&node, "after", "2").await?;

    tracing::info!("--- a stream the leader still holds ends when the server stops");
    let (_held, receiver) = tokio::sync::mpsc::channel(1);
    let stream = tokio_stream::wrappers::ReceiverStream::new(receiver);
    let mut replies = client.append_entries_stream(stream).await?.into_inner();
    let _ = stop.send(());
    // Without the stream's end, the graceful stop would wait for it for ever.
    tokio::time::timeout(std::time::Duration::from_secs(60), server).await???;
    assert!(replies.message().await?.is_none(), "the stream ended without an error");
    node.shutdown().await?;
    Ok(())
}
