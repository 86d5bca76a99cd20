//! A trainer stopped with SIGTERM while it cannot finish its task (its pserver hangs) leaves
//! its job: the task goes back to the queue at once, not when the trainer's lease ends. A
//! forged leave costs a live trainer its task, never the job.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::training::{synth, SOFTMAX};
use crate::training_job::TrainingJob;

/// Leases of a minute: the task can come back within the test only by the leave.
const LONG_LEASES: [&str; 4] = ["--trainer-lease-ms", "60000", "--task-timeout-min-ms", "60000"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigtermed_trainer_gives_its_task_back_at_once() {
    let dir = tempfile::tempdir().expect("temp");
    // Long enough (about 80 tasks a pass) that the pause lands well before the job ends: a job
    // of 8 tasks a pass once finished between two polls of the status.
    let (train, _eval) = synth(dir.path(), "blobs", "30000", "2.5");
    let mut args = vec!["--dataset", &train, "--features", "8"];
    args.extend(SOFTMAX);
    let mut job = TrainingJob::start_with(1, 1, dir.path(), &LONG_LEASES, &args);
    let trainer = job.spawn_trainer();
    let status = wait_for(&job, |status| status.done >= 2, "tasks done").await;
    assert_eq!(status.trainers.len(), 1, "{status:?}");
    assert!(!status.job_finished, "the job is still under way: {status:?}");

    tracing::info!("--- the pserver hangs, so the trainer's task cannot end; SIGTERM");
    job.pservers.signal(0, Signal::SIGSTOP);
    wait_for(&job, |status| status.pending == 1, "a task held").await;
    job.signal_trainer(trainer, Signal::SIGTERM);
    let (exit, log) = job.wait_trainer(trainer, Duration::from_secs(30));
    assert!(exit.success(), "a stopped trainer exits 0\n{log}");
    assert!(log.contains("left the job requeued=1"), "it gave its task back:\n{log}");
    let status = wait_for(&job, |status| status.pending == 0, "the task back in the queue").await;
    assert!(status.trainers.is_empty(), "the trainer is gone from the job: {status:?}");
    job.pservers.signal(0, Signal::SIGCONT);
}

/// Polls the job's status until `done` holds (at most 20 s, a third of the leases).
async fn wait_for(
    job: &TrainingJob,
    done: impl Fn(&client::JobStatus) -> bool,
    what: &str,
) -> client::JobStatus {
    for _ in 0..200 {
        let status = job.masters.status().await;
        if done(&status) {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never {what}: {:?}\n{}", job.masters.status().await, job.logs());
}

/// A forged `LeaveJob` naming a live trainer (trainer ids are public in status) costs work,
/// never data: the trainer is told it is unknown, registers again and carries on, a report for
/// the task it held is fenced off (the task went back with a newer epoch), and the job ends
/// with every task finished and none failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_leave_costs_a_live_trainer_its_task_not_the_job() {
    let dir = tempfile::tempdir().expect("temp");
    // Long enough (about 80 tasks a pass) that the leave lands well before the job ends.
    let (train, _eval) = synth(dir.path(), "blobs", "30000", "2.5");
    let mut args = vec!["--dataset", &train, "--features", "8"];
    args.extend(SOFTMAX);
    let mut job = TrainingJob::start_with(1, 1, dir.path(), &LONG_LEASES, &args);
    job.spawn_trainer();
    let status =
        wait_for(&job, |status| status.done >= 2 && !status.trainers.is_empty(), "tasks done")
            .await;
    let victim = status.trainers[0].id;

    tracing::info!("--- a forged LeaveJob for trainer {victim}");
    let mut service = job.masters.leader_service().await;
    let forged = proto::master::LeaveJobRequest {
        stamp: Some(proto::master::ClientStamp { client_id: 0x00f0_5ed1, seq: 1 }),
        job: String::new(),
        trainer_id: victim,
    };
    // It held a task unless the leave fell between a report and the next ask.
    let left = service.leave_job(forged).await.expect("a token-holding client may send it");
    tracing::info!(requeued = left.into_inner().requeued, "the forged leave applied");
    job.wait_trainers(Duration::from_secs(180));
    let status = job.masters.status().await;
    assert!(status.job_finished, "{status:?}");
    assert_eq!(status.failed, 0, "{:?}", status.failed_tasks);
    let logs = job.logs();
    assert!(logs.contains("registered again"), "the trainer registered again:\n{logs}");
}
