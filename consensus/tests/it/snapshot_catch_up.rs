//! A follower that missed entries the leader has since purged catches up by installing the
//! leader's snapshot.

use std::fs;

use openraft::ServerState;

use crate::cluster::{put, Cluster};

/// After a snapshot and purge, a lagging follower receives the snapshot and converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_follower_installs_a_snapshot() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| consensus::NodeConfig {
        snapshot_logs_since_last: 50,
        max_in_snapshot_log_to_keep: 0,
        ..config
    })
    .await?;
    let leader = cluster.leader().await?;
    let lagging = cluster.ids().into_iter().find(|id| *id != leader).expect("three nodes");

    tracing::info!("--- cut one follower off while the others commit and purge 200 entries");
    cluster.router.isolate(lagging, &cluster.ids());
    for index in 0..200 {
        put(cluster.node(leader), &format!("key-{index}"), "v").await?;
    }
    let lagging_index = cluster.node(lagging).metrics().borrow().last_log_index.unwrap_or(0);
    cluster
        .wait_for(leader, "a purge past the lagging follower", |m| {
            m.purged.is_some_and(|purged| purged.index > lagging_index)
        })
        .await?;

    tracing::info!("--- heal: the follower can only catch up from the snapshot");
    cluster.router.heal();
    cluster.wait_for(lagging, "follow the leader", |m| m.state == ServerState::Follower).await?;
    cluster.converge().await?;
    assert!(
        cluster.router.snapshot_chunks_delivered(lagging) > 0,
        "the follower received a snapshot"
    );
    let metrics = cluster.node(lagging).metrics().borrow().clone();
    assert!(metrics.snapshot.is_some(), "the follower has a snapshot: {metrics:?}");
    let states = cluster.states();
    assert_eq!(states[&lagging], states[&leader]);
    assert_eq!(states[&lagging].entries().len(), 200);

    tracing::info!("--- at most two snapshot files are kept");
    for id in cluster.ids() {
        let files = fs::read_dir(cluster.data_dir(id).join("snapshots"))?.count();
        assert!(files <= 2, "node {id} keeps {files} snapshot files");
    }
    cluster.stop_all().await
}
