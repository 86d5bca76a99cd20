//! `GetTaskStream` on a real three-process group, sent to as a raw client would: asks on one
//! stream are answered in order, each as its own `GetTask` would be; a refused ask (a field out
//! of bounds, a follower asked) is answered with its refusal, and the stream then ends; a
//! master that stops ends the streams it serves cleanly rather than cutting them off.

use std::time::Duration;

use crate::asks_together::await_hand_off_level;
use crate::master_group::MasterGroup;
use crate::task_consumer::{register, report_dataset, write_dataset};
use proto::master::get_task_answer::Answer;
use proto::master::get_task_reply::Outcome;
use proto::master::{ClientStamp, GetTaskAnswer, GetTaskRequest, TaskReceipt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

/// One trainer's ask, stamped `seq`, carrying `finished`.
fn ask(trainer_id: u64, seq: u64, finished: Vec<TaskReceipt>) -> GetTaskRequest {
    GetTaskRequest {
        stamp: Some(ClientStamp { client_id: 7_007, seq }),
        trainer_id,
        pass_index: 0,
        job: String::new(),
        finished,
        together: 1,
    }
}

/// A group whose masters take finishes with an ask, holding a job of `tasks` tasks; a trainer
/// registered in it, and the leader's index.
async fn group_with_trainer(tasks: usize) -> (MasterGroup, u64, usize) {
    let group = MasterGroup::start(3, &[]);
    await_hand_off_level(&group).await;
    let dataset = write_dataset(group.dir.path(), tasks);
    let client = group.client();
    report_dataset(&client, &dataset, 1).await;
    let trainer = register(&client, "streamed").await;
    let leader = group.leader_index().await;
    (group, trainer, leader)
}

type Asks = (mpsc::Sender<GetTaskRequest>, Streaming<GetTaskAnswer>);

/// A stream opened on master `index` of `group`.
async fn open(group: &MasterGroup, index: usize) -> Asks {
    let (requests, receiver) = mpsc::channel(1);
    let mut service = group.service(index).await;
    let answers = service.get_task_stream(ReceiverStream::new(receiver)).await;
    (requests, answers.expect("the stream opens").into_inner())
}

/// Sends `request` on `asks` and returns its answer.
async fn answer(asks: &mut Asks, request: GetTaskRequest) -> Answer {
    asks.0.send(request).await.expect("the stream takes the ask");
    let answer = asks.1.message().await.expect("an answer, not an error");
    answer.and_then(|answer| answer.answer).expect("the ask is answered")
}

/// The task of a reply.
fn task_of(answer: Answer) -> TaskReceipt {
    let Answer::Reply(reply) = answer else { panic!("a refusal: {answer:?}") };
    assert_eq!(reply.outcome, Outcome::Task as i32, "{reply:?}");
    let task = reply.task.expect("a task");
    TaskReceipt { task_id: task.task_id, epoch: task.epoch }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_on_a_stream_are_answered_in_order_until_one_is_refused() {
    let (group, trainer, leader) = group_with_trainer(3).await;
    let mut asks = open(&group, leader).await;
    let first = task_of(answer(&mut asks, ask(trainer, 1, Vec::new())).await);
    let second = task_of(answer(&mut asks, ask(trainer, 2, vec![first])).await);
    assert_ne!(first.task_id, second.task_id, "the first was finished with the second ask");
    let third = task_of(answer(&mut asks, ask(trainer, 3, vec![second])).await);
    assert_eq!(group.status().await.done, 2, "both finishes applied");

    let mut crowded = ask(trainer, 4, vec![third]);
    crowded.together = client::ASKS_TOGETHER_MAX + 1;
    let Answer::Refused(refusal) = answer(&mut asks, crowded).await else {
        panic!("too many asks together is refused")
    };
    assert_eq!(refusal.code, tonic::Code::InvalidArgument as i32, "{refusal:?}");
    assert!(refusal.message.contains("together"), "names the field: {refusal:?}");
    let after = asks.1.message().await.expect("the stream ends, not fails");
    assert!(after.is_none(), "the stream ends after a refusal: {after:?}");
    assert_eq!(group.status().await.done, 2, "the refused ask applied nothing");

    let follower = (leader + 1) % group.addrs.len();
    let mut asks = open(&group, follower).await;
    let Answer::Refused(refusal) = answer(&mut asks, ask(trainer, 5, Vec::new())).await else {
        panic!("a follower answers no ask")
    };
    assert_eq!(refusal.code, tonic::Code::Unavailable as i32, "{refusal:?}");
    let named = refusal.metadata.iter().find(|entry| entry.key == client::LEADER_METADATA_KEY);
    assert_eq!(named.map(|entry| entry.value.as_str()), Some(group.addrs[leader].as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_master_ends_the_streams_it_serves() {
    let (mut group, trainer, leader) = group_with_trainer(2).await;
    let mut asks = open(&group, leader).await;
    task_of(answer(&mut asks, ask(trainer, 1, Vec::new())).await);

    let exited = group.terminate(leader, Duration::from_secs(30));
    assert!(exited.is_some_and(|status| status.success()), "the leader stops: {exited:?}");
    // Cut off at the end of the stop's drain instead, the stream would fail, not end.
    let after = asks.1.message().await;
    assert!(matches!(after, Ok(None)), "the stream ended cleanly: {after:?}");
}
