//! A flood of stamped writes from fresh client ids does not lock the job out: strangers fill a
//! pool of their own, a real `raftrain trainer` still registers and the job finishes, and the
//! strangers beyond the pool are told to try again later (RESOURCE_EXHAUSTED, refusal
//! `try-again-later`, with when a place frees up), never that their request was wrong.

use std::time::Duration;

use proto::master::master_service_client::MasterServiceClient;
use proto::master::{ClientStamp, RecordEvalRequest};
use tokio::task::JoinSet;
use tonic::transport::Channel;

use crate::training::synth;
use crate::training_job::TrainingJob;

/// More stamped writes from fresh client ids than the whole session table held before
/// strangers had a pool of their own (16,384).
const FLOOD_COUNT: u64 = 16_384 + 256;
/// Writes in flight at once.
const FLOOD_CONCURRENCY: u64 = 128;
/// The strangers' client ids start here.
const FIRST_STRANGER_ID: u64 = 0xf100_d000_0000_0000;

/// How the flood was answered.
#[derive(Debug, Default)]
struct FloodAnswers {
    accepted: u64,
    try_again_later: u64,
    /// Anything else, with its code and message (the first few).
    other: Vec<String>,
}

/// One stranger's evaluation, stamped with a client id nobody used before.
async fn record_eval(
    mut service: MasterServiceClient<Channel>,
    client_id: u64,
) -> Result<(), tonic::Status> {
    let stamp = Some(ClientStamp { client_id, seq: 1 });
    let request =
        RecordEvalRequest { stamp, pass_index: 0, loss: 1.0, accuracy: 0.5, job: String::new() };
    service.record_eval(request).await.map(|_| ())
}

/// `FLOOD_COUNT` evaluations from fresh client ids, `FLOOD_CONCURRENCY` at a time.
async fn flood(service: MasterServiceClient<Channel>) -> FloodAnswers {
    let mut answers = FloodAnswers::default();
    let mut calls = JoinSet::new();
    for offset in 0..FLOOD_COUNT {
        if calls.len() as u64 >= FLOOD_CONCURRENCY {
            count(&mut answers, calls.join_next().await);
        }
        calls.spawn(record_eval(service.clone(), FIRST_STRANGER_ID + offset));
    }
    while let Some(answer) = calls.join_next().await {
        count(&mut answers, Some(answer));
    }
    answers
}

fn count(
    answers: &mut FloodAnswers,
    answer: Option<Result<Result<(), tonic::Status>, tokio::task::JoinError>>,
) {
    let answer = answer.expect("a call was in flight").expect("a flood call panicked");
    let Err(status) = answer else {
        answers.accepted += 1;
        return;
    };
    let refusal = status.metadata().get("x-raftrain-refusal").and_then(|v| v.to_str().ok());
    match (status.code(), refusal) {
        (tonic::Code::ResourceExhausted, Some("try-again-later")) => {
            let retry_after = status.metadata().get("x-raftrain-retry-after-ms");
            assert!(retry_after.is_some(), "a try-again-later says when: {status:?}");
            answers.try_again_later += 1;
        }
        _ if answers.other.len() < 5 => answers.other.push(format!("{status:?}")),
        _ => {}
    }
}

/// 16,640 stamped `RecordEval`s from fresh client ids at a real master group (about what a
/// few seconds of a hostile client can send), then a real trainer joins: it registers (a
/// trainer's client always gets a session), trains and exits 0, and the job finishes. The
/// flood itself was answered only "accepted" or "try again later". (Before, the flood filled
/// the one session table for five minutes and the trainer exited at once on "too many
/// clients".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_new_clients_does_not_lock_a_trainer_out() {
    let dir = tempfile::tempdir().expect("temp");
    let (train, _) = synth(dir.path(), "blobs", "600", "2.5");
    let args = ["--dataset", &train, "--model", "softmax", "--classes", "3", "--passes", "1"];
    let mut job = TrainingJob::start(3, 1, dir.path(), &args);

    tracing::info!("--- a tool reports the job, so strangers' evaluations are accepted");
    let sizes = job.masters.client().report_dataset("job", std::slice::from_ref(&train), 1).await;
    sizes.expect("the dataset is accepted");

    tracing::info!("--- {FLOOD_COUNT} evaluations from fresh client ids");
    let answers = flood(job.masters.leader_service().await).await;
    tracing::info!(?answers, "the flood was answered");

    tracing::info!("--- a real trainer joins and the job finishes");
    job.spawn_trainer();
    let (status, log) = job.wait_trainer(0, Duration::from_secs(180));
    assert!(status.success(), "the trainer failed ({status})\n{log}\n{}", job.logs());
    let finished = job.masters.status().await;
    assert!(finished.job_finished, "the job finished: {finished:?}");

    assert!(answers.other.is_empty(), "only accepted or try-again-later: {answers:?}");
    assert!(answers.try_again_later > 0, "the strangers' pool is bounded: {answers:?}");
    assert_eq!(answers.accepted + answers.try_again_later, FLOOD_COUNT, "{answers:?}");
}
