//! The master service through real processes: redirects from followers, errors a person can
//! act on, the `status --json` contract, and the pserver watch stream.

use crate::command::{raftrain, raftrain_ok};
use crate::master_group::MasterGroup;
use crate::task_consumer::write_dataset;
use master::client::LEADER_METADATA_KEY;
use proto::master::{
    ClaimPServerSlotRequest, ClientStamp, ListPServersRequest, ReportDatasetRequest,
};
use std::time::Duration;

fn report(patterns: Vec<String>, seq: u64) -> ReportDatasetRequest {
    let stamp = ClientStamp { client_id: 7, seq };
    ReportDatasetRequest { stamp: Some(stamp), job: "job".into(), patterns, passes: 1 }
}

/// A write sent to a follower fails with UNAVAILABLE and names the leader's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_redirects_to_the_leader() {
    let group = MasterGroup::start(3, &[]);
    let leader = group.leader_index().await;
    let follower = (leader + 1) % 3;
    let mut service =
        master::client::ServiceClient::connect(format!("http://{}", group.addrs[follower]))
            .await
            .expect("connect to a follower");
    let status = service
        .report_dataset(report(vec!["x".into()], 1))
        .await
        .expect_err("a follower refuses writes");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    let named =
        status.metadata().get(LEADER_METADATA_KEY).expect("the leader is named").to_str().unwrap();
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
        let error = client
            .write("ReportDataset", |mut service, stamp| {
                let mut request = report(patterns.clone(), 0);
                request.stamp = Some(stamp);
                async move { service.report_dataset(request).await }
            })
            .await
            .expect_err("a bad dataset is refused");
        let message = error.to_string();
        assert!(message.contains("InvalidArgument") && message.contains(&expected), "{message}");
    }
    let status = group.status().await;
    assert!(status.job.is_empty() && status.todo == 0, "nothing was applied: {status:?}");
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
    ] {
        assert!(json.get(key).is_some(), "missing {key} in {output}");
    }
    assert_eq!(json["leader"], serde_json::json!(leader + 1));
    assert_eq!(json["members"].as_array().map(Vec::len), Some(3));
    assert_eq!(json["eval"], serde_json::Value::Null);
}

/// `WatchPServers` sends the table at once and again when a pserver claims a slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_pserver_changes() {
    let group = MasterGroup::start(3, &[]);
    let client = group.client();
    let mut stream = client
        .call("WatchPServers", |mut service| async move {
            service.watch_p_servers(ListPServersRequest {}).await
        })
        .await
        .expect("watch");
    let first = stream.message().await.expect("a table").expect("the stream is open");
    assert!(first.pservers.is_empty());
    let claimed = client
        .write("ClaimPServerSlot", |mut service, stamp| {
            let request = ClaimPServerSlotRequest {
                stamp: Some(stamp),
                addr: "127.0.0.1:7101".into(),
                desired: 2,
            };
            async move { service.claim_p_server_slot(request).await }
        })
        .await
        .expect("claim a slot");
    assert!(claimed.granted);
    let next = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("a change arrives");
    let table = next.expect("a table").expect("the stream is open");
    assert_eq!(table.desired, 2);
    assert_eq!(table.pservers.len(), 1);
    assert_eq!(table.pservers[0].addr, "127.0.0.1:7101");
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
    assert_eq!((status.todo, status.job.as_str()), (20_000, "e2e"));
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
        async move {
            client
                .write("ReportDataset", |mut service, stamp| {
                    let mut request = report(vec![dataset.clone()], 0);
                    request.stamp = Some(stamp);
                    request.passes = passes;
                    async move { service.report_dataset(request).await }
                })
                .await
        }
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
