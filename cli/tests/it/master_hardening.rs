//! End-to-end, real processes: a leader that lost its quorum confirms no ownership, and a
//! master whose clock is hours off steers nothing once it leads.

use crate::master_group::MasterGroup;
use crate::task_consumer::{finish, register, report_dataset, take_task, write_dataset};
use nix::sys::signal::Signal;
use proto::master::{
    ClaimPServerSlotRequest, ClientStamp, HeartbeatRequest, PServerHeartbeatRequest,
};
use std::time::Duration;

/// A leader cut off from both followers (they are paused) keeps its applied state and still
/// believes it leads, but must not tell a pserver it holds its slot, nor a trainer that it is
/// known: a new leader elsewhere may already have given the slot away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_without_quorum_confirms_no_ownership() {
    let group = MasterGroup::start(3, &[]);
    let leader = group.leader_index().await;
    let trainer = register(&group.client(), "t").await;
    // What a pserver partitioned with the old leader keeps talking to: that one master.
    let mut service = group.service(leader).await;
    let stamp = Some(ClientStamp { client_id: 77, seq: 1 });
    let secret = vec![5; 16];
    let claim = ClaimPServerSlotRequest {
        stamp,
        addr: "127.0.0.1:7101".into(),
        desired: 1,
        secret: secret.clone().into(),
        job: String::new(),
    };
    let lease = service.claim_p_server_slot(claim).await.expect("claim a slot").into_inner();
    assert!(lease.granted && lease.generation > 0, "{lease:?}");
    let heartbeat = PServerHeartbeatRequest {
        index: 0,
        addr: "127.0.0.1:7101".into(),
        generation: lease.generation,
        secret: secret.into(),
        step: 0,
        job: String::new(),
    };
    let answer = service.p_server_heartbeat(heartbeat.clone()).await.expect("a heartbeat");
    assert!(answer.into_inner().holds_slot, "the leader confirms the holder while it has a quorum");

    tracing::info!("--- pause both followers: the leader is alone");
    let followers: Vec<usize> = (0..3).filter(|index| *index != leader).collect();
    for follower in &followers {
        group.signal(*follower, Signal::SIGSTOP);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pserver = service.p_server_heartbeat(heartbeat).await;
    let trainer_answer = service
        .heartbeat(HeartbeatRequest { trainer_id: trainer, tasks_done: 0, job: String::new() })
        .await;
    for follower in &followers {
        group.signal(*follower, Signal::SIGCONT);
    }
    let status = pserver.expect_err("a leader without a quorum confirmed a slot holder");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    let status = trainer_answer.expect_err("a leader without a quorum confirmed a trainer");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
}

/// A master restarts with its wall clock two hours fast (on its own data directory, so it
/// leads at once). A task handed out a moment before, with a 60 s timeout, must not expire:
/// a leader's clock does not steer the state's, so the trainer's report is still accepted.
/// (Before the leader clock, the fast leader stamped its wall clock, expired the task at once
/// and left the state two hours ahead for every later leader.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_two_hours_fast_expires_nothing_early() {
    let policy = ["--task-timeout-min-ms", "60000", "--trainer-lease-ms", "60000"];
    let mut group = MasterGroup::start(1, &policy);
    let client = group.client();
    let dataset = write_dataset(group.dir.path(), 4);
    report_dataset(&client, &dataset, 1).await;
    let trainer = register(&client, "t").await;
    let task = take_task(&client, trainer, 0).await;

    tracing::info!("--- restart the master two hours fast; it leads for a while");
    group.kill(0);
    group.set_env(0, master::clock::CLOCK_OFFSET_ENV, &(2 * 60 * 60 * 1000).to_string());
    group.spawn(0);
    let status = group.status().await;
    assert_eq!(status.pending, 1, "the task is pending after the restart");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let status = group.status().await;
    assert_eq!(status.pending, 1, "the fast leader expired the task\n{}", group.logs());
    assert!(finish(&client, task.task_id, task.epoch).await, "the report was fenced off");
}
