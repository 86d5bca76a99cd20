//! Real trainer processes end with the documented exit statuses (`cli/src/exit_code.rs`, the
//! README): 0 when the job is done, 2 for a configuration that cannot work, 75 when the masters
//! stay out of reach past `--master-wait-s`. (A pserver's 3, lost slot, is checked where a slot
//! is really lost: `pserver_replacement.rs`.)

use std::time::Duration;

use crate::command::raftrain;
use crate::master_group::free_loopback_addr;
use crate::training::synth;
use crate::training_job::TrainingJob;

const FINISHED: i32 = 0;
const CONFIGURATION: i32 = 2;
const RETRYABLE: i32 = 75;

/// A trainer of a one-master, one-pserver job trains it to the end and exits 0.
#[test]
fn a_trainer_whose_job_is_done_exits_0() {
    let dir = tempfile::tempdir().expect("temp");
    let (train, _) = synth(dir.path(), "blobs", "200", "1.0");
    let args = ["--dataset", &train, "--model", "softmax", "--classes", "3", "--passes", "1"];
    let mut job = TrainingJob::start(1, 1, dir.path(), &args);
    let trainer = job.spawn_trainer();
    let (status, log) = job.wait_trainer(trainer, Duration::from_secs(120));
    assert_eq!(status.code(), Some(FINISHED), "{log}");
}

/// Flags that cannot work exit 2 at once, whether clap, the trainer's own checks or its files
/// refuse them; no master is needed to find out.
#[test]
fn a_trainer_with_a_bad_configuration_exits_2() {
    let masters = free_loopback_addr();
    let common = ["trainer", "--masters", &masters, "--dataset", "none.recordio"];
    let cases: [(&[&str], &str); 4] = [
        (&["--model", "softmax", "--batch-size", "many"], "invalid value 'many'"),
        (&["--model", "softmax", "--classes", "1"], "--classes 1 is outside"),
        (&["--model", "linear", "--passes", "0"], "--passes must be at least 1"),
        (
            &["--model", "linear", "--features", "2", "--token-file", "/nonexistent/token"],
            "--token-file /nonexistent/token",
        ),
    ];
    for (flags, expected) in cases {
        let args: Vec<&str> = common.iter().chain(flags).copied().collect();
        let output = raftrain(&args, b"");
        assert_eq!(output.code, Some(CONFIGURATION), "{flags:?}: {}", output.stderr);
        assert!(output.stderr.contains(expected), "{flags:?}: {}", output.stderr);
    }
}

/// With `--master-wait-s 1` and no master listening, the trainer gives up after a second with
/// the retryable status: a supervisor restarts it without counting a failure.
#[test]
fn a_trainer_that_waited_out_its_master_limit_exits_75() {
    let masters = free_loopback_addr();
    let args = [
        "trainer",
        "--masters",
        &masters,
        "--dataset",
        "none.recordio",
        "--model",
        "linear",
        "--features",
        "2",
        "--master-wait-s",
        "1",
    ];
    let output = raftrain(&args, b"");
    assert_eq!(output.code, Some(RETRYABLE), "{}", output.stderr);
    assert!(output.stderr.contains("no master leader answered"), "{}", output.stderr);
}
