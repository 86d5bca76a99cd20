//! A membership change is answered done only once committed, a retried one too: a leader
//! whose change could not commit (it was cut off from its followers) holds the uncommitted
//! membership as its own, and answering a retry from it would tell the operator a change is
//! done that the next leader may never have heard of.

use std::time::Duration;

use consensus::{MembershipError, WriteError};

use crate::cluster::Cluster;

/// Learner 9's address: the router ignores it.
const LEARNER_ADDR: &str = "node-9.invalid:7009";

/// An isolated leader's `add_learner` times out, and its retry, which finds the learner in the
/// leader's own (uncommitted) membership, is refused as under way instead of answered done;
/// once the leader reaches its followers again the change commits and the retry is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_change_is_answered_only_once_committed() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;
    let node = cluster.node(leader).clone();

    tracing::info!("--- cut the leader off: its change cannot commit");
    cluster.router.isolate(leader, &cluster.ids());
    let first = node.add_learner(9, LEARNER_ADDR).await;
    assert!(matches!(first, Err(MembershipError::Write(_))), "an isolated leader: {first:?}");
    let retry = node.add_learner(9, LEARNER_ADDR).await;
    assert!(
        matches!(
            retry,
            Err(MembershipError::InProgress { .. }
                | MembershipError::Write(WriteError::ForwardToLeader { .. }))
        ),
        "a retry must not be answered from an uncommitted membership: {retry:?}"
    );
    assert!(!node.applied_membership().1.contains(&9), "nothing committed the learner");

    tracing::info!("--- healed, the change commits (on whichever node leads) and is answered");
    cluster.router.heal();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(crate::cluster::WAIT_MS_MAX);
    loop {
        let leader = cluster.leader().await?;
        let answer = cluster.node(leader).add_learner(9, LEARNER_ADDR).await;
        if let Ok(members) = answer {
            assert!(members.members.iter().any(|member| member.id == 9), "{members:?}");
            let applied = cluster.node(leader).applied_membership().1;
            assert!(applied.contains(&9), "answered done, so committed: {applied:?}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the learner was never added: {answer:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster.stop_all().await
}

/// A promotion waits for its learner's catch-up; a learner that another change removes
/// meanwhile is no longer waited for: the promotion is answered "not a member" at once, so a
/// joiner asking for it learns of its removal instead of waiting out the bound (it used to
/// answer only at the bound, not caught up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_of_a_learner_removed_meanwhile_stops_waiting() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;
    let node = cluster.node(leader).clone();
    node.add_learner(9, LEARNER_ADDR).await?;

    tracing::info!("--- the learner never catches up (the router ignores it); it is removed");
    let promoting = {
        let node = node.clone();
        tokio::spawn(async move { node.promote(9, Duration::from_secs(120)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let removed = node.remove_member(9, &cluster.router, Duration::from_secs(10)).await?;
    assert!(removed.members.iter().all(|member| member.id != 9), "{removed:?}");
    let promoted = promoting.await?;
    assert!(matches!(promoted, Err(MembershipError::NotMember { id: 9 })), "{promoted:?}");
    cluster.stop_all().await
}
