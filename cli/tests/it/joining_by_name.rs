//! Trainers and pservers that join a submitted job by its name alone (`--job`, no `--dataset`,
//! no `--passes`), as README.md and deploy/kubernetes/ start them: they take the job's spec
//! from the masters, a trainer started before the submit waits for it, and a trainer whose
//! `--passes` is not the job's is refused naming both values.

use std::path::Path;
use std::time::Duration;

use crate::command::{raftrain, raftrain_ok};
use crate::master_group::MasterGroup;
use crate::named_jobs::wait_until;
use crate::pserver_processes::PServerProcesses;
use crate::training::synth;
use crate::training_job::TrainingJob;

/// A trainer's flags besides `--job`: the model only, nothing of the job's spec.
const MODEL: [&str; 8] =
    ["--model", "softmax", "--classes", "3", "--batch-size", "32", "--learning-rate", "0.05"];

fn trainer_flags(job: &str) -> Vec<&str> {
    let mut flags = vec!["--job", job];
    flags.extend(MODEL);
    flags
}

/// `raftrain job submit` of job `name` reading `dataset` for `passes` passes.
fn submit(masters: &[String], name: &str, dataset: &str, passes: &str) {
    let masters = masters.join(",");
    let args = ["job", "submit", "--masters", &masters, "--name", name, "--dataset", dataset];
    let mut args = args.to_vec();
    args.extend(["--passes", passes]);
    raftrain_ok(&args, b"");
}

/// Job `name`'s status (`status --job NAME --json`).
fn job_status(masters: &[String], name: &str) -> serde_json::Value {
    let masters = masters.join(",");
    let shown = raftrain_ok(&["status", "--masters", &masters, "--job", name, "--json"], b"");
    serde_json::from_str(shown.trim()).expect("status --json")
}

/// `count` pservers of job `name`, which name nothing else of it either.
fn pservers_of(job: &mut TrainingJob, dir: &Path, name: &str, count: u32) {
    job.pservers = PServerProcesses::new(&job.masters.addrs, dir, count);
    for _ in 0..count {
        job.pservers.spawn_with(&["--job", name]);
    }
}

/// After `job submit --passes 3`, pservers and trainers that give only `--job` train the job
/// to its end with no failed task, and the job reports its 3 passes done.
#[test]
fn pservers_and_trainers_naming_only_the_job_train_it_to_the_end() {
    let dir = tempfile::tempdir().expect("temp");
    let (train, _) = synth(dir.path(), "blobs", "2000", "2.0");
    let mut job = TrainingJob::start(3, 0, dir.path(), &trainer_flags("a"));
    submit(&job.masters.addrs, "a", &train, "3");
    pservers_of(&mut job, dir.path(), "a", 2);
    job.spawn_trainer();
    job.spawn_trainer();

    tracing::info!("--- both trainers finish without a failed task; the job ran its 3 passes");
    let outputs = job.wait_trainers(Duration::from_secs(240));
    for output in &outputs {
        assert!(output.contains("(0 failed)"), "{output}\n{}", job.logs());
    }
    let status = job_status(&job.masters.addrs, "a");
    assert_eq!(status["job_finished"], true, "{status}");
    assert_eq!(status["passes"], 3, "{status}");
    assert_eq!(status["pass"], 2, "the last pass (from 0) is the third: {status}");
    assert_eq!(status["failed"], 0, "{status}");
}

/// A trainer whose `--passes` differs from its submitted job's exits with the configuration
/// status and a message naming both values, whether or not it also gives `--dataset`.
#[test]
fn a_trainer_whose_passes_differ_from_the_job_is_refused_naming_both() {
    let dir = tempfile::tempdir().expect("temp");
    let (train, _) = synth(dir.path(), "blobs", "500", "2.0");
    let group = MasterGroup::start(1, &[]);
    submit(&group.addrs, "a", &train, "3");
    let masters = group.addrs.join(",");
    let mut args = vec!["trainer", "--masters", &masters, "--passes", "2"];
    args.extend(trainer_flags("a"));
    for extra in [&[][..], &["--dataset", &train]] {
        let mut args = args.clone();
        args.extend(extra);
        let output = raftrain(&args, b"");
        assert_eq!(output.code, Some(2), "{extra:?}: {}", output.stderr);
        let message = "--passes 2 differs from job a's passes 3";
        assert!(output.stderr.contains(message), "{extra:?}: {}", output.stderr);
    }
}

/// A trainer started before its job is submitted, with only `--job`, says that it waits
/// (naming the jobs the group runs under other names), and trains the job to its end once it
/// is submitted.
#[test]
fn a_trainer_started_before_the_submit_waits_then_trains() {
    let dir = tempfile::tempdir().expect("temp");
    let (train, _) = synth(dir.path(), "blobs", "1000", "2.0");
    let mut job = TrainingJob::start(1, 0, dir.path(), &trainer_flags("b"));
    pservers_of(&mut job, dir.path(), "b", 1);
    // Another job runs meanwhile: the waiting trainer names it (is `--job b` the one meant?).
    submit(&job.masters.addrs, "other", &train, "1");
    let trainer = job.spawn_trainer();
    let waiting = || job.trainer_log(trainer).contains("waiting for the job to be submitted");
    wait_until(Duration::from_secs(60), waiting, || job.logs());
    assert_eq!(job.trainer_exit(trainer), None, "it waits:\n{}", job.logs());
    let log = job.trainer_log(trainer);
    assert!(log.contains("is --job the one meant") && log.contains("others=\"other\""), "{log}");

    tracing::info!("--- the job is submitted; the waiting trainer trains it to the end");
    submit(&job.masters.addrs, "b", &train, "2");
    let outputs = job.wait_trainers(Duration::from_secs(240));
    assert!(outputs[0].contains("(0 failed)"), "{}\n{}", outputs[0], job.logs());
    let status = job_status(&job.masters.addrs, "b");
    assert_eq!(status["job_finished"], true, "{status}");
    assert_eq!(status["passes"], 2, "{status}");
}
