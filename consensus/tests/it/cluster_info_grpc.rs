//! Three nodes over the real tonic network: a follower redirects writes to the leader's
//! address, and `ClusterInfo` over gRPC reports the leader, the term and every member.

use platform::security::Security;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use consensus::kv::KvStore;
use consensus::network::{endpoint, raft_client};
use consensus::{ClusterInfo, ConsensusNode, Role, WriteError};
use proto::raft::{ClusterInfoRequest, RaftRequest};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::cluster::{put, test_config, Node};

struct GrpcNode {
    node: Node,
    stop: oneshot::Sender<()>,
    server: JoinHandle<anyhow::Result<()>>,
}

/// Writes, redirects and cluster information work over gRPC, and garbage is rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_redirects_and_cluster_info_over_grpc() -> anyhow::Result<()> {
    crate::init_tracing();
    let root = tempfile::tempdir()?;
    tracing::info!("--- bind three ports, open three nodes on the tonic network, serve them");
    let (peers, nodes) = start_group(root.path()).await?;
    for grpc in nodes.values() {
        grpc.node.bootstrap().await?;
    }

    tracing::info!("--- a leader is elected and commits over the network");
    let leader = wait_for_leader(&nodes).await?;
    put(&nodes[&leader].node, "key", "v").await?;
    let follower = *nodes.keys().find(|id| **id != leader).expect("three nodes");

    tracing::info!("--- a write on a follower names the leader and its address");
    let error = put(&nodes[&follower].node, "key", "w").await.err();
    assert_eq!(
        error,
        Some(WriteError::ForwardToLeader {
            leader_id: Some(leader),
            leader_addr: Some(peers[&leader].clone())
        })
    );

    tracing::info!("--- ClusterInfo over gRPC from the follower");
    let mut client =
        raft_client(endpoint(&Security::default(), &peers[&follower])?.connect().await?.into());
    let reply = client.cluster_info(ClusterInfoRequest::default()).await?.into_inner();
    let info = ClusterInfo::from(&reply);
    assert_eq!(info.node_id, follower);
    assert_eq!(info.leader_id, Some(leader));
    assert_eq!(info.leader_addr.as_deref(), Some(peers[&leader].as_str()));
    assert!(info.term >= 1);
    let roles: BTreeMap<u64, (String, Role)> =
        info.members.iter().map(|member| (member.id, (member.addr.clone(), member.role))).collect();
    assert_eq!(roles.len(), 3);
    for (id, (addr, role)) in &roles {
        assert_eq!(addr, &peers[id]);
        let expected = if *id == leader { Role::Leader } else { Role::Follower };
        assert_eq!(*role, expected, "member {id}");
    }

    tracing::info!("--- a garbage payload is INVALID_ARGUMENT, and the node keeps serving");
    let garbage = RaftRequest { payload: vec![0xff; 64].into() };
    let status = client.append_entries(garbage).await.err().map(|status| status.code());
    assert_eq!(status, Some(tonic::Code::InvalidArgument));
    client.cluster_info(ClusterInfoRequest::default()).await?;

    tracing::info!("--- stop servers and nodes");
    for (_, grpc) in nodes {
        let _ = grpc.stop.send(());
        grpc.server.await??;
        grpc.node.shutdown().await?;
    }
    Ok(())
}

/// Binds three loopback ports, opens a node per port on the tonic network and serves it.
async fn start_group(
    root: &Path,
) -> anyhow::Result<(BTreeMap<u64, String>, BTreeMap<u64, GrpcNode>)> {
    let mut listeners = BTreeMap::new();
    for id in 1..=3u64 {
        listeners.insert(id, TcpListener::bind("127.0.0.1:0").await?);
    }
    let peers: BTreeMap<u64, String> = listeners
        .iter()
        .map(|(id, listener)| Ok((*id, listener.local_addr()?.to_string())))
        .collect::<anyhow::Result<_>>()?;
    let mut nodes = BTreeMap::new();
    for (id, listener) in listeners {
        let config = test_config(id, &peers, root.join(format!("d{id}")));
        let node = ConsensusNode::open(config, KvStore::default()).await?;
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(consensus::serve(
            listener,
            node.clone(),
            Default::default(),
            async move {
                let _ = stopped.await;
            },
        ));
        nodes.insert(id, GrpcNode { node, stop, server });
    }
    Ok((peers, nodes))
}

async fn wait_for_leader(nodes: &BTreeMap<u64, GrpcNode>) -> anyhow::Result<u64> {
    for _ in 0..500 {
        let leaders: Vec<Option<u64>> =
            nodes.values().map(|grpc| grpc.node.cluster_info().leader_id).collect();
        if let Some(Some(leader)) = leaders.first() {
            if leaders.iter().all(|other| other == &Some(*leader)) && nodes[leader].node.is_leader()
            {
                return Ok(*leader);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("no leader elected over gRPC")
}
