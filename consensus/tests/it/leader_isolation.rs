//! A leader cut off from the majority cannot commit; the majority moves on; after healing the
//! old leader steps down and converges to the majority's state.

use consensus::WriteError;
use openraft::ServerState;

use crate::cluster::{put, Cluster};

/// An isolated leader's write fails; a new leader commits; the old one rejoins as follower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolated_leader_cannot_commit_and_steps_down() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let old_leader = cluster.leader().await?;
    put(cluster.node(old_leader), "before", "1").await?;

    tracing::info!("--- cut the leader off from both followers: its write cannot commit");
    cluster.router.isolate(old_leader, &cluster.ids());
    let lost = put(cluster.node(old_leader), "lost", "1").await;
    assert!(
        matches!(lost, Err(WriteError::Timeout { .. } | WriteError::ForwardToLeader { .. })),
        "an isolated leader must not commit: {lost:?}"
    );

    tracing::info!("--- the majority elects a new leader and commits");
    let majority: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != old_leader).collect();
    let new_leader = cluster.leader_among(&majority).await?;
    put(cluster.node(new_leader), "after", "2").await?;

    tracing::info!("--- after healing, the old leader follows the new one and converges");
    cluster.router.heal();
    let term = cluster.node(new_leader).metrics().borrow().current_term;
    cluster
        .wait_for(old_leader, "step down", |m| {
            m.state == ServerState::Follower
                && m.current_leader == Some(new_leader)
                && m.current_term >= term
        })
        .await?;
    cluster.converge().await?;
    let states = cluster.states();
    let expected = &states[&new_leader];
    assert_eq!(expected.get("after"), Some("2"));
    assert_eq!(expected.get("lost"), None, "the isolated write was never committed");
    for (id, state) in &states {
        assert_eq!(state, expected, "node {id} converged");
    }
    cluster.stop_all().await
}
