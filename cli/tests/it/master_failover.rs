//! End-to-end: a real three-process master group keeps every task of every pass through
//! kill -9 of its leader, of a follower, and of all replicas at once.

use crate::master_group::MasterGroup;
use crate::task_consumer::{
    completions_reach, finish, register, report_dataset, spawn_consumers, take_task, write_dataset,
    History,
};
use proto::master::get_task_reply::Outcome;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const POLICY: [&str; 4] = ["--task-timeout-min-ms", "60000", "--trainer-lease-ms", "10000"];

/// Kill -9 the leader mid-stream, then a follower (leaving no quorum), then restart both: the
/// job finishes, and every task of every pass was accepted as done exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_and_follower_killed_mid_stream_lose_no_task() {
    let mut group = MasterGroup::start(3, &POLICY);
    let dataset = write_dataset(group.dir.path(), 40);
    let passes = 2;
    let task_count = report_dataset(&group.client(), &dataset, passes).await;
    assert_eq!(task_count, 40);
    let history = Arc::new(Mutex::new(History::default()));
    let work = Duration::from_millis(60);
    let consumers = spawn_consumers(4, "consumer-", work, &history, || group.client());

    tracing::info!("--- kill -9 the leader once some tasks are done");
    completions_reach(&history, 15, || group.logs()).await;
    let leader = group.leader_index().await;
    group.kill(leader);
    completions_reach(&history, 35, || group.logs()).await;

    tracing::info!("--- kill -9 a follower too: no quorum until the restarts");
    let new_leader = group.leader_index().await;
    let other =
        (0..3).find(|index| *index != leader && *index != new_leader).expect("three replicas");
    group.kill(other);
    tokio::time::sleep(Duration::from_millis(500)).await;
    group.spawn(leader);
    group.spawn(other);

    for consumer in consumers {
        tokio::time::timeout(Duration::from_secs(120), consumer)
            .await
            .expect("consumers finish")
            .expect("consumer ran");
    }
    let status = group.status().await;
    assert!(status.job_finished, "{}", group.logs());
    assert_eq!((status.done, status.failed, status.todo, status.pending), (task_count, 0, 0, 0));
    let mut accepted: BTreeMap<(u32, u64), u32> = BTreeMap::new();
    for (pass, task, _) in &history.lock().expect("history lock").completions {
        *accepted.entry((*pass, *task)).or_default() += 1;
    }
    for pass in 0..passes {
        for task in 0..task_count {
            assert_eq!(
                accepted.get(&(pass, task)),
                Some(&1),
                "pass {pass} task {task} accepted once"
            );
        }
    }
    assert_eq!(accepted.len() as u64, task_count * u64::from(passes));
}

/// Kill -9 all three replicas at once and restart them: the queues come back exactly as they
/// were committed, and pending tasks can still be finished with the epochs they were given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_masters_killed_at_once_restore_the_queues() {
    let mut group = MasterGroup::start(3, &POLICY);
    let dataset = write_dataset(group.dir.path(), 12);
    let client = group.client();
    report_dataset(&client, &dataset, 1).await;
    let mut assignments = Vec::new();
    for index in 0..5 {
        // A trainer holds one task at a time: five tasks pending take five trainers.
        let trainer = register(&client, &format!("survivor-{index}")).await;
        assignments.push(take_task(&client, trainer, 0).await);
    }
    for task in &assignments[..3] {
        assert!(finish(&client, task.task_id, task.epoch).await);
    }
    let before = group.status().await;
    assert_eq!((before.todo, before.pending, before.done), (7, 2, 3));

    tracing::info!("--- kill -9 every replica, then restart them all");
    for index in 0..3 {
        group.kill(index);
    }
    for index in 0..3 {
        group.spawn(index);
    }
    let after = group.status().await;
    assert_eq!(
        (
            after.todo,
            after.pending,
            after.done,
            after.failed,
            after.pass,
            registry(&after.trainers),
            &after.job
        ),
        (
            before.todo,
            before.pending,
            before.done,
            before.failed,
            before.pass,
            registry(&before.trainers),
            &before.job
        ),
        "{}",
        group.logs()
    );
    for task in &assignments[3..] {
        assert!(
            finish(&client, task.task_id, task.epoch).await,
            "pending task {} kept its epoch",
            task.task_id
        );
    }
    assert_eq!(group.status().await.done, 5);
}

/// A GetTask retried with the same stamp after the leader died gets the original assignment
/// from the new leader, and no second task is dispatched: writes are exactly-once across a
/// leader change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_leader_change_is_exactly_once() {
    use proto::master::{ClientStamp, GetTaskRequest};
    let mut group = MasterGroup::start(3, &POLICY);
    let dataset = write_dataset(group.dir.path(), 5);
    let client = group.client();
    report_dataset(&client, &dataset, 1).await;
    let trainer = register(&client, "retrier").await;
    let request = GetTaskRequest {
        stamp: Some(ClientStamp { client_id: 4242, seq: 1 }),
        trainer_id: trainer,
        pass_index: 0,
        job: String::new(),
        finished: Vec::new(),
        together: 0,
    };
    // A raw request with a stamp of the test's own, sent to whichever master leads: the
    // typed client would draw a new stamp for a new call.
    async fn get(group: &MasterGroup, request: GetTaskRequest) -> proto::master::GetTaskReply {
        let mut service = group.leader_service().await;
        service.get_task(request).await.expect("GetTask").into_inner()
    }
    let first = get(&group, request.clone()).await;
    assert_eq!(first.outcome, Outcome::Task as i32);

    tracing::info!("--- kill -9 the leader, then send the very same request to the new one");
    let leader = group.leader_index().await;
    group.kill(leader);
    let retried = get(&group, request).await;
    assert_eq!(retried, first, "the retry is answered from the session table");
    let status = group.status().await;
    assert_eq!((status.todo, status.pending), (4, 1), "one task was dispatched, not two");
}

/// The replicated part of the trainer list (ids and names; heartbeats are leader soft state).
fn registry(trainers: &[client::TrainerStatus]) -> Vec<(u64, String)> {
    trainers.iter().map(|trainer| (trainer.id, trainer.name.clone())).collect()
}
