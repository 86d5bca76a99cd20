//! Every master replaced while a real training job runs: two pservers and two trainers, all
//! started with the three original master addresses, keep training while the group grows from
//! 3 to 5 (`master --join`), a dead member is removed, the group shrinks back to 3 (`member
//! remove`, the leader among the removed at times), and the last original master is replaced
//! on a new address; every process learns the new members from the leader, the trainers exit
//! 0 and the job finishes with no failed task.

use std::time::Duration;

use crate::command::raftrain_ok;
use crate::training::{synth, wait_for_done};
use crate::training_job::TrainingJob;

fn start_job(dir: &std::path::Path) -> TrainingJob {
    let (train, _) = synth(dir, "blobs", "20000", "2.5");
    let args = [
        "--dataset",
        &train,
        "--model",
        "softmax",
        "--classes",
        "3",
        "--passes",
        "60",
        "--batch-size",
        "32",
        "--learning-rate",
        "0.05",
    ];
    TrainingJob::start(3, 2, dir, &args)
}

/// The ids `member list` shows as voters, through `masters`.
fn voters(masters: &str) -> Vec<u64> {
    let text = raftrain_ok(&["member", "list", "--json", "--masters", masters], b"");
    let listed: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let rows = listed["members"].as_array().expect("members").clone();
    rows.iter().filter(|row| row["voter"] == true).filter_map(|row| row["id"].as_u64()).collect()
}

/// Waits (300 looks, 200 ms apart) until `through` lists exactly `want` as voters.
async fn wait_voters(job: &TrainingJob, through: &str, want: &[u64]) {
    for _ in 0..300 {
        if voters(through) == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the voters never became {want:?}\n{}", job.logs());
}

/// The addresses of the masters still running (started and not reaped), joined with commas.
fn live(job: &TrainingJob) -> String {
    let count = job.masters.addrs.len();
    let running = (0..count).filter(|index| job.masters.pid(*index).is_some());
    let addrs: Vec<String> = running.map(|index| job.masters.addrs[index].clone()).collect();
    addrs.join(",")
}

/// Removes member `index + 1` through the running masters; a live one must then stop.
fn remove(job: &mut TrainingJob, index: usize, alive: bool) {
    let through = live(job);
    raftrain_ok(&["member", "remove", &(index + 1).to_string(), "--masters", &through], b"");
    if alive {
        let exited = job.masters.wait_exit(index, Duration::from_secs(20));
        assert!(exited.is_some(), "removed master {} still runs\n{}", index + 1, job.logs());
    }
}

/// Neither trainer stopped.
fn assert_training(job: &mut TrainingJob) {
    for trainer in 0..2 {
        assert_eq!(job.trainer_exit(trainer), None, "trainer {trainer} stopped\n{}", job.logs());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_training_job_keeps_going_while_every_master_is_replaced() {
    let dir = tempfile::tempdir().expect("temp");
    let mut job = start_job(dir.path());
    job.spawn_trainer();
    job.spawn_trainer();
    wait_for_done(&job, 5).await;
    let original = job.masters.addrs.clone();

    tracing::info!("--- grow from 3 to 5");
    job.masters.add_joiner(&original);
    job.masters.add_joiner(&original);
    let through = live(&job);
    wait_voters(&job, &through, &[1, 2, 3, 4, 5]).await;
    assert_training(&mut job);

    tracing::info!("--- master 1 dies and is removed; then back to 3 by removing master 2");
    job.masters.kill(0);
    remove(&mut job, 0, false);
    remove(&mut job, 1, true);
    let through = live(&job);
    wait_voters(&job, &through, &[3, 4, 5]).await;
    assert_training(&mut job);

    tracing::info!("--- the last original master is replaced on a new address");
    job.masters.add_joiner(&original[2..]);
    let through = live(&job);
    wait_voters(&job, &through, &[3, 4, 5, 6]).await;
    remove(&mut job, 2, true);
    let through = live(&job);
    wait_voters(&job, &through, &[4, 5, 6]).await;
    assert_training(&mut job);

    tracing::info!("--- the trainers, given only the original addresses, finish the job");
    job.wait_trainers(Duration::from_secs(300));
    let now: Vec<String> = job.masters.addrs[3..].to_vec();
    assert_eq!(voters(&now.join(",")), vec![4, 5, 6]);
    let client = client::MasterClient::new(&now, client::ClientOptions::default()).expect("client");
    let status = client.status().await.expect("status");
    assert!(status.job_finished, "{status:?}");
    assert_eq!(status.failed, 0, "{status:?}");
}
