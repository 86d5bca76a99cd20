//! A leader about to stop hands leadership to a caught-up follower (`consensus/src/handoff.rs`),
//! unless it is the only voter, and a follower starts an election for nobody but the leader it
//! follows.

use std::time::Duration;

use consensus::timeout_now_error::TimeoutNowRefusal;
use consensus::{Handoff, TimeoutNow, WriteError};

use crate::cluster::{put, Cluster};

const BOUND: Duration = Duration::from_secs(5);

/// Right after the writes, the leader hands off: another member leads within the bound (the
/// leader's own vote lease delays it at most a lease), with every write; the old leader
/// refuses writes from the start of the handoff, naming its successor, and never campaigns
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_hands_off_to_a_caught_up_follower() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;
    for key in 0..20 {
        put(cluster.node(leader), &format!("k{key}"), "v").await?;
    }

    tracing::info!(leader, "--- hand off");
    let outcome = cluster.node(leader).hand_off_leadership(&cluster.router, BOUND).await;
    let Handoff::Done { to, .. } = outcome else { panic!("no handoff: {outcome:?}") };
    assert_ne!(to, leader);
    let refused = put(cluster.node(leader), "late", "v").await;
    assert_redirected_to(&cluster, refused, to);
    assert!(!cluster.node(leader).is_leader());

    tracing::info!(to, "--- the new leader has every write and serves");
    put(cluster.node(to), "after", "v").await?;
    cluster.converge().await?;
    for (id, state) in cluster.states() {
        assert!(state.get("k19").is_some() && state.get("after").is_some(), "node {id}");
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(cluster.leader().await?, to, "the leaving node never took it back");
    cluster.stop_all().await
}

/// A write that reaches the leader while it hands off is held, then sent to the successor by
/// name and address, so its client can follow at once instead of rediscovering with backoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_during_the_handoff_is_sent_to_the_successor() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;
    put(cluster.node(leader), "k", "v").await?;

    tracing::info!(leader, "--- hand off, and write to the leaving leader meanwhile");
    let leaving = cluster.node(leader).clone();
    let router = cluster.router.clone();
    let handoff = tokio::spawn(async move { leaving.hand_off_leadership(&router, BOUND).await });
    while !cluster.node(leader).is_leaving() {
        tokio::task::yield_now().await;
    }
    let during = put(cluster.node(leader), "during", "v").await;
    let outcome = handoff.await?;
    let Handoff::Done { to, .. } = outcome else { panic!("no handoff: {outcome:?}") };
    assert_redirected_to(&cluster, during, to);
    cluster.stop_all().await
}

/// A group of one has nobody to hand off to: the handoff says so at once instead of waiting
/// the bound for a follower that does not exist (a single master's SIGTERM took 3 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_only_voter_has_nobody_to_hand_off_to() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(1, |config| config).await?;
    let leader = cluster.leader().await?;
    put(cluster.node(leader), "k", "v").await?;
    let outcome = cluster.node(leader).hand_off_leadership(&cluster.router, BOUND).await;
    assert!(matches!(outcome, Handoff::Alone), "{outcome:?}");
    cluster.stop_all().await
}

/// `outcome` is a refusal naming member `to` and its address.
fn assert_redirected_to<T: std::fmt::Debug>(
    cluster: &Cluster,
    outcome: Result<T, WriteError>,
    to: u64,
) {
    let addr = cluster.config(to).peers.get(&to).cloned();
    match outcome {
        Err(WriteError::ForwardToLeader { leader_id, leader_addr }) => {
            assert_eq!((leader_id, leader_addr), (Some(to), addr), "redirected to the successor");
        }
        other => panic!("expected a redirect to member {to}, got {other:?}"),
    }
}

/// `TimeoutNow` is honoured only from the followed leader, in its term, once per term: a
/// forged or repeated one is refused and starts no election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_or_repeated_timeout_now_is_refused() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| config).await?;
    let leader = cluster.leader().await?;
    let follower = cluster.ids().into_iter().find(|id| *id != leader).expect("three nodes");
    let term = cluster.node(leader).term();
    let handler = cluster.node(follower).rpc_handler();
    let other = cluster.ids().into_iter().find(|id| ![leader, follower].contains(id));
    let other = other.expect("three nodes");
    let forged = [
        (
            TimeoutNow { term: term + 1, leader_id: leader },
            TimeoutNowRefusal::WrongTerm { request_term: term + 1, own_term: term },
        ),
        (
            TimeoutNow { term: term - 1, leader_id: leader },
            TimeoutNowRefusal::WrongTerm { request_term: term - 1, own_term: term },
        ),
        (
            TimeoutNow { term, leader_id: other },
            TimeoutNowRefusal::NotFollowedLeader { sender: other, followed: Some(leader) },
        ),
    ];
    for (request, refusal) in forged {
        let answer = handler.timeout_now(request).await;
        assert_eq!(answer, Err(refusal), "{request:?}");
    }
    let leader_handler = cluster.node(leader).rpc_handler();
    let to_leader = leader_handler.timeout_now(TimeoutNow { term, leader_id: leader }).await;
    assert!(
        matches!(to_leader, Err(TimeoutNowRefusal::NotFollower { .. })),
        "a leader must not campaign against itself: {to_leader:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(cluster.node(leader).term(), term, "no forged request started an election");

    tracing::info!("--- a genuine one starts one election; the same again does not");
    handler
        .timeout_now(TimeoutNow { term, leader_id: leader })
        .await
        .map_err(anyhow::Error::msg)?;
    cluster.wait_for(follower, "its campaign", |metrics| metrics.current_term > term).await?;
    let again = handler.timeout_now(TimeoutNow { term, leader_id: leader }).await;
    assert!(again.is_err(), "a second request of the same term was honoured");
    cluster.stop_all().await
}
