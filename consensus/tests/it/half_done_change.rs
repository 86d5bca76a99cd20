//! A membership change is two commits (the joint configuration, then the new one alone) and
//! openraft proposes the second from the caller's future: a leader that dies between them, or
//! a caller that gives up, leaves the group in the joint configuration for good, the old
//! voters still deciding (a promotion asked again answered "already a voter" and finished
//! nothing). The leader finds such a configuration (`half_done_change`) and completes it
//! (`finish_change`); a promotion asked again completes it as well.

use std::collections::BTreeSet;
use std::time::Duration;

use openraft::ChangeMembers;

use crate::cluster::{put, Cluster};

const BOUND: Duration = Duration::from_secs(5);

fn is_joint(metrics: &consensus::Metrics) -> bool {
    metrics.membership_config.membership().get_joint_config().len() > 1
}

/// Starts removing a follower and drops the change as soon as its joint configuration is
/// appended: the joint entry still commits, the uniform one is never proposed. The leader,
/// the follower and the index of the joint entry.
async fn cut_short_removal(cluster: &Cluster) -> anyhow::Result<(u64, u64, u64)> {
    let leader = cluster.leader().await?;
    let leaving = cluster.ids().into_iter().find(|id| *id != leader).expect("three nodes");
    put(cluster.node(leader), "before", "v").await?;
    let node = cluster.node(leader).clone();
    let remove = ChangeMembers::RemoveVoters(BTreeSet::from([leaving]));
    let change = node.raft().change_membership(remove, false);
    let joint = cluster.wait_for(leader, "a joint configuration", is_joint);
    tokio::select! {
        biased;
        joint = joint => { joint?; }
        result = change => panic!("the change ended before its joint entry showed: {result:?}"),
    }
    put(cluster.node(leader), "after", "v").await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let index = cluster.node(leader).half_done_change();
    assert!(index.is_some(), "the joint configuration stays: the change was cut short");
    Ok((leader, leaving, index.unwrap_or_default()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_finishes_a_change_left_half_done() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    tracing::info!("--- a removal cut short after its joint commit");
    let (leader, leaving, index) = cut_short_removal(&cluster).await?;
    assert_eq!(cluster.node(leaving).half_done_change(), None, "only a leader finds it");

    tracing::info!("--- the leader finishes it: the removed follower is gone");
    let members = cluster.node(leader).finish_change(index).await?;
    assert!(!members.joint, "{members:?}");
    assert!(members.members.iter().all(|member| member.id != leaving), "{members:?}");
    assert_eq!(members.members.iter().filter(|member| member.voter).count(), 2);
    assert_eq!(cluster.node(leader).half_done_change(), None);
    put(cluster.node(leader), "finished", "v").await?;
    // Finishing again, or one already replaced, changes nothing.
    let again = cluster.node(leader).finish_change(index).await?;
    assert_eq!(again.membership_index, members.membership_index);
    cluster.stop_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_asked_again_finishes_a_change_left_half_done() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let (leader, leaving, _) = cut_short_removal(&cluster).await?;

    tracing::info!("--- a voter of both configurations asks to be promoted: the change completes");
    let staying =
        cluster.ids().into_iter().find(|id| *id != leader && *id != leaving).expect("a third");
    let members = cluster.node(leader).promote(staying, BOUND).await?;
    assert!(!members.joint, "{members:?}");
    assert!(members.members.iter().all(|member| member.id != leaving), "{members:?}");
    cluster.stop_all().await
}
