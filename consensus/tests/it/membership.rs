//! Membership changes on in-process nodes: a learner added (the same one again changes
//! nothing; another member's id or address, id 0, an address too long are refused), caught up
//! and promoted; the leader asked to remove itself hands off and names its successor, which
//! removes it; the group keeps committing; the last voter stays.

use std::time::Duration;

use consensus::{MembershipError, StateMachine};

use crate::cluster::{put, Cluster, Node};

const HAND_OFF: Duration = Duration::from_secs(3);

fn voters(node: &Node) -> Vec<u64> {
    let members = node.members().expect("the leader lists its members");
    members.members.iter().filter(|member| member.voter).map(|member| member.id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learners_join_promote_and_leaders_leave_by_joint_consensus() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;
    put(cluster.node(leader), "before", "1").await?;

    tracing::info!("--- node 4 opens and is added as a learner");
    cluster.peers.insert(4, "node-4.invalid:7004".to_string());
    cluster.open(4).await?;
    let node = cluster.node(leader).clone();
    let added = node.add_learner(4, "node-4.invalid:7004").await?;
    let four = added.members.iter().find(|member| member.id == 4).expect("4 is listed");
    assert!(!four.voter, "{added:?}");
    assert_eq!(node.add_learner(4, "node-4.invalid:7004").await?.members.len(), 4, "again: same");
    let refusals = [
        (node.add_learner(5, "node-4.invalid:7004").await, "address"),
        (node.add_learner(4, "elsewhere.invalid:1").await, "id"),
        (node.add_learner(0, "zero.invalid:1").await, "zero"),
        (node.add_learner(6, &format!("{}:1", "h".repeat(300))).await, "long"),
    ];
    for (refused, what) in refusals {
        let error = refused.expect_err(what);
        let expected = match what {
            "address" => matches!(error, MembershipError::AddrTaken { id: 4, .. }),
            "id" => matches!(error, MembershipError::IdTaken { id: 4, .. }),
            "zero" => matches!(error, MembershipError::ZeroId),
            _ => matches!(error, MembershipError::AddrTooLong { .. }),
        };
        assert!(expected, "{what}: {error}");
    }

    tracing::info!("--- promoted once caught up, it holds what was written before");
    node.promote(4, Duration::from_secs(10)).await?;
    assert_eq!(voters(&node), vec![1, 2, 3, 4]);
    cluster.converge().await?;
    assert_eq!(cluster.states()[&4].snapshot(), cluster.states()[&leader].snapshot());

    tracing::info!("--- the leader asked to remove itself hands off and names its successor");
    let handed = node.remove_member(leader, &cluster.router, HAND_OFF).await;
    let Err(MembershipError::HandedOff { to, .. }) = handed else {
        anyhow::bail!("expected a handoff, got {handed:?}");
    };
    assert_ne!(to, leader);
    let successor = cluster.node(to).clone();
    cluster.leader_among(&[to]).await?;
    successor.remove_member(leader, &cluster.router, HAND_OFF).await?;
    let left: Vec<u64> = [1, 2, 3, 4].into_iter().filter(|id| *id != leader).collect();
    assert_eq!(voters(&successor), left);
    put(&successor, "after", "2").await?;

    tracing::info!("--- down to one voter, which stays");
    for id in left.iter().filter(|id| **id != to) {
        successor.remove_member(*id, &cluster.router, HAND_OFF).await?;
    }
    assert_eq!(voters(&successor), vec![to]);
    let last = successor.remove_member(to, &cluster.router, HAND_OFF).await;
    assert!(matches!(last, Err(MembershipError::LastVoter { .. })), "{last:?}");
    put(&successor, "alone", "3").await?;
    cluster.stop_all().await
}
