//! Careless and hostile input on the job surfaces, through real processes: an empty job name
//! (an unset shell variable) changes no job; a job name that is not a DNS label, or a policy
//! no job can run with, is refused naming the fault (exit status 2), by the command line and
//! by the master's service for a client that skips the command line's checks; an output path
//! that is not a regular file is left alone; a glob over a symbolic link loop is refused at
//! once; `status --json` with no master answering still prints a document, and `recordio cat`
//! of a directory says it is one.

use crate::command::{raftrain, raftrain_ok};
use crate::master_group::MasterGroup;
use proto::master as pb;

fn stamp(seq: u64) -> Option<pb::ClientStamp> {
    Some(pb::ClientStamp { client_id: 4242, seq })
}

/// The job list's names and states (as JSON text).
fn jobs(masters: &str) -> Vec<(String, String)> {
    let listed = raftrain_ok(&["job", "list", "--masters", masters, "--json"], b"");
    let listed: serde_json::Value = serde_json::from_str(listed.trim()).expect("job list --json");
    let jobs = listed["jobs"].as_array().expect("a list").iter();
    jobs.map(|job| (job["name"].to_string(), job["state"].to_string())).collect()
}

/// Runs `args`, which must fail with `expected` in its error, as a configuration error (exit
/// status 2: the same command fails again), whether the command line or the masters refused.
fn refused(args: &[&str], expected: &str) {
    let output = raftrain(args, b"");
    assert!(!output.success && output.stderr.contains(expected), "{args:?}: {}", output.stderr);
    assert_eq!(output.code, Some(2), "{args:?}: {}", output.stderr);
}

/// A raw submit of an index job named `name`, with `policy` overriding the masters'.
fn index_submit(
    name: &str,
    seq: u64,
    policy: Option<pb::QueuePolicyOverrides>,
) -> pb::SubmitJobRequest {
    let dataset = pb::IndexDataset { size: 10, shard_size: 2 };
    pb::SubmitJobRequest {
        stamp: stamp(seq),
        name: name.to_string(),
        passes: 1,
        dataset: Some(pb::submit_job_request::Dataset::Index(dataset)),
        policy,
        restart: false,
        shuffle_seed: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_job_name_changes_no_job() {
    let group = MasterGroup::start(1, &[]);
    let masters = group.addrs.join(",");
    let submit = ["job", "submit", "--masters", &masters, "--name", "only", "--index", "10"];
    raftrain_ok(&[&submit[..], &["--shard-size", "2", "--passes", "1"]].concat(), b"");

    tracing::info!("--- the command line refuses cancel, checkpoint and restore of \"\"");
    refused(&["job", "cancel", "", "--masters", &masters], "job name: empty");
    refused(&["job", "checkpoint", "", "--masters", &masters], "job name: empty");
    refused(&["job", "restore", "", "--checkpoint", "1", "--masters", &masters], "job name");

    tracing::info!("--- a name no job has is a configuration error too, status included");
    refused(&["job", "cancel", "nosuch", "--masters", &masters], "no job named \"nosuch\"");
    refused(&["job", "checkpoint", "nosuch", "--masters", &masters], "no job named \"nosuch\"");
    refused(&["status", "--job", "nosuch", "--masters", &masters], "no job named \"nosuch\"");
    let status = raftrain(&["status", "--job", "nosuch", "--masters", &masters], b"");
    assert!(!status.stdout_text().contains("no leader answered"), "{}", status.stdout_text());

    tracing::info!("--- a trainer or pserver waiting for a name no submit admits is refused");
    let trainer = ["trainer", "--masters", &masters, "--model", "softmax", "--classes", "3"];
    refused(&[&trainer[..], &["--job", "al.pha"]].concat(), "--job: job name \"al.pha\"");
    let checkpoints = group.dir.path().join("checkpoints").display().to_string();
    let pserver = ["pserver", "--masters", &masters, "--num-pservers", "1", "--job", "al.pha"];
    refused(&[&pserver[..], &["--checkpoint-dir", &checkpoints]].concat(), "--job: job name");

    tracing::info!("--- so does the service, for a client that sends \"\" itself");
    let mut service = group.leader_service().await;
    let cancel = pb::CancelJobRequest { stamp: stamp(1), job: String::new() };
    let status = service.cancel_job(cancel).await.expect_err("an empty name");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    let checkpoint = pb::CheckpointJobRequest { stamp: stamp(2), job: String::new() };
    let status = service.checkpoint_job(checkpoint).await.expect_err("an empty name");
    assert!(status.message().contains("job name: empty"), "{status:?}");
    let restore = pb::RestoreJobRequest {
        stamp: stamp(3),
        job: String::new(),
        checkpoint_id: 1,
        data_only: true,
    };
    let status = service.restore_job(restore).await.expect_err("an empty name");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert_eq!(jobs(&masters), [("\"only\"".to_string(), "\"running\"".to_string())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_names_and_policies_no_job_can_use_are_refused() {
    let group = MasterGroup::start(1, &[]);
    let masters = group.addrs.join(",");
    let submit = |extra: &[&str], expected: &str| {
        let base = ["job", "submit", "--masters", &masters, "--index", "10", "--shard-size", "2"];
        let mut args = base.to_vec();
        if !extra.contains(&"--name") {
            args.extend(["--name", "fine"]);
        }
        if !extra.contains(&"--passes") {
            args.extend(["--passes", "1"]);
        }
        refused(&[&args[..], extra].concat(), expected);
    };

    tracing::info!("--- names: the character and its offset, or the length");
    submit(&["--name", "Upper"], "character 'U' at byte 0");
    submit(&["--name", "two words"], "character ' ' at byte 3");
    submit(&["--name", "esc\u{1b}[2J"], "character '\\u{1b}' at byte 3");
    submit(&["--name", &"n".repeat(64)], "64 bytes, at most 63");
    let spec = group.dir.path().join("nul.toml");
    std::fs::write(&spec, "name = \"a\\u0000b\"\npasses = 1\nindex = 10\nshard-size = 2\n")
        .expect("write the spec");
    let spec_text = spec.display().to_string();
    refused(&["job", "submit", "--masters", &masters, "--spec", &spec_text], "'\\0' at byte 1");

    tracing::info!("--- policies: the field and the accepted range");
    submit(&["--task-timeout-min-ms", "0"], "task-timeout-min-ms: 0 is not accepted; give 100 to");
    submit(&["--timeout-factor", "0"], "timeout-factor: 0 is not accepted; give 1 to 1000");
    submit(&["--max-task-failures", "4294967295"], "max-task-failures: 4294967295");
    submit(&["--chunks-per-task", "0"], "chunks-per-task: 0 is not accepted; give 1 to 1024");
    submit(&["--passes", "0"], "passes: 0 is not accepted");
    let zero_shard = ["job", "submit", "--masters", &masters, "--name", "z", "--passes", "1"];
    refused(&[&zero_shard[..], &["--index", "10", "--shard-size", "0"]].concat(), "shard-size: 0");
    std::fs::write(
        &spec,
        "name = \"t\"\npasses = 1\nindex = 10\nshard-size = 2\ntask-timeout-min-ms = 0\n",
    )
    .expect("write the spec");
    refused(
        &["job", "submit", "--masters", &masters, "--spec", &spec_text],
        &format!("job spec {spec_text}: task-timeout-min-ms: 0"),
    );

    tracing::info!("--- the service refuses the same from a client that skips those checks");
    let mut service = group.leader_service().await;
    let status = service.submit_job(index_submit("a\0b", 1, None)).await.expect_err("a NUL");
    assert!(status.message().contains("'\\0' at byte 1"), "{status:?}");
    let report = pb::ReportIndexDatasetRequest {
        stamp: stamp(2),
        job: "A".into(),
        size: 10,
        shard_size: 2,
        passes: 1,
        restart: true,
        shuffle_seed: None,
    };
    let status = service.report_index_dataset(report).await.expect_err("uppercase");
    assert!(status.message().contains("'A' at byte 0"), "{status:?}");
    let zero = pb::QueuePolicyOverrides { task_timeout_min_ms: Some(0), ..Default::default() };
    let status = service.submit_job(index_submit("zero", 3, Some(zero))).await.expect_err("0 ms");
    assert!(status.message().contains("task-timeout-min-ms: 0"), "{status:?}");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(jobs(&masters).is_empty(), "nothing half-applied: {:?}", jobs(&masters));
}

/// The masters' job defaults are held to the same bounds as a submitted job's.
#[test]
fn master_policy_flags_no_job_can_run_with_are_refused() {
    let base = ["master", "--id", "1", "--listen", "127.0.0.1:1", "--peers", "1=127.0.0.1:1"];
    let data_dir = tempfile::tempdir().expect("temp");
    let data_dir = data_dir.path().display().to_string();
    for (flag, value, expected) in [
        ("--task-timeout-min-ms", "0", "--task-timeout-min-ms: 0 is not accepted; give 100 to"),
        ("--max-task-failures", "4294967295", "--max-task-failures: 4294967295 is not accepted"),
        ("--timeout-factor", "5000", "--timeout-factor: 5000 is not accepted; give 1 to 1000"),
    ] {
        refused(&[&base[..], &["--data-dir", &data_dir, flag, value]].concat(), expected);
    }
}

/// With no master answering, `status --json` still prints a document (saying so under
/// `error`, `linearizable` false) and exits 3; `recordio cat` of a directory says it is one.
#[test]
fn status_json_with_no_master_and_a_directory_as_records_say_what_is_wrong() {
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = nobody.local_addr().expect("addr").to_string();
    drop(nobody);
    let output = raftrain(&["status", "--masters", &addr, "--json", "--timeout-ms", "500"], b"");
    assert_eq!(output.code, Some(3), "{}", output.stderr);
    let value: serde_json::Value = serde_json::from_str(output.stdout_text().trim())
        .unwrap_or_else(|error| panic!("{error}: {:?}", output.stdout_text()));
    assert_eq!(value["linearizable"], serde_json::json!(false), "{value}");
    let error = value["error"].as_str().unwrap_or_default();
    assert!(error.contains("no master answered") && error.contains(&addr), "{value}");
    let dir = tempfile::tempdir().expect("temp");
    let folder = dir.path().display().to_string();
    let output = raftrain(&["recordio", "cat", &folder], b"");
    let expected = format!("{folder:?} is a directory: name its files");
    assert!(!output.success && output.stderr.contains(&expected), "{}", output.stderr);
}

/// `recordio write --out` leaves a symbolic link, a fifo or a directory where it is, naming
/// the path; the file a link aims at keeps its bytes.
#[test]
fn recordio_write_replaces_only_a_regular_file() {
    let dir = tempfile::tempdir().expect("temp");
    let aimed = dir.path().join("aimed");
    std::fs::write(&aimed, b"kept").expect("write");
    let link = dir.path().join("link.recordio");
    std::os::unix::fs::symlink(&aimed, &link).expect("symlink");
    let directory = dir.path().join("directory.recordio");
    std::fs::create_dir(&directory).expect("directory");
    let fifo = dir.path().join("fifo.recordio");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    for (target, what) in
        [(&link, "a symbolic link"), (&fifo, "a fifo"), (&directory, "a directory")]
    {
        let out = target.display().to_string();
        let output = raftrain(&["recordio", "write", "--out", &out], b"00\n");
        let expected = format!("{out}: {what} is there");
        assert!(!output.success && output.stderr.contains(&expected), "{out}: {}", output.stderr);
    }
    assert!(link.is_symlink() && fifo.exists() && directory.is_dir());
    assert_eq!(std::fs::read(&aimed).expect("read"), b"kept");
}

/// A dataset glob over a symbolic link loop is refused where the loop closes, naming it, not
/// walked until a deadline passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_glob_over_a_symlink_loop_is_refused() {
    let group = MasterGroup::start(1, &[]);
    let masters = group.addrs.join(",");
    let data = group.dir.path().join("data");
    std::fs::create_dir(&data).expect("data");
    std::os::unix::fs::symlink(".", data.join("loop")).expect("symlink");
    std::os::unix::fs::symlink(".", data.join("again")).expect("symlink");
    let pattern = data.join("loop/**/x").display().to_string();
    let submit = ["job", "submit", "--masters", &masters, "--name", "looped", "--passes", "1"];
    let args = [&submit[..], &["--dataset", &pattern, "--timeout-ms", "120000"]].concat();
    refused(&args, "(a symbolic link loop); refused rather than walked");
    assert!(jobs(&masters).is_empty());
}
