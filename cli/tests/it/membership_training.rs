//! Every master replaced while a real training job runs: two pservers and two trainers, all
//! started with the three original master addresses, keep training while each original master
//! is replaced in turn by a new one on a new address (`master --join`, then `member remove` of
//! the old one, the leader among them); every process learns the new members from the leader,
//! the trainers exit 0 and the job finishes with no failed task.

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
        "40",
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_training_job_keeps_going_while_every_master_is_replaced() {
    let dir = tempfile::tempdir().expect("temp");
    let mut job = start_job(dir.path());
    job.spawn_trainer();
    job.spawn_trainer();
    wait_for_done(&job, 5).await;
    let original = job.masters.addrs.clone();

    for old in 0..3 {
        tracing::info!(old, "--- a new master joins, then the old one is removed");
        let new = job.masters.add_joiner(&original);
        let live: Vec<String> = (old..=new).map(|index| job.masters.addrs[index].clone()).collect();
        let live = live.join(",");
        let mut joined = false;
        for _ in 0..300 {
            joined = voters(&live).contains(&(new as u64 + 1));
            if joined {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(joined, "master {} never became a voter\n{}", new + 1, job.logs());
        raftrain_ok(&["member", "remove", &(old + 1).to_string(), "--masters", &live], b"");
        let exited = job.masters.wait_exit(old, Duration::from_secs(20));
        assert!(exited.is_some(), "removed master {} still runs\n{}", old + 1, job.logs());
        for trainer in 0..2 {
            assert_eq!(
                job.trainer_exit(trainer),
                None,
                "trainer {trainer} stopped\n{}",
                job.logs()
            );
        }
    }

    tracing::info!("--- the trainers, given only the original addresses, finish the job");
    job.wait_trainers(Duration::from_secs(300));
    let now: Vec<String> = job.masters.addrs[3..].to_vec();
    assert_eq!(voters(&now.join(",")), vec![4, 5, 6]);
    let client = client::MasterClient::new(&now, client::ClientOptions::default()).expect("client");
    let status = client.status().await.expect("status");
    assert!(status.job_finished, "{status:?}");
    assert_eq!(status.failed, 0, "{status:?}");
}
