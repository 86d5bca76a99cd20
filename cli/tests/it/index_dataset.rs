//! End-to-end index-range jobs on real masters: a job over `[0, size)` that no master reads,
//! its tasks taken and finished through a kill -9 of the leader, `raftrain status` showing
//! its kind, size and shard size, and a `raftrain trainer` (RecordIO only) that refuses to
//! join it with a clear error instead of waiting.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client::{ClientError, TaskData};

use crate::command::raftrain;
use crate::master_group::MasterGroup;
use crate::task_consumer::{completions_reach, spawn_consumers, write_dataset, History};

const POLICY: [&str; 4] = ["--task-timeout-min-ms", "60000", "--trainer-lease-ms", "10000"];
/// 1,003 samples in shards of 25: 41 tasks, the last one 3 samples long.
const SIZE: u64 = 1_003;
const SHARD_SIZE: u64 = 25;
const TASK_COUNT: u64 = 41;

/// Three consumers take and finish every task of two passes while the leader is killed -9:
/// every range is handed out and accepted once per pass, each is its task's shard, together
/// they cover `[0, size)` exactly once per pass, and the job finishes. Repeats of the report
/// answer the same sizes; a RecordIO report is refused, naming the index range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_job_loses_no_range_through_a_leader_kill() {
    let mut group = MasterGroup::start(3, &POLICY);
    let client = group.client();
    let passes = 2;
    let sizes = client.report_index_dataset("index-e2e", SIZE, SHARD_SIZE, passes).await;
    let sizes = sizes.expect("report the index dataset");
    assert_eq!((sizes.task_count, sizes.chunk_count, sizes.record_count), (TASK_COUNT, 0, 0));
    let history = Arc::new(Mutex::new(History::default()));
    let work = Duration::from_millis(40);
    let consumers = spawn_consumers(3, "index-consumer-", work, &history, || group.client());

    tracing::info!("--- kill -9 the leader once some ranges are done; repeats still answer");
    completions_reach(&history, 20, || group.logs()).await;
    let leader = group.leader_index().await;
    group.kill(leader);
    let repeat = client.report_index_dataset("index-e2e", SIZE, SHARD_SIZE, passes).await;
    assert_eq!(repeat.expect("an identical repeat is answered"), sizes);
    let recordio_files = [write_dataset(group.dir.path(), 3)];
    match client.report_dataset("index-e2e", &recordio_files, passes).await {
        Err(ClientError::InvalidArgument { message, .. }) => {
            assert!(message.contains("index range (size 1003, shard size 25)"), "{message}")
        }
        other => panic!("a RecordIO report of an index job is refused: {other:?}"),
    }
    completions_reach(&history, 50, || group.logs()).await;
    group.spawn(leader);

    for consumer in consumers {
        tokio::time::timeout(Duration::from_secs(120), consumer)
            .await
            .expect("consumers finish")
            .expect("consumer ran");
    }
    let status = group.status().await;
    assert!(status.job_finished, "{}", group.logs());
    assert_eq!((status.done, status.failed, status.todo, status.pending), (TASK_COUNT, 0, 0, 0));
    check_every_range_once(&history.lock().expect("history lock"), passes);
    check_status_views(&group);
}

/// Each (pass, task) was accepted once, each covering its own shard; each pass's ranges
/// tile `[0, SIZE)`.
fn check_every_range_once(history: &History, passes: u32) {
    let mut by_pass: BTreeMap<u32, BTreeMap<u64, (u64, u64)>> = BTreeMap::new();
    for ((pass, task_id, _), (covered_id, data)) in history.completions.iter().zip(&history.covered)
    {
        assert_eq!(task_id, covered_id);
        let TaskData::IndexRange { start, end } = data else {
            panic!("task {task_id} of an index job covers {data:?}");
        };
        let shard = (task_id * SHARD_SIZE, ((task_id + 1) * SHARD_SIZE).min(SIZE));
        assert_eq!((*start, *end), shard, "task {task_id} covers its own shard");
        let previous = by_pass.entry(*pass).or_default().insert(*task_id, (*start, *end));
        assert_eq!(previous, None, "pass {pass} task {task_id} accepted twice");
    }
    assert_eq!(by_pass.len(), passes as usize, "every pass ran");
    for (pass, ranges) in by_pass {
        let mut next = 0;
        for (start, end) in ranges.values() {
            assert_eq!(*start, next, "pass {pass}: no range lost, none overlapping");
            next = *end;
        }
        assert_eq!(next, SIZE, "pass {pass} covers every sample");
    }
}

/// `raftrain status --json` names the kind with its size and shard size; the text view shows
/// them.
fn check_status_views(group: &MasterGroup) {
    let masters = group.addrs.join(",");
    let json = raftrain(&["status", "--masters", &masters, "--json", "--timeout-ms", "5000"], b"");
    assert!(json.success, "{}", json.stderr);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("status prints JSON");
    assert_eq!(json["dataset_kind"], "index_range", "{json}");
    assert_eq!(
        (&json["dataset_size"], &json["shard_size"]),
        (&serde_json::json!(SIZE), &serde_json::json!(SHARD_SIZE))
    );
    assert_eq!(json["job"], "index-e2e", "the old keys stay: {json}");
    let text = raftrain(&["status", "--masters", &masters, "--timeout-ms", "5000"], b"");
    assert!(text.success, "{}", text.stderr);
    let text = text.stdout_text();
    assert!(text.contains("dataset: index range, size 1003, shard size 25"), "{text}");
}

/// A `raftrain trainer` asked to join an index job (it trains RecordIO only) ends at once
/// with an error saying so, before it would wait for pservers the job may never have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recordio_trainer_refuses_an_index_job_clearly() {
    let group = MasterGroup::start(1, &POLICY);
    let client = group.client();
    client.report_index_dataset("index-job", SIZE, SHARD_SIZE, 1).await.expect("report");
    let dir = tempfile::tempdir().expect("temp");
    let (train, _) = crate::training::synth(dir.path(), "blobs", "60", "2.5");
    let log = dir.path().join("trainer.log");
    let mut trainer = Command::new(env!("CARGO_BIN_EXE_raftrain"))
        .args(["trainer", "--masters", &group.addrs.join(","), "--dataset", &train])
        .args(["--job", "index-job", "--model", "softmax", "--classes", "3"])
        .env("RAFTRAIN_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("create the log"))
        .spawn()
        .expect("start raftrain trainer");
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    // A bound on a hang, not a timing assertion: the trainer ends long before.
    for _ in 0..1200 {
        if let Some(status) = trainer.try_wait().expect("poll the trainer") {
            assert!(!status.success(), "the trainer must fail\n{}", read_log());
            assert_eq!(status.code(), Some(2), "a configuration error's status\n{}", read_log());
            let log = read_log();
            assert!(log.contains("is an index-range job (size 1003, shard size 25)"), "{log}");
            assert!(log.contains("trains RecordIO datasets only"), "{log}");
            assert!(!log.contains("panicked"), "{log}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = trainer.kill();
    panic!("the trainer did not end within a minute\n{}", read_log());
}

/// Malformed index reports are refused (INVALID_ARGUMENT) naming the field to fix, by the
/// service (empty name, zero size, shard size or passes) or the state (too many tasks), and
/// leave the job undefined: a valid report afterwards wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_index_reports_name_the_field() {
    let group = MasterGroup::start(1, &POLICY);
    let client = group.client();
    let cases: [(&str, u64, u64, u32, &str); 5] = [
        ("", 10, 1, 1, "job:"),
        ("job", 0, 1, 1, "size:"),
        ("job", 10, 0, 1, "shard_size:"),
        ("job", 10, 1, 0, "passes:"),
        ("job", u64::MAX, 1, 1, "use a shard_size of at least"),
    ];
    for (job, size, shard_size, passes, field) in cases {
        match client.report_index_dataset(job, size, shard_size, passes).await {
            Err(ClientError::InvalidArgument { message, .. }) => {
                assert!(message.contains(field), "{field}: {message}")
            }
            other => panic!("{job:?} {size} {shard_size} {passes}: refused, not {other:?}"),
        }
    }
    assert_eq!(group.status().await.dataset, None, "nothing was defined");
    let sizes = client.report_index_dataset("job", 10, 3, 1).await.expect("a valid report");
    assert_eq!(sizes.task_count, 4);
}
