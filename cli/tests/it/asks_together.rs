//! End-to-end: asks a client sends at once, each saying so (`GetTaskRequest.together`), share
//! one log entry on a real three-process group, and each is answered as if sent alone; a count
//! over the bound is refused before anything is applied.

use crate::master_group::MasterGroup;
use crate::task_consumer::{register, report_dataset, write_dataset};
use client::{MasterClient, TaskOutcome, Together, ASKS_TOGETHER_MAX};
use proto::master::{ClientStamp, GetTaskRequest};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Rounds of two asks sent at once.
const ROUNDS: usize = 10;
/// The feature level from which a finish goes with an ask in one command (below it, a
/// hand-off is a call per finish, then the ask).
const HAND_OFF_LEVEL: u32 = 3;

/// The leader's view of the group.
async fn cluster_info(group: &MasterGroup) -> proto::raft::ClusterInfoReply {
    let mut service = group.leader_service().await;
    let request = proto::raft::ClusterInfoRequest::default();
    service.cluster_info(request).await.expect("cluster info").into_inner()
}

/// The leader's last log index.
pub async fn last_log_index(group: &MasterGroup) -> u64 {
    cluster_info(group).await.last_log_index
}

/// Waits until the leader raised the group to the hand-off's feature level (a group starts
/// at the base level and is raised once the leader heard every member).
pub async fn await_hand_off_level(group: &MasterGroup) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while cluster_info(group).await.group_feature_level < HAND_OFF_LEVEL {
        assert!(Instant::now() < deadline, "the group never reached level {HAND_OFF_LEVEL}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One trainer's hand-off of `finished`, sent `together` with others: its task, each receipt
/// accepted.
pub async fn hand_off(
    client: &MasterClient,
    trainer: u64,
    finished: &[(u64, u64)],
    together: &Together,
) -> (u64, u64) {
    let handed = client.finished_then_get_task(trainer, 0, finished, together).await;
    let handed = handed.expect("hand-off");
    assert!(handed.finished.iter().all(|accepted| *accepted), "{finished:?}: {handed:?}");
    match handed.outcome {
        TaskOutcome::Task(task) => (task.task_id, task.epoch),
        other => panic!("expected a task, got {other:?}"),
    }
}

/// Two trainers hand tasks off at once, round after round: each round's two writes (each a
/// finish and an ask) grow the log by one entry where they met in time (at least one round of
/// ten on a loaded machine), never by more than two; every answer is a task of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_sent_together_share_an_entry() {
    let group = MasterGroup::start(3, &[]);
    await_hand_off_level(&group).await;
    let dataset = write_dataset(group.dir.path(), 2 * ROUNDS);
    report_dataset(&group.client(), &dataset, 1).await;
    let (first, second) = (group.client(), group.client());
    let trainers = [register(&first, "left").await, register(&second, "right").await];
    let (mut held, mut handed, mut growth) =
        ([Vec::new(), Vec::new()], BTreeSet::new(), Vec::new());
    for _ in 0..ROUNDS {
        let before = last_log_index(&group).await;
        let (left, right) = tokio::join!(
            hand_off(&first, trainers[0], &held[0], &Together::Sent(2)),
            hand_off(&second, trainers[1], &held[1], &Together::Sent(2)),
        );
        growth.push(last_log_index(&group).await - before);
        assert!(handed.insert(left.0) && handed.insert(right.0), "tasks handed out twice");
        held = [vec![left], vec![right]];
    }
    assert!(growth.iter().all(|entries| *entries <= 2), "entries per round: {growth:?}");
    assert!(growth.contains(&1), "no round shared an entry: {growth:?}");
}

/// A count of asks over the bound is refused, naming the field, and applies nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_asks_together_are_refused() {
    let group = MasterGroup::start(3, &[]);
    let dataset = write_dataset(group.dir.path(), 3);
    let client = group.client();
    report_dataset(&client, &dataset, 1).await;
    let trainer = register(&client, "greedy").await;
    let request = GetTaskRequest {
        stamp: Some(ClientStamp { client_id: 777, seq: 1 }),
        trainer_id: trainer,
        pass_index: 0,
        job: String::new(),
        finished: Vec::new(),
        together: ASKS_TOGETHER_MAX + 1,
    };
    let refused = group.leader_service().await.get_task(request).await.expect_err("refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("together: 9"), "{}", refused.message());
    assert_eq!(group.status().await.pending, 0, "nothing was dispatched");
    let typed = client
        .finished_then_get_task(trainer, 0, &[], &Together::Sent(ASKS_TOGETHER_MAX + 1))
        .await;
    let typed = typed.expect_err("refused before sending");
    assert!(matches!(typed, client::ClientError::InvalidArgument { .. }), "{typed:?}");
}
