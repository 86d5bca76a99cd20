//! End-to-end: asks of several trainers gathered in one `GetTasks` call (`client::AskGather`)
//! on a real three-process group. Each ask is answered as its own `GetTask` would be, its
//! finishes applied with it; the round's writes share a log entry; one ask's refusal is its
//! own; the call's bounds are refused naming the field, and a follower sends the caller to the
//! leader.

use crate::asks_together::{self, await_hand_off_level, last_log_index};
use crate::master_group::MasterGroup;
use crate::task_consumer::{register, report_dataset, write_dataset};
use client::{AskGather, ClientError, ClientOptions, MasterClient, TaskOutcome, Together};
use proto::master::{ClientStamp, GetTaskRequest, GetTasksRequest};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// Trainers whose asks each round gathers.
const TRAINERS: usize = 3;
/// Rounds of gathered asks.
const ROUNDS: usize = 6;

/// A trainer's hand-off of `finished` in the round `gather`: its task, each receipt accepted.
async fn hand_off(
    client: &MasterClient,
    trainer: u64,
    finished: &[(u64, u64)],
    gather: &Arc<AskGather>,
) -> (u64, u64) {
    asks_together::hand_off(client, trainer, finished, &Together::Gathered(gather.clone())).await
}

/// A group holding a job of `tasks` tasks, a client of it and a trainer it registered.
async fn group_with_trainer(tasks: usize) -> (MasterGroup, MasterClient, u64) {
    let group = MasterGroup::start(3, &[]);
    let dataset = write_dataset(group.dir.path(), tasks);
    let client = group.client();
    report_dataset(&client, &dataset, 1).await;
    let trainer = register(&client, "first").await;
    (group, client, trainer)
}

/// Three trainers of three clients hand tasks off round after round, each round's asks
/// gathered in one call: every round is answered in one call, every answer is a task of its
/// own with the receipts it carried accepted, the round's writes grow the log by one entry
/// where they met in the leader's moment (at least one round), and the job ends with every
/// task done once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gathered_asks_are_each_answered_as_if_sent_alone() {
    let group = MasterGroup::start(3, &[]);
    await_hand_off_level(&group).await;
    let dataset = write_dataset(group.dir.path(), TRAINERS * ROUNDS);
    report_dataset(&group.client(), &dataset, 1).await;
    let clients: Vec<MasterClient> = (0..TRAINERS).map(|_| group.client()).collect();
    let mut trainers = Vec::new();
    for (index, client) in clients.iter().enumerate() {
        trainers.push(register(client, &format!("gathered-{index}")).await);
    }
    let (mut held, mut handed, mut growth) =
        (vec![Vec::new(); TRAINERS], BTreeSet::new(), Vec::new());
    for _ in 0..ROUNDS {
        let gather = AskGather::new(TRAINERS as u32).expect("a round of three");
        let before = last_log_index(&group).await;
        let (first, second, third) = tokio::join!(
            hand_off(&clients[0], trainers[0], &held[0], &gather),
            hand_off(&clients[1], trainers[1], &held[1], &gather),
            hand_off(&clients[2], trainers[2], &held[2], &gather),
        );
        growth.push(last_log_index(&group).await - before);
        assert!(gather.answered_in_one_call(), "a round went in calls of their own");
        for task in [first, second, third] {
            assert!(handed.insert(task.0), "task {} handed out twice", task.0);
        }
        held = vec![vec![first], vec![second], vec![third]];
    }
    assert!(growth.iter().all(|entries| *entries <= TRAINERS as u64), "entries: {growth:?}");
    assert!(growth.contains(&1), "no round shared an entry: {growth:?}");
    for (client, receipts) in clients.iter().zip(&held) {
        assert!(client.task_finished(receipts[0].0, receipts[0].1).await.expect("finish"));
    }
    let status = group.status().await;
    assert!(status.job_finished, "{status:?}");
    assert_eq!(status.dispatched, (TRAINERS * ROUNDS) as u64, "each task handed out once");
}

/// In one call, an ask naming a job the group does not hold is refused as its `GetTask` alone
/// would be, while the other ask is handed its task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_ask_does_not_refuse_the_others_of_its_call() {
    let (group, client, trainer) = group_with_trainer(2).await;
    let options = ClientOptions {
        call_deadline: Some(Duration::from_secs(60)),
        job: "no-such-job".to_string(),
        ..ClientOptions::default()
    };
    let stranger = MasterClient::new(&group.addrs, options).expect("valid addresses");
    let gather = AskGather::new(2).expect("a round of two");
    let together = Together::Gathered(gather.clone());
    let (known, unknown) = tokio::join!(
        client.finished_then_get_task(trainer, 0, &[], &together),
        stranger.finished_then_get_task(trainer, 0, &[], &together),
    );
    assert!(gather.answered_in_one_call(), "the round went in calls of their own");
    let known = known.expect("the known job's ask");
    assert!(matches!(known.outcome, TaskOutcome::Task(_)), "{known:?}");
    let unknown = unknown.expect_err("an ask for a job the group does not hold");
    assert!(matches!(unknown, ClientError::NoSuchJob { .. }), "{unknown:?}");
    assert!(unknown.to_string().contains("no-such-job"), "{unknown}");
}

/// An ask of a gathered call, as a client would send it.
fn ask(trainer_id: u64, seq: u64) -> GetTaskRequest {
    GetTaskRequest {
        stamp: Some(ClientStamp { client_id: 4242, seq }),
        trainer_id,
        pass_index: 0,
        job: String::new(),
        finished: Vec::new(),
        together: 0,
    }
}

/// A call of no asks or of more than go together is refused naming the field, applying
/// nothing; a follower answers one with the leader's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gathered_call_out_of_bounds_or_to_a_follower_is_refused() {
    let (group, _, trainer) = group_with_trainer(12).await;
    let most = client::ASKS_TOGETHER_MAX as u64;
    for count in [0, most + 1] {
        let asks = (1..=count).map(|seq| ask(trainer, seq)).collect();
        let call = group.leader_service().await.get_tasks(GetTasksRequest { asks }).await;
        let refused = call.expect_err("out of bounds");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
        assert!(refused.message().contains(&format!("asks: {count}")), "{}", refused.message());
    }
    assert_eq!(group.status().await.pending, 0, "nothing was dispatched");
    let leader = group.leader_index().await;
    let follower = (leader + 1) % group.addrs.len();
    let asks = vec![ask(trainer, 1)];
    let call = group.service(follower).await.get_tasks(GetTasksRequest { asks }).await;
    let refused = call.expect_err("a follower does not answer");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    let named = refused.metadata().get(client::LEADER_METADATA_KEY);
    let named = named.and_then(|value| value.to_str().ok());
    assert_eq!(named, Some(group.addrs[leader].as_str()), "{refused:?}");
}

/// A round gathering asks of clients of two groups: each ask goes to its own client's group
/// (the one following another master than the first ask's goes alone), and each group hands
/// out one task of its own job, without the round waiting out its gathering time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_of_clients_of_another_group_go_to_their_own_group() {
    let ((first_group, first, first_trainer), (second_group, second, second_trainer)) =
        tokio::join!(group_with_trainer(2), group_with_trainer(2));
    let gather = AskGather::new(2).expect("a round of two");
    let together = Together::Gathered(gather.clone());
    let (left, right) = tokio::join!(
        first.finished_then_get_task(first_trainer, 0, &[], &together),
        second.finished_then_get_task(second_trainer, 0, &[], &together),
    );
    for handed in [left, right] {
        let handed = handed.expect("an ask of each group");
        assert!(matches!(handed.outcome, TaskOutcome::Task(_)), "{handed:?}");
    }
    for group in [&first_group, &second_group] {
        assert_eq!(group.status().await.pending, 1, "each group handed out one task");
    }
}
