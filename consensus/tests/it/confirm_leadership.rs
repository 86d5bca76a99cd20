//! `confirm_leadership` answers with the term while a quorum follows the leader, is answered
//! from its cache by concurrent callers, and a leader cut off from the majority stops
//! confirming once its last confirmation is older than the bound.

use consensus::WriteError;

use crate::cluster::Cluster;

/// A healthy leader confirms its term, followers refuse, and an isolated leader refuses at the
/// latest one bound after it was cut off (its last confirmation was sent before the cut).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_stops_confirming_within_the_bound() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;
    let node = cluster.node(leader).clone();

    tracing::info!("--- a healthy leader confirms its term, also to many callers at once");
    let term = node.confirm_leadership().await?;
    assert_eq!(term, node.term());
    let callers: Vec<_> = (0..16)
        .map(|_| {
            let node = node.clone();
            tokio::spawn(async move { node.confirm_leadership().await })
        })
        .collect();
    for caller in callers {
        assert_eq!(caller.await?, Ok(term));
    }

    tracing::info!("--- a follower never confirms");
    let follower = cluster.ids().into_iter().find(|id| *id != leader).expect("three nodes");
    let refused = cluster.node(follower).confirm_leadership().await;
    assert!(matches!(refused, Err(WriteError::ForwardToLeader { .. })), "{refused:?}");

    tracing::info!("--- cut off, the leader refuses once its last confirmation is a bound old");
    cluster.router.isolate(leader, &cluster.ids());
    tokio::time::sleep(node.leadership_fresh_for()).await;
    let deposed = node.confirm_leadership().await;
    assert!(deposed.is_err(), "an isolated leader must not confirm: {deposed:?}");
    assert_eq!(node.term(), term, "it still believes it leads in the same term");

    tracing::info!("--- healed, the leader of the group (whoever it is) confirms again");
    cluster.router.heal();
    let leader = cluster.leader().await?;
    let term = cluster.node(leader).confirm_leadership().await?;
    assert_eq!(term, cluster.node(leader).term());
    cluster.stop_all().await
}
