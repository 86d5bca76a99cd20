//! Progress checkpoints with the model, with real processes (3 masters, 2 pservers of a named
//! job): `job checkpoint` has both pservers write and record checkpoints of their own under
//! its id; after more training and a pserver killed with SIGKILL, `job restore` brings the
//! model back bit for bit on both slots (one reloaded in place, one restored by the dead
//! holder's replacement) before the queue goes back to exactly the checkpoint's tasks; once
//! newer progress checkpoints keep their files, its files are removed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client::pserver::layout::{JobLayout, ParamSpec};
use client::pserver::PServerClient;
use master::state::MODEL_TAGS_KEPT;
use optimizer::{OptimizerConfig, OptimizerKind};

use crate::command::raftrain_ok;
use crate::master_group::MasterGroup;
use crate::named_jobs::{client_of, completed_in, job_list, train_until, wait_until};
use crate::pserver_processes::PServerProcesses;
use crate::task_consumer::{spawn_consumers, History};

fn layout() -> JobLayout {
    let params = vec![
        ParamSpec { name: "w".into(), shape: vec![100, 1000] },
        ParamSpec { name: "b".into(), shape: vec![10] },
    ];
    let optimizer = OptimizerConfig { learning_rate: 0.5, kind: OptimizerKind::MOMENTUM_DEFAULT };
    JobLayout { params, block_elements: 16_384, slot_count: 2, optimizer }
}

fn initial() -> BTreeMap<String, Vec<f32>> {
    let w = (0..100_000).map(|i| (i % 89) as f32 * 0.01).collect();
    BTreeMap::from([("w".to_string(), w), ("b".to_string(), vec![1.0; 10])])
}

fn tensors(values: &BTreeMap<String, Vec<f32>>) -> Vec<(&str, &[f32])> {
    values.iter().map(|(name, values)| (name.as_str(), values.as_slice())).collect()
}

async fn push_some(client: &PServerClient, count: usize) {
    let w = (0..100_000).map(|i| ((i % 13) as f32 - 6.0) * 0.001).collect();
    let gradient = BTreeMap::from([("w".to_string(), w), ("b".to_string(), vec![0.1; 10])]);
    for _ in 0..count {
        client.push(&layout(), &tensors(&gradient)).await.expect("push");
    }
}

/// Job `name`'s entry of `job list --json`.
fn listed(group: &MasterGroup, name: &str) -> serde_json::Value {
    let list = job_list(group);
    let jobs = list["jobs"].as_array().cloned().unwrap_or_default();
    jobs.into_iter().find(|job| job["name"] == name).unwrap_or(serde_json::Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_brings_the_model_back_with_the_data() {
    let group = MasterGroup::start(3, &["--pserver-lease-ms", "1500"]);
    let masters = group.addrs.join(",");
    let submit = ["job", "submit", "--masters", &masters, "--name", "m", "--index", "20"];
    let mut args = submit.to_vec();
    args.extend(["--shard-size", "1", "--passes", "2"]);
    raftrain_ok(&args, b"");
    let dir = tempfile::tempdir().expect("temp");
    let mut pservers = PServerProcesses::new(&group.addrs, dir.path(), 2);
    pservers.spawn_with(&["--job", "m"]);
    let doomed = pservers.spawn_with(&["--job", "m"]);
    let client = PServerClient::new(
        Arc::new(client_of(&group, "m")),
        1,
        crate::pserver_processes::test_client_options(),
    );
    client.wait_for_slots(Some(Duration::from_secs(30))).await.expect("both slots held");
    client.init_or_wait(&layout(), &tensors(&initial())).await.expect("init");
    push_some(&client, 3).await;
    let history = Arc::new(Mutex::new(History::default()));
    train_until(&client_of(&group, "m"), &history, 8).await;
    let done_at_checkpoint = completed_in(&history, 0);

    tracing::info!("--- a progress checkpoint: both pservers record theirs under its id");
    let taken = raftrain_ok(&["job", "checkpoint", "m", "--masters", &masters, "--json"], b"");
    let taken: serde_json::Value = serde_json::from_str(taken.trim()).expect("json");
    assert_eq!(taken["pservers_asked"], true, "{taken}");
    let id = taken["checkpoint"].as_u64().expect("an id");
    let tagged = || listed(&group, "m")["newest_model_checkpoint"].as_u64() == Some(id);
    wait_until(Duration::from_secs(30), tagged, || pservers.logs());
    let table = raftrain_ok(&["job", "list", "--masters", &masters], b"");
    assert!(table.contains(&format!("{id} (with model)")), "{table}");
    let at_checkpoint = client.pull(&layout()).await.expect("pull");
    let kept = progress_dirs(&group, dir.path(), id);
    assert_eq!(kept, 1, "the files taken for it are kept in its own directory");

    tracing::info!("--- more training, then one pserver is killed and a standby waits");
    push_some(&client, 4).await;
    train_until(&client_of(&group, "m"), &history, 14).await;
    let later = client.pull(&layout()).await.expect("pull");
    assert_ne!(later, at_checkpoint, "training moved the model on");
    pservers.kill(doomed);
    pservers.spawn_with(&["--job", "m"]);

    tracing::info!("--- restore: the model first, then the queue");
    let restore = ["job", "restore", "m", "--checkpoint", &id.to_string(), "--masters", &masters];
    let restored = raftrain_ok(&restore, b"");
    assert!(restored.contains("with its model"), "{restored}");
    assert_eq!(listed(&group, "m")["reloads_waiting"], 0);
    let back = client.pull(&layout()).await.expect("pull after the restore");
    assert!(
        back == at_checkpoint,
        "the model is back bit for bit on both slots\n{}",
        pservers.logs()
    );

    tracing::info!("--- new trainers redo exactly the tasks not done at the checkpoint");
    let after = Arc::new(Mutex::new(History::default()));
    let work = Duration::from_millis(5);
    let trainers = spawn_consumers(2, "v", work, &after, || client_of(&group, "m"));
    for trainer in trainers {
        trainer.await.expect("a trainer ran to the end");
    }
    let mut redone = completed_in(&after, 0);
    redone.sort_unstable();
    let expected: Vec<u64> = (0..20).filter(|task| !done_at_checkpoint.contains(task)).collect();
    assert_eq!(redone, expected, "pass 0 redoes exactly what was not done at the checkpoint");
    push_some(&client, 1).await;
    assert_ne!(client.pull(&layout()).await.expect("pull"), at_checkpoint, "training goes on");

    tracing::info!("--- once newer progress checkpoints keep theirs, its files go");
    for _ in 0..MODEL_TAGS_KEPT {
        let taken = raftrain_ok(&["job", "checkpoint", "m", "--masters", &masters, "--json"], b"");
        let taken: serde_json::Value = serde_json::from_str(taken.trim()).expect("json");
        let newer = taken["checkpoint"].as_u64().expect("an id");
        let tagged = || listed(&group, "m")["newest_model_checkpoint"].as_u64() == Some(newer);
        wait_until(Duration::from_secs(30), tagged, || pservers.logs());
    }
    let gone = || progress_dirs(&group, dir.path(), id) == 0;
    wait_until(Duration::from_secs(30), gone, || pservers.logs());
}

/// How many directories of progress checkpoint `id` job m's pservers keep under `dir`.
fn progress_dirs(group: &MasterGroup, dir: &std::path::Path, id: u64) -> usize {
    let job_id = listed(group, "m")["job_id"].as_u64().expect("the job's incarnation id");
    let job_dir = pserver::job_dir::job_checkpoint_dir(&dir.join("checkpoints"), job_id, "m");
    let entries = std::fs::read_dir(job_dir).expect("the job's checkpoint directory");
    let name = format!("progress-{id}");
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy() == name)
        .count()
}
