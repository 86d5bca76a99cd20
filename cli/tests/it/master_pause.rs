//! End-to-end, real processes: a leader paused (SIGSTOP) in the middle of writes, whose
//! entries the others replaced and snapshotted past while it slept, commits again at once
//! when it leads again. (openraft 0.9 never answers a write whose entry a snapshot install
//! replaced; the batcher held its in-flight slot for that answer, so the node stopped
//! committing for good.)

use crate::master_group::MasterGroup;
use crate::task_consumer::{report_dataset, spawn_consumers, write_dataset, History};
use nix::sys::signal::Signal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const POLICY: [&str; 6] = [
    "--snapshot-logs-since-last",
    "200",
    "--task-timeout-min-ms",
    "600000",
    "--trainer-lease-ms",
    "600000",
];
const CONSUMER_COUNT: usize = 8;

fn completions(history: &Arc<Mutex<History>>) -> usize {
    history.lock().expect("history lock").completions.len()
}

/// Waits until `more` completions were added, or fails with the masters' logs.
async fn progress(group: &mut MasterGroup, history: &Arc<Mutex<History>>, more: usize, why: &str) {
    let target = completions(history) + more;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while completions(history) < target {
        if tokio::time::Instant::now() >= deadline {
            panic!(
                "{why}: stuck at {} of {target} completions\n{}",
                completions(history),
                group.logs()
            );
        }
        group.supervise();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Pause the leader while trainers write; the others elect, commit past several snapshots;
/// resume it and make it lead again (it is favoured in elections): writes commit through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_commits_again_when_it_leads_again() {
    let mut group = MasterGroup::start(3, &POLICY);
    for index in 0..3 {
        group.kill(index);
    }
    group.favour(0);
    for index in 0..3 {
        group.spawn(index);
    }
    assert_eq!(group.leader_index().await, 0, "the favoured replica leads first");
    let dataset = write_dataset(group.dir.path(), 40);
    report_dataset(&group.client(), &dataset, 100_000).await;
    let history = Arc::new(Mutex::new(History::default()));
    let consumers =
        spawn_consumers(CONSUMER_COUNT, "t", Duration::ZERO, &history, || group.client());
    progress(&mut group, &history, 50, "before the pause").await;

    tracing::info!("--- pause the leader mid-write; the others go on past several snapshots");
    group.signal(0, Signal::SIGSTOP);
    progress(&mut group, &history, 600, "while the leader is paused").await;
    let new_leader = group.leader_index().await;
    assert_ne!(new_leader, 0);

    tracing::info!("--- resume it, pause whoever leads until the old leader leads again");
    group.signal(0, Signal::SIGCONT);
    let paused = lead_again(&group).await;
    progress(&mut group, &history, 300, "after the old leader leads again").await;
    if let Some(paused) = paused {
        group.signal(paused, Signal::SIGCONT);
    }
    for consumer in consumers {
        consumer.abort();
    }
}

/// Pauses the leader (after giving replica 0 time to catch up) until replica 0 wins the
/// election; returns the replica left paused (none if replica 0 won by itself). Replica 0 is
/// favoured, but a candidate whose log is shorter than a voter's loses, and entries in flight
/// at the pause can make it so.
async fn lead_again(group: &MasterGroup) -> Option<usize> {
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let leader = group.leader_index().await;
        if leader == 0 {
            return None;
        }
        group.signal(leader, Signal::SIGSTOP);
        tokio::time::sleep(Duration::from_secs(2)).await;
        if group.leader_index().await == 0 {
            return Some(leader);
        }
        group.signal(leader, Signal::SIGCONT);
    }
    panic!("replica 0 never led again\n{}", group.logs());
}
