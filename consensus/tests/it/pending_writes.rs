//! Every pending write resolves, and a node that leads again commits at once, even when the
//! entries it proposed before were replaced by a snapshot install (openraft 0.9 never answers
//! such entries; the batcher must not wait for them for ever).

use std::time::Duration;

use consensus::NodeConfig;
use openraft::ServerState;

use crate::cluster::{put, Cluster, Node};
use consensus::kv::KvResponse;
use consensus::WriteError;

/// A write that must commit, retried (as a client retries) when its outcome was unknown: on a
/// loaded machine one attempt may pass its 2 s timeout. A node whose write path is jammed
/// times out on every attempt, so this still fails without the fix.
async fn put_committed(node: &Node, key: &str, value: &str) -> Result<KvResponse, WriteError> {
    let mut outcome = put(node, key, value).await;
    for _ in 1..TIMEOUT_RETRIES_MAX {
        if !matches!(outcome, Err(WriteError::Timeout { .. })) {
            break;
        }
        outcome = put(node, key, value).await;
    }
    outcome
}

/// Attempts of a write whose outcome stays unknown before the test gives up.
const TIMEOUT_RETRIES_MAX: u32 = 3;

/// Writes proposed to a leader that is then cut off resolve, and after the majority commits
/// past a snapshot and the old leader is elected again, writes through it commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_entries_a_snapshot_replaced_commits_when_it_leads_again(
) -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(3, |config| NodeConfig {
        snapshot_logs_since_last: 20,
        max_in_snapshot_log_to_keep: 0,
        ..config
    })
    .await?;
    let old_leader = cluster.leader().await?;
    put_committed(cluster.node(old_leader), "before", "1").await?;
    cluster.converge().await?;

    tracing::info!("--- cut the leader off while writes to it are in flight (every slot busy)");
    cluster.router.isolate(old_leader, &cluster.ids());
    let mut stuck = Vec::new();
    for index in 0..8 {
        let node = cluster.node(old_leader).clone();
        stuck.push(tokio::spawn(async move { put(&node, &format!("lost-{index}"), "x").await }));
        // Let each write reach its own entry, so both slots hold an entry.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    tracing::info!("--- the majority elects a leader and commits past a snapshot and purge");
    let majority: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != old_leader).collect();
    let new_leader = cluster.leader_among(&majority).await?;
    for index in 0..100 {
        put_committed(cluster.node(new_leader), &format!("key-{index}"), "v").await?;
    }
    let old_last = cluster.node(old_leader).metrics().borrow().last_log_index.unwrap_or(0);
    cluster
        .wait_for(new_leader, "a purge past the old leader's log", |m| {
            m.purged.is_some_and(|purged| purged.index > old_last)
        })
        .await?;

    tracing::info!("--- heal: the old leader installs the snapshot that replaces its entries");
    cluster.router.heal();
    cluster
        .wait_for(old_leader, "follow with the snapshot", |m| {
            m.state == ServerState::Follower && m.snapshot.is_some_and(|s| s.index > old_last)
        })
        .await?;
    cluster.converge().await?;
    for write in stuck {
        // Each resolved (timeout or redirect); none is left hanging.
        let outcome = write.await?;
        assert!(outcome.is_err(), "an isolated leader cannot have committed: {outcome:?}");
    }

    tracing::info!("--- make the old leader lead again: the third node never campaigns");
    let third = *majority.iter().find(|id| **id != new_leader).expect("three nodes");
    cluster.node(third).enable_elections(false);
    cluster.router.isolate(new_leader, &cluster.ids());
    let again = cluster.leader_among(&[old_leader, third]).await?;
    assert_eq!(again, old_leader);

    tracing::info!("--- writes through it commit at once");
    for index in 0..4 {
        put_committed(cluster.node(old_leader), &format!("again-{index}"), "v").await?;
    }
    cluster.converge_among(&[old_leader, third]).await?;
    let state = cluster.node(third).read(|state| state.clone());
    assert_eq!(state.get("again-3"), Some("v"));
    assert_eq!(state.get("lost-0"), None);
    cluster.stop_all().await
}
