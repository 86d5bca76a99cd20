//! Three nodes elect exactly one leader, and its writes (sequential and concurrent) commit and
//! apply on all three.

use consensus::kv::KvResponse;

use crate::cluster::{put, Cluster};

/// A fresh group elects one leader that all agree on; writes apply identically everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_one_leader_and_replicate() -> anyhow::Result<()> {
    crate::init_tracing();
    tracing::info!("--- bootstrap three nodes");
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;
    let leaders: Vec<u64> =
        cluster.ids().into_iter().filter(|id| cluster.is_leader_state(*id)).collect();
    assert_eq!(leaders, vec![leader], "exactly one node is in the leader state");

    tracing::info!("--- writes through the leader commit and return the previous value");
    for index in 0..10 {
        let response = put(cluster.node(leader), "key", &index.to_string()).await?;
        let previous = (index > 0).then(|| (index - 1).to_string());
        assert_eq!(response, KvResponse::Value(previous));
    }

    tracing::info!("--- 200 concurrent writes share entries; each gets its own response");
    let writes = (0..200).map(|index| {
        let node = cluster.node(leader).clone();
        tokio::spawn(
            async move { put(&node, &format!("concurrent-{index}"), &index.to_string()).await },
        )
    });
    let writes: Vec<_> = writes.collect();
    for write in writes {
        assert_eq!(write.await??, KvResponse::Value(None), "a fresh key has no previous value");
    }
    let entries = cluster.node(leader).metrics().borrow().last_log_index.unwrap_or(0);
    assert!(entries < 200, "200 concurrent writes took {entries} log entries: no batching");

    tracing::info!("--- every node applies the same state");
    cluster.converge().await?;
    for (id, state) in cluster.states() {
        assert_eq!(state.get("key"), Some("9"), "node {id}");
        assert_eq!(state.entries().len(), 201, "node {id}");
        assert_eq!(state.get("concurrent-123"), Some("123"), "node {id}");
    }
    cluster.stop_all().await
}
