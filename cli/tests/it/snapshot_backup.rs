//! `raftrain snapshot save|status|restore` with real masters: a save taken while a job's
//! tasks are taken and finished restores a new group (new ports, new directories) after the
//! old one was killed and deleted, and the job goes on from the save: the tasks finished after
//! it are done again, none is skipped, the job finishes. A damaged file is refused naming
//! where; a group without a leader fails the save within its deadline.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use client::{MasterClient, TaskOutcome};

use crate::command::{raftrain, raftrain_ok};
use crate::master_group::MasterGroup;

const TASKS: u64 = 40;
const JOB: &str = "backed";

/// Each task finish this worker had acknowledged, and when.
type Finished = Arc<Mutex<Vec<(u64, Instant)>>>;

/// Takes and finishes tasks of the job until it finishes or `stop` is set, a few ms apart so
/// that a save lands in the middle; heartbeats keep the trainer's lease.
async fn work(client: Arc<MasterClient>, finished: Finished, stop: Arc<Mutex<bool>>) {
    let trainer = client.register_trainer("worker").await.expect("register").trainer_id;
    let beating = client.clone();
    let heartbeat = tokio::spawn(async move {
        loop {
            let _ = beating.heartbeat(trainer, 0).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    });
    while !*stop.lock().expect("not poisoned") {
        match client.get_task(trainer, 0).await.expect("get_task") {
            TaskOutcome::Task(task) => {
                tokio::time::sleep(Duration::from_millis(40)).await;
                assert!(client.task_finished(task.task_id, task.epoch).await.expect("finish"));
                finished.lock().expect("not poisoned").push((task.task_id, Instant::now()));
            }
            TaskOutcome::NoMoreAvailable => tokio::time::sleep(Duration::from_millis(200)).await,
            TaskOutcome::JobFinished | TaskOutcome::PassBefore { .. } => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    heartbeat.abort();
}

fn count(finished: &Finished) -> usize {
    finished.lock().expect("not poisoned").len()
}

/// The done count `snapshot status --json` reads from the file for the job.
fn saved_done(file: &Path) -> u64 {
    let text = raftrain_ok(&["snapshot", "status", &file.display().to_string(), "--json"], b"");
    let status: serde_json::Value = serde_json::from_str(&text).expect("status prints JSON");
    let job = &status["jobs"][0];
    assert_eq!(job["name"], JOB, "{text}");
    assert!(status["index"].as_u64().expect("an index") > 0, "{text}");
    job["done"].as_u64().expect("a done count")
}

/// Seeds every member of `group` (not started) from `file`, then starts them.
fn restore_into(group: &mut MasterGroup, file: &Path) {
    let peers: Vec<String> = group
        .addrs
        .iter()
        .enumerate()
        .map(|(index, addr)| format!("{}={addr}", index + 1))
        .collect();
    let peers = peers.join(",");
    for index in 0..group.addrs.len() {
        let data_dir = group.dir.path().join(format!("master-{}", index + 1));
        let id = (index + 1).to_string();
        let (file, data_dir) = (file.display().to_string(), data_dir.display().to_string());
        let args = ["snapshot", "restore", &file, "--data-dir", &data_dir, "--id", &id];
        let out = raftrain_ok(&[&args[..], &["--peers", &peers]].concat(), b"");
        assert!(out.contains("terms start at"), "{out}");
        let again = raftrain(&[&args[..], &["--peers", &peers]].concat(), b"");
        assert!(!again.success && again.stderr.contains("not empty"), "{}", again.stderr);
        group.spawn(index);
    }
}

/// A save while the job trains restores a new group that redoes what came after the save.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_group_goes_on_from_the_save_and_finishes_the_job() {
    let backups = tempfile::tempdir().expect("a temp dir");
    let file = backups.path().join("group.backup");
    let old = MasterGroup::start(3, &["--trainer-lease-ms", "3000"]);
    let masters = old.addrs.join(",");
    let submit = ["job", "submit", "--masters", &masters, "--name", JOB, "--index", "40"];
    raftrain_ok(&[&submit[..], &["--shard-size", "1", "--passes", "1"]].concat(), b"");

    tracing::info!("--- save while the worker takes and finishes tasks");
    let finished = Finished::default();
    let stop = Arc::new(Mutex::new(false));
    let worker = tokio::spawn(work(Arc::new(old.client()), finished.clone(), stop.clone()));
    while count(&finished) < 8 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let save_started = Instant::now();
    let save_args = ["snapshot", "save", &file.display().to_string(), "--masters", &masters]
        .map(str::to_string);
    let saved = tokio::task::spawn_blocking(move || {
        raftrain(&save_args.iter().map(String::as_str).collect::<Vec<_>>(), b"")
    })
    .await
    .expect("the save runs");
    let save_ended = Instant::now();
    assert!(saved.success, "{}\n{}", saved.stderr, old.logs());
    let done_at_save = count(&finished);
    while count(&finished) < done_at_save + 8 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    *stop.lock().expect("not poisoned") = true;
    worker.await.expect("the worker stops");

    tracing::info!("--- kill the old group and delete its directories");
    drop(old);
    let saved_done = saved_done(&file);

    tracing::info!("--- restore a new group on new ports and directories; it finishes the job");
    let mut new = MasterGroup::prepare(3, &["--trainer-lease-ms", "3000"]);
    restore_into(&mut new, &file);
    let redone = Finished::default();
    let client = Arc::new(new.client());
    work(client.clone(), redone.clone(), Arc::default()).await;
    let status = client.status_of(JOB).await.expect("status of the restored job");
    assert!(status.job_finished, "{status:?}");
    let gap = consensus::restore::RESTORED_TERM_GAP;
    assert!(status.group.term > gap, "a new identity: terms start above the gap {status:?}");

    let old_finished = finished.lock().expect("not poisoned").clone();
    let new_set: BTreeSet<u64> =
        redone.lock().expect("not poisoned").iter().map(|(id, _)| *id).collect();
    assert_eq!(new_set.len() as u64 + saved_done, TASKS, "no task skipped, none done twice");
    for (task, at) in &old_finished {
        if *at < save_started {
            assert!(!new_set.contains(task), "task {task} finished before the save was redone");
        }
        if *at > save_ended {
            assert!(new_set.contains(task), "task {task} finished after the save was not redone");
        }
    }
    let after: Vec<_> = old_finished.iter().filter(|(_, at)| *at > save_ended).collect();
    assert!(!after.is_empty(), "tasks were finished after the save");
}

/// `snapshot status` reads a good file and refuses a truncated or bit-flipped one, naming
/// the file and where; a group without a leader fails the save within its deadline, and no
/// file is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_files_and_a_leaderless_group_are_refused_clearly() {
    let backups = tempfile::tempdir().expect("a temp dir");
    let file = backups.path().join("group.backup");
    let path = file.display().to_string();
    let mut group = MasterGroup::start(3, &[]);
    let masters = group.addrs.join(",");
    raftrain_ok(&["snapshot", "save", &path, "--masters", &masters], b"");
    let text = raftrain_ok(&["snapshot", "status", &path], b"");
    assert!(text.contains("index") && text.contains("crc32") && text.contains("no jobs"), "{text}");

    tracing::info!("--- a truncated and a bit-flipped file are refused, naming where");
    let bytes = std::fs::read(&file).expect("the backup reads");
    let mut term_flipped = bytes.clone();
    term_flipped[24] ^= 1;
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("truncated", bytes[..bytes.len() - 3].to_vec(), "truncated"),
        ("header cut", bytes[..20].to_vec(), "shorter than the 48-byte header"),
        ("bit flipped", flip_last_bit(&bytes), "checksum mismatch"),
        ("term flipped", term_flipped, "header checksum mismatch over bytes 0..44"),
    ];
    for (name, damaged, want) in cases {
        std::fs::write(&file, damaged).expect("write the damaged copy");
        let out = raftrain(&["snapshot", "status", &path], b"");
        assert!(!out.success, "{name}");
        assert!(out.stderr.contains(want) && out.stderr.contains(&path), "{name}: {}", out.stderr);
    }

    tracing::info!("--- with two of three masters gone the save fails within its deadline");
    group.kill(1);
    group.kill(2);
    let lost = backups.path().join("lost.backup");
    let lost_path = lost.display().to_string();
    let out = raftrain(
        &["snapshot", "save", &lost_path, "--masters", &masters, "--timeout-ms", "3000"],
        b"",
    );
    assert_eq!(out.code, Some(75), "retryable: {}", out.stderr);
    assert!(out.stderr.contains("no master leader answered"), "{}", out.stderr);
    assert!(!lost.exists(), "no file is written by a failed save");
}

fn flip_last_bit(bytes: &[u8]) -> Vec<u8> {
    let mut flipped = bytes.to_vec();
    *flipped.last_mut().expect("a backup is not empty") ^= 1;
    flipped
}
