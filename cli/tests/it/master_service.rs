//! The master service through real processes: redirects from followers, errors a person can
//! act on, the `status --json` contract, and the pserver watch stream.

use crate::command::{raftrain, raftrain_ok};
use crate::master_group::MasterGroup;
use crate::task_consumer::write_dataset;
use client::{ClientError, Fault, LEADER_METADATA_KEY};
use proto::master::{ClientStamp, ReportDatasetRequest};
use std::time::Duration;

fn report(patterns: Vec<String>, seq: u64) -> ReportDatasetRequest {
    let stamp = ClientStamp { client_id: 7, seq };
    ReportDatasetRequest {
        stamp: Some(stamp),
        job: "job".into(),
        patterns,
        passes: 1,
        restart: false,
        shuffle_seed: None,
    }
}

/// A write sent to a follower fails with UNAVAILABLE and names the leader's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_redirects_to_the_leader() {
    let group = MasterGroup::start(3, &[]);
    let leader = group.leader_index().await;
    let follower = (leader + 1) % 3;
    let mut service = proto::master::master_service_client::MasterServiceClient::connect(format!(
        "http://{}",
        group.addrs[follower]
    ))
    .await
    .expect("connect to a follower");
    // A follower names the leader once it heard from it (a new leader's first heartbeat may
    // not have reached it yet on a loaded machine); until then it refuses without a name.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let named = loop {
        let status = service
            .report_dataset(report(vec!["x".into()], 1))
            .await
            .expect_err("a follower refuses writes");
        assert_eq!(status.code(), tonic::Code::Unavailable);
        if let Some(named) = status.metadata().get(LEADER_METADATA_KEY) {
            break named.to_str().expect("an address").to_string();
        }
        assert!(std::time::Instant::now() < deadline, "the follower never named the leader");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(named, group.addrs[leader]);
}

/// A missing or corrupt dataset is refused as INVALID_ARGUMENT naming the file (and offset),
/// and the replicated state stays untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_datasets_are_refused_with_file_and_offset() {
    let group = MasterGroup::start(3, &[]);
    let client = group.client();
    let missing = group.dir.path().join("missing-*.recordio").display().to_string();
    let good = write_dataset(group.dir.path(), 3);
    let corrupt = group.dir.path().join("corrupt.recordio");
    let mut bytes = std::fs::read(&good).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&corrupt, bytes).unwrap();
    let corrupt = corrupt.display().to_string();
    for (patterns, expected) in [
        (vec![missing.clone()], missing.clone()),
        (vec![corrupt.clone()], format!("{corrupt}: byte 0")),
    ] {
        let error =
            client.report_dataset("job", &patterns, 1).await.expect_err("a bad dataset is refused");
        let message = error.to_string();
        let invalid = matches!(error, ClientError::InvalidArgument { .. });
        assert!(invalid && message.contains(&expected), "{message}");
    }
    let status = group.status().await;
    assert!(status.job.is_none() && status.todo == 0, "nothing was applied: {status:?}");
}

/// `raftrain status --json` prints one object with every contract key, naming the leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_json_contract() {
    let group = MasterGroup::start(3, &[]);
    let leader = group.leader_index().await;
    let masters = group.addrs.join(",");
    let output = tokio::task::spawn_blocking(move || {
        raftrain_ok(&["status", "--masters", &masters, "--json"], b"")
    })
    .await
    .unwrap();
    let json: serde_json::Value = serde_json::from_str(&output).expect("one JSON object");
    for key in [
        "leader",
        "term",
        "members",
        "pass",
        "todo",
        "pending",
        "done",
        "failed",
        "trainers",
        "pservers",
        "eval",
        "job_finished",
        "dataset_kind",
        "dataset_size",
        "shard_size",
    ] {
        assert!(json.get(key).is_some(), "missing {key} in {output}");
    }
    assert_eq!(json["leader"], serde_json::json!(leader + 1));
    assert_eq!(json["members"].as_array().map(Vec::len), Some(3));
    assert_eq!(json["eval"], serde_json::Value::Null);
    assert_eq!(json["dataset_kind"], serde_json::Value::Null, "no dataset reported yet");
}

/// `WatchPServers` sends the table at once and again when a pserver claims a slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_pserver_changes() {
    let group = MasterGroup::start(3, &[]);
    let client = group.client();
    let mut watch = client.watch_pservers();
    let first = watch.next().await.expect("a table").expect("the watch is open");
    assert!(first.pservers.is_empty());
    let secret = client::new_slot_secret();
    let lease = client.claim_slot("127.0.0.1:7101", 2, secret).await.expect("claim a slot");
    let lease = lease.expect("a free slot is granted");
    let next = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("a change arrives");
    let table = next.expect("a table").expect("the watch is open");
    assert_eq!(table.desired, 2);
    assert_eq!(table.pservers.len(), 1);
    assert_eq!(table.pservers[0].addr, "127.0.0.1:7101");
    assert_eq!(table.pservers[0].generation, lease.generation);
}

/// Bad flags are refused before anything starts, naming the flag; `--help` documents flags.
#[test]
fn master_flags_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().display().to_string();
    let base = ["master", "--id", "1", "--listen", "127.0.0.1:0", "--data-dir", &data_dir];
    let output = raftrain(&[&base[..], &["--peers", "1=127.0.0.1:1,x"]].concat(), b"");
    let named = output.stderr.contains("--peers") && output.stderr.contains("`x`");
    assert!(!output.success && named, "the flag and the bad item are named: {}", output.stderr);
    let output = raftrain(&[&base[..], &["--peers", "2=127.0.0.1:2"]].concat(), b"");
    assert!(
        !output.success && output.stderr.contains("node id 1 is not in the peer list"),
        "id 1 is not among the peers: {}",
        output.stderr
    );
    let peers = ["--peers", "1=127.0.0.1:1"];
    for (flag, value, named) in [
        ("--worker-threads", "0", "--worker-threads"),
        ("--chunks-per-task", "1025", "--chunks-per-task must be 1 to 1024"),
        ("--metrics-listen", "nowhere", "--metrics-listen"),
        ("--metrics-listen", "192.0.2.1:1", "bind --metrics-listen 192.0.2.1:1"),
    ] {
        let output = raftrain(&[&base[..], &peers[..], &[flag, value]].concat(), b"");
        assert!(
            !output.success && output.stderr.contains(named),
            "{flag} {value}: {}",
            output.stderr
        );
    }
    let help = raftrain_ok(&["master", "--help"], b"");
    for flag in [
        "--peers",
        "--data-dir",
        "--chunks-per-task",
        "--task-timeout-min-ms",
        "--max-task-failures",
        "--metrics-listen",
        "--worker-threads",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
}

/// A dataset whose chunk list is far larger than one log entry is reported in batches, and a
/// second report of it is recognised as the same job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_dataset_is_reported_in_batches() {
    let group = MasterGroup::start(3, &[]);
    let dataset = write_dataset(group.dir.path(), 20_000);
    let client = group.client();
    let task_count = crate::task_consumer::report_dataset(&client, &dataset, 1).await;
    assert_eq!(task_count, 20_000);
    assert_eq!(crate::task_consumer::report_dataset(&group.client(), &dataset, 1).await, 20_000);
    let status = group.status().await;
    assert_eq!((status.todo, status.job.as_deref()), (20_000, Some("e2e")));
}

/// A repeated report of the same files is answered with the accepted counts, also after a
/// leader change; once a file changes, the report is refused as a different dataset and the
/// accepted job stays as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_reports_repeat_the_answer_until_a_file_changes() {
    let mut group = MasterGroup::start(3, &[]);
    let client = group.client();
    let dataset = write_dataset(group.dir.path(), 4);
    let send = |passes: u32| {
        let (client, dataset) = (&client, dataset.clone());
        async move { client.report_dataset("job", &[dataset], passes).await }
    };
    let first = send(1).await.expect("the first report is accepted");
    assert_eq!((first.task_count, first.chunk_count, first.record_count), (4, 4, 4));
    assert_eq!(send(1).await.expect("a repeat is accepted"), first);
    let leader = group.leader_index().await;
    group.kill(leader);
    assert_eq!(send(1).await.expect("a repeat on the new leader is accepted"), first);
    let refused = send(2).await.expect_err("other passes are a different spec").to_string();
    assert!(refused.contains("different dataset"), "{refused}");

    let mut bytes = std::fs::read(&dataset).unwrap();
    bytes.extend_from_within(..bytes.len() / 4);
    std::fs::write(&dataset, bytes).unwrap();
    let refused = send(1).await.expect_err("a changed file is a different dataset").to_string();
    assert!(refused.contains("different dataset"), "{refused}");
    let status = group.status().await;
    assert_eq!(status.todo + status.pending + status.done, 4, "the accepted job is unchanged");
}

/// Every typed `MasterClient` method once, against a real group: tasks, fenced reports, slots
/// with generations (a stale checkpoint and a wrong generation told apart), evals, the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typed_client_covers_every_call() {
    use client::{
        new_slot_secret, CheckpointMeta, CheckpointRecorded, SlotHeartbeat, SlotLease, TaskData,
        TaskOutcome, TrainerHeartbeat,
    };
    let group = MasterGroup::start(3, &[]);
    let client = group.client();
    let dataset = write_dataset(group.dir.path(), 3);
    let trainer = client.register_trainer("typed").await.expect("register").trainer_id;
    assert_eq!(client.heartbeat(trainer, 0).await.expect("heartbeat"), TrainerHeartbeat::Known);
    let sizes = client.report_dataset("job", &[dataset], 1).await.expect("report");
    assert_eq!((sizes.task_count, sizes.chunk_count), (3, 3));
    let TaskOutcome::Task(task) = client.get_task(trainer, 0).await.expect("get") else {
        panic!("a task is handed out");
    };
    assert!(matches!(&task.data, TaskData::Chunks(chunks) if chunks.len() == 1), "{task:?}");
    assert!(client.task_finished(task.task_id, task.epoch).await.expect("finish"));
    assert!(!client.task_finished(task.task_id, task.epoch).await.expect("again"), "stale");
    let TaskOutcome::Task(next) = client.get_task(trainer, 0).await.expect("get") else {
        panic!("a second task is handed out");
    };
    // A reason far longer than one log entry is cut by the master, not refused.
    let long_reason = "x".repeat(1 << 20);
    assert!(client
        .task_failed(next.task_id, next.epoch, &long_reason, Fault::Content)
        .await
        .expect("fail"));

    let lease = client.claim_slot("127.0.0.1:7101", 1, new_slot_secret()).await.expect("claim");
    let lease = lease.expect("granted");
    assert!(lease.generation > 0 && lease.checkpoint.is_none());
    let holds = client.slot_heartbeat(&lease, "127.0.0.1:7101", 5).await;
    assert!(matches!(holds.expect("heartbeat"), SlotHeartbeat::Held(_)));
    let other_generation = SlotLease { generation: lease.generation + 1, ..lease.clone() };
    let wrong = client.slot_heartbeat(&other_generation, "127.0.0.1:7101", 5).await;
    assert_eq!(wrong.expect("heartbeat"), SlotHeartbeat::NotHeld, "another generation");
    let other_secret = SlotLease { secret: new_slot_secret(), ..lease.clone() };
    let wrong = client.slot_heartbeat(&other_secret, "127.0.0.1:7101", 5).await;
    assert_eq!(wrong.expect("heartbeat"), SlotHeartbeat::NotHeld, "another secret");
    let meta = |lease: &SlotLease, step| CheckpointMeta {
        path: format!("/ckpt/{}", storage::checkpoint::file_name(0, step, lease.generation)),
        step,
        crc32: 1,
        created_ms: 2,
    };
    let record = |lease: SlotLease, step| {
        let client = &client;
        async move { client.record_checkpoint(&lease, &meta(&lease, step)).await }
    };
    assert_eq!(record(lease.clone(), 5).await.expect("record"), CheckpointRecorded::Recorded);
    let stale = record(lease.clone(), 4).await.expect("record");
    assert_eq!(stale, CheckpointRecorded::Stale { recorded_step: 5 }, "names the master's step");
    let refused = record(other_generation, 9).await.expect_err("a wrong generation");
    assert!(matches!(refused, ClientError::NotHolder { .. }), "{refused}");
    let refused = record(other_secret, 9).await.expect_err("a wrong secret");
    assert!(matches!(refused, ClientError::NotHolder { .. }), "{refused}");
    let refused = record(lease.clone(), 1 << 62).await.expect_err("far beyond the heartbeat");
    assert!(matches!(refused, ClientError::InvalidArgument { .. }), "{refused}");
    let unnamed = CheckpointMeta { path: "/nonexistent".into(), ..meta(&lease, 9) };
    let refused = client.record_checkpoint(&lease, &unnamed).await.expect_err("not the naming");
    assert!(matches!(refused, ClientError::InvalidArgument { .. }), "{refused}");
    let full = client.claim_slot("127.0.0.1:7102", 1, new_slot_secret()).await.expect("claim");
    assert!(full.is_none(), "full");

    client.record_eval(0, 0.5, 0.75).await.expect("eval");
    let refused = client.record_eval(0, 0.5, 1.5).await.expect_err("accuracy over 1");
    assert!(matches!(refused, ClientError::InvalidArgument { .. }), "{refused}");
    let table = client.list_pservers().await.expect("list");
    assert_eq!((table.desired, table.pservers.len()), (1, 1));
    let mut watch = client.watch_pservers();
    assert_eq!(watch.next().await.expect("a table").expect("open"), table);
    let status = client.status().await.expect("status");
    assert_eq!((status.done, status.eval.expect("an eval").accuracy), (1, 0.75));
    let reason_bytes = status.failed_tasks.iter().map(|task| task.reason.len()).max();
    assert!(reason_bytes.unwrap_or(0) <= master::state::FAILURE_REASON_BYTES_MAX);
    assert!(client.cluster_info().await.expect("cluster").leader_id >= 1);
}
