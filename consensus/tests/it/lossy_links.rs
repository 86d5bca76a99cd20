//! Writes commit while one follower's link is slow and the other's replies are lost, and the
//! group converges once the links heal.

use std::time::Duration;

use crate::cluster::{put, Cluster};

/// A slow link and a one-way cut slow the group down but do not lose or reorder writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_commit_over_slow_and_lossy_links() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;
    let followers: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();

    tracing::info!("--- delay the leader's messages to one follower; drop the other's replies");
    cluster.router.delay(leader, followers[0], Duration::from_millis(30));
    cluster.router.cut(followers[1], leader);
    for index in 0..10 {
        put(cluster.node(leader), "key", &index.to_string()).await?;
    }

    tracing::info!("--- after healing, every node has the last write");
    cluster.router.heal();
    cluster.converge().await?;
    for (id, state) in cluster.states() {
        assert_eq!(state.get("key"), Some("9"), "node {id}");
    }
    cluster.stop_all().await
}
