//! A member that lost its disk and comes back under its old id on an empty directory broke
//! Raft's promise: entries committed with its acknowledgement are no longer on it. It must not
//! lend its vote to a candidate that lacks them, or a leader's crash would lose them; once a
//! leader has caught it up it votes as before.

use std::time::Duration;

use crate::cluster::{put, Cluster};

/// How long the two survivors get to elect a leader that must not exist: several election
/// timeouts (400 to 800 ms).
const NO_LEADER_WATCH: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_back_on_an_empty_disk_votes_for_no_one_until_caught_up() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;
    let others: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
    let (acked, behind) = (others[0], others[1]);

    tracing::info!("--- {behind} is cut off; five writes commit with {acked}'s acknowledgement");
    cluster.router.isolate(behind, &cluster.ids());
    for index in 0..5 {
        put(cluster.node(leader), &format!("key-{index}"), "x").await?;
    }

    tracing::info!("--- {acked} loses its disk, the leader {leader} crashes, {behind} is back");
    cluster.stop(acked).await?;
    std::fs::remove_dir_all(cluster.data_dir(acked))?;
    cluster.stop(leader).await?;
    cluster.router.heal();
    cluster.open(acked).await?;
    cluster.node(acked).bootstrap().await?;
    tokio::time::sleep(NO_LEADER_WATCH).await;
    for id in [acked, behind] {
        assert!(
            !cluster.is_leader_state(id),
            "node {id} leads with the vote of a member that lost its disk: the five committed \
             writes are gone from the group"
        );
    }

    tracing::info!("--- the old leader returns: every member holds the five writes");
    cluster.open(leader).await?;
    cluster.converge().await?;
    for (id, state) in cluster.states() {
        assert_eq!(state.entries().len(), 5, "node {id} holds every committed write");
    }

    tracing::info!(
        "--- caught up, {acked} votes again: without {leader}, it and {behind} elect a leader"
    );
    cluster.stop(leader).await?;
    let survivors = cluster.ids();
    let next = cluster.leader_among(&survivors).await?;
    tokio::time::timeout(Duration::from_secs(10), put(cluster.node(next), "after", "y")).await??;
    cluster.converge().await?;
    cluster.stop_all().await
}
