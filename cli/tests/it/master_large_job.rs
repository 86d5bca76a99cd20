//! End-to-end, real processes: the largest kind of job the seeds' users reported (a million
//! one-record chunks under a long path) is accepted, snapshotted, installed on a replica that
//! missed it, restored by a restarted replica from its own snapshot, and the group keeps
//! committing. (Before paths were stored once per file, its snapshot passed the consensus
//! layer's size limit, every replica's snapshot build failed, and the group stopped for good.)

use crate::master_group::MasterGroup;
use crate::task_consumer::{finish, register, report_dataset, take_task};
use std::time::Duration;

const CHUNK_COUNT: usize = 1_000_000;
const POLICY: [&str; 2] = ["--snapshot-logs-since-last", "200"];
/// How long each call may take, retries included. A debug build that scans, replicates,
/// snapshots and installs a million chunks while the rest of the suite runs beside it on two
/// cores took over a minute for the report alone; the test is about whether the group gets
/// there, not how fast (BENCHMARKS.md measures that, in release builds).
const CALL_DEADLINE: Duration = Duration::from_secs(300);

/// A dataset of `CHUNK_COUNT` one-record chunks at a path of more than 430 bytes.
fn write_large_dataset(dir: &std::path::Path) -> String {
    use storage::recordio::{Writer, WriterOptions};
    let nested = dir.join("d".repeat(200)).join("e".repeat(200));
    std::fs::create_dir_all(&nested).expect("create the dataset's directories");
    let path = nested.join("a-dataset-with-a-long-name.recordio");
    let file = std::io::BufWriter::new(std::fs::File::create(&path).expect("create the dataset"));
    let mut writer =
        Writer::new(file, WriterOptions { max_chunk_bytes: 1, ..WriterOptions::default() });
    for record in 0..CHUNK_COUNT {
        writer.write_record(&(record as u32).to_le_bytes()).expect("write a record");
    }
    let file = writer.finish().expect("finish the dataset");
    file.into_inner().expect("flush the dataset").sync_all().expect("sync the dataset");
    let text = path.display().to_string();
    assert!(text.len() > 430, "the path is long");
    text
}

/// A follower misses the whole report (it is down), then catches up by snapshot; another is
/// restarted and restores its own snapshot; then tasks are still handed out and finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_chunk_job_snapshots_restores_and_keeps_committing() {
    let mut group = MasterGroup::start(3, &POLICY);
    let dataset = write_large_dataset(group.dir.path());
    let leader = group.leader_index().await;
    let absent = (leader + 1) % 3;
    group.kill(absent);
    let task_count = report_dataset(&group.client_within(CALL_DEADLINE), &dataset, 1).await;
    assert_eq!(task_count, CHUNK_COUNT as u64);

    tracing::info!("--- the absent replica comes back and must install the leader's snapshot");
    group.spawn(absent);
    let other = (0..3).find(|index| *index != leader && *index != absent).expect("three");
    tokio::time::sleep(Duration::from_secs(3)).await;
    tracing::info!("--- the other follower restarts from its own snapshot file");
    group.kill(other);
    group.spawn(other);
    tokio::time::sleep(Duration::from_secs(2)).await;
    tracing::info!("--- and the leader too: the group must elect among restored replicas");
    group.kill(leader);
    let client = group.client_within(CALL_DEADLINE);
    let trainer = register(&client, "after").await;
    let task = take_task(&client, trainer, 0).await;
    assert!(finish(&client, task.task_id, task.epoch).await);
    group.spawn(leader);
    let status = group.status().await;
    assert_eq!((status.todo + status.pending + status.done), CHUNK_COUNT as u64);
    for index in 0..3 {
        let log = std::fs::read_to_string(group.log_path(index)).unwrap_or_default();
        assert!(!log.contains("size limit"), "master {}: {log}", index + 1);
    }
}
