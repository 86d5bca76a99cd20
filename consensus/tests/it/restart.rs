//! Stopping every node and reopening the same directories loses no committed write and keeps
//! their order.

use crate::cluster::{put, Cluster};

/// A full-cluster restart brings back every committed write, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_restart_keeps_every_committed_write() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;

    tracing::info!("--- commit twenty writes; `order` is overwritten each time");
    for index in 0..20 {
        put(cluster.node(leader), &format!("key-{index}"), &index.to_string()).await?;
        put(cluster.node(leader), "order", &index.to_string()).await?;
    }

    tracing::info!("--- stop all three, then reopen them from the same directories");
    cluster.stop_all().await?;
    for id in [1, 2, 3] {
        cluster.open(id).await?;
    }
    for id in [1, 2, 3] {
        // A restarted node never re-initializes; bootstrap is a no-op.
        cluster.node(id).bootstrap().await?;
    }

    tracing::info!("--- every node has every write, and the last overwrite wins");
    cluster.converge().await?;
    for (id, state) in cluster.states() {
        for index in 0..20 {
            assert_eq!(
                state.get(&format!("key-{index}")),
                Some(index.to_string().as_str()),
                "node {id}"
            );
        }
        assert_eq!(state.get("order"), Some("19"), "node {id} applied the writes in order");
    }
    cluster.stop_all().await
}
