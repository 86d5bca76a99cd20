//! A follower with the longer log steps up when a candidate with a shorter log asks for its
//! vote after the leader went silent (`consensus/src/step_up.rs`).

use crate::cluster::{put, Cluster};

/// The leader dies after replicating its last write to one follower only. The other follower
/// campaigns and is refused; the follower with the write, whose own election timer is switched
/// off, must step up: without it the group would have no leader at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn longer_log_follower_steps_up_for_a_refused_candidate() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;
    let followers: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
    let (longer, shorter) = (followers[0], followers[1]);
    cluster.node(longer).enable_elections(false);

    tracing::info!(leader, longer, shorter, "--- a write that reaches `longer` only");
    put(cluster.node(leader), "both", "1").await?;
    cluster.converge().await?;
    cluster.router.cut(leader, shorter);
    put(cluster.node(leader), "longer-only", "2").await?;
    cluster.stop(leader).await?;

    tracing::info!("--- `shorter` campaigns and is refused; `longer` steps up");
    let new_leader = cluster.leader_among(&followers).await?;
    assert_eq!(new_leader, longer, "only the follower with every committed write can lead");
    cluster.node(longer).ensure_linearizable().await?;
    put(cluster.node(longer), "after", "3").await?;
    cluster.converge().await?;
    for (id, state) in cluster.states() {
        for key in ["both", "longer-only", "after"] {
            assert!(state.get(key).is_some(), "node {id} has `{key}`");
        }
    }
    cluster.stop_all().await
}

/// While the leader is alive, a follower that refuses a shorter-log candidate does not step up:
/// the leader's heartbeats keep it from campaigning, so the term stays and the leader leads on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_leader_is_not_disturbed_by_step_up() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;
    let followers: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
    let (listener, candidate) = (followers[0], followers[1]);
    let term = cluster.node(leader).term();

    tracing::info!(leader, candidate, "--- `candidate` misses a write, then campaigns");
    cluster.router.cut(leader, candidate);
    put(cluster.node(leader), "missed", "1").await?;
    cluster.converge_among(&[leader, listener]).await?;
    cluster.node(candidate).raft().trigger().elect().await?;
    cluster.wait_for(candidate, "a campaign", |metrics| metrics.current_term > term).await?;

    tracing::info!("--- `listener` refuses it and, hearing the leader, stays a follower");
    // Several heartbeats and a whole lease: time for a wrong step-up to show.
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    assert_eq!(cluster.node(listener).term(), term, "the listener never campaigned");
    assert!(cluster.node(leader).is_leader(), "the leader still leads");
    put(cluster.node(leader), "after", "2").await?;
    cluster.stop_all().await
}
