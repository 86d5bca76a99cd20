//! Operations: a master that lost its disk (its data directory is gone) is replaced by starting
//! it again with the same `--id` and `--peers` on an empty directory. It must rejoin the group
//! it was in, not found a group of its own (even as the lowest id, the one that bootstraps),
//! catch up to the others' state, and the group must keep committing. Shown for master 1 while
//! another leads, and for the leader itself.

use std::time::{Duration, Instant};

use crate::master_group::MasterGroup;

/// The masters' own applied index and state digest, from each of them.
async fn views(group: &MasterGroup) -> Vec<Option<(u64, u64)>> {
    let client = group.client();
    let mut views = Vec::new();
    for addr in &group.addrs {
        views.push(client.member_digest(addr).await.ok());
    }
    views
}

/// Waits until every master reports the same applied index and digest.
async fn converged(group: &MasterGroup) -> (u64, u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let views = views(group).await;
        if let Some(Some(first)) = views.first() {
            if views.iter().all(|view| view.as_ref() == Some(first)) {
                return *first;
            }
        }
        assert!(Instant::now() < deadline, "no convergence: {views:?}\n{}", group.logs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_that_lost_its_disk_rejoins_and_catches_up() {
    let policy = ["--snapshot-logs-since-last", "20", "--trainer-lease-ms", "600000"];
    let mut group = MasterGroup::start(3, &policy);
    let client = group.client();
    for index in 0..60 {
        client.register_trainer(&format!("before-{index}")).await.expect("register");
    }
    let leader = group.leader_index().await;
    let lowest = if leader == 0 { 1 } else { 0 };
    for (why, victim) in
        [("master 1 (the bootstrapping id) or a follower", lowest), ("the leader", leader)]
    {
        tracing::info!("--- {why}: kill -9, remove its data directory, start it empty");
        group.kill(victim);
        let data_dir = group.dir.path().join(format!("master-{}", victim + 1));
        std::fs::remove_dir_all(&data_dir).expect("remove the data directory");
        for index in 0..30 {
            client
                .register_trainer(&format!("while-{victim}-{index}"))
                .await
                .expect("the others commit");
        }
        group.spawn(victim);
        let (applied, _) = converged(&group).await;
        assert!(applied > 60, "caught up past the writes it missed: {applied}");
        let status = client.status().await.expect("status");
        let group = &status.group;
        assert_eq!(group.members.len(), 3, "one group of three, not a new one: {group:?}");
    }
    tracing::info!("--- the group still commits, and every master holds the same state");
    client.register_trainer("after").await.expect("register after");
    let trainers = client.status().await.expect("status").trainers.len();
    assert_eq!(trainers, 60 + 30 + 30 + 1, "{}", group.logs());
    converged(&group).await;
}
