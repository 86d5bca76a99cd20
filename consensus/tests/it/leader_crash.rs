//! A crashed leader is replaced; what it committed survives; the group keeps committing.

use std::time::Duration;

use crate::cluster::{put, Cluster};

/// Killing the leader elects a new one with every committed write, and new writes commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_leader_keeps_committed_writes() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let old_leader = cluster.leader().await?;

    tracing::info!("--- commit five writes, then kill the leader");
    for index in 0..5 {
        put(cluster.node(old_leader), &format!("before-{index}"), "x").await?;
    }
    cluster.stop(old_leader).await?;

    tracing::info!("--- the survivors elect a new leader that has every committed write");
    let survivors = cluster.ids();
    let new_leader = cluster.leader_among(&survivors).await?;
    assert_ne!(new_leader, old_leader);
    cluster.node(new_leader).ensure_linearizable().await?;
    for index in 0..5 {
        let value = cluster
            .node(new_leader)
            .read(|state| state.get(&format!("before-{index}")).map(str::to_string));
        assert_eq!(value.as_deref(), Some("x"), "before-{index} survived the crash");
    }

    tracing::info!("--- new writes commit on the two survivors");
    for index in 0..5 {
        tokio::time::timeout(
            Duration::from_secs(10),
            put(cluster.node(new_leader), &format!("after-{index}"), "y"),
        )
        .await??;
    }
    cluster.converge().await?;
    for (id, state) in cluster.states() {
        assert_eq!(state.entries().len(), 10, "node {id} has all ten keys");
    }
    cluster.stop_all().await
}
