//! The fault harness's smoke schedule, run by `cargo test` against the binary this build made:
//! three masters, two pservers, six task-queue clients and the rendezvous workload's clients
//! (adds, compare-by-version races and reads on one torchrun run's keys) through a leader
//! kill, a leader isolated by a partition, a leader paused past its election timeout, a
//! pserver kill and a graceful leader restart (SIGTERM; a leader that ignores it for 10 s is a
//! violation); fails on any violation, printing the summary and the seed. A second run takes
//! a voter out of the group and back six times, one of each membership plan (a follower, the
//! leader, the leader killed mid-removal, a learner killed in its catch-up, the leader killed
//! mid-promotion, the joiner removed again as soon as it is listed). (It lives with the CLI's tests because only they know where cargo put the
//! `raftrain` binary of this build.)

use std::time::Duration;

use jepsen_tests::checker::CheckOptions;
use jepsen_tests::nemesis::{Fault, Schedule};
use jepsen_tests::run::{run, RunOptions, Workload};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_schedule_finds_no_violation() {
    let dir =
        tempfile::Builder::new().prefix("raftrain-jepsen-smoke-").tempdir().expect("a directory");
    let binary = std::path::PathBuf::from(env!("CARGO_BIN_EXE_raftrain"));
    let seed = 1;
    let options = RunOptions {
        binary,
        dir: dir.path().to_path_buf(),
        schedule: Schedule::smoke(seed),
        workload: Workload::Rendezvous,
        clients: 6,
        check: CheckOptions::default(),
        netns: false,
        snapshot_every: None,
        jobs: 1,
    };
    let report = tokio::time::timeout(Duration::from_secs(170), run(&options))
        .await
        .expect("the smoke run ends within its budget")
        .expect("the smoke run completes");
    let summary = report.summary();
    println!("{summary}");
    assert!(report.valid(), "{summary}\nlogs kept in {}", dir.keep().display());
    let dispatched = report.counts.get("get-task ok").copied().unwrap_or(0);
    assert!(dispatched > 50, "the workload made progress: {summary}");
    for rendezvous in ["rendezvous-add ok", "rendezvous-compare-version ok"] {
        let count = report.counts.get(rendezvous).copied().unwrap_or(0);
        assert!(count > 20, "{rendezvous}: the rendezvous clients made progress: {summary}");
    }
    assert_eq!(report.faults.len(), 5, "{summary}");
}

/// Six membership faults, one of each plan, under four task-queue clients: every removed
/// master stops with its marker (a joiner removed while it still asks included: it is never
/// added back), comes back with an empty directory and `--join`, and is a voter again; nothing acknowledged is lost, the replicas agree, and the final member list
/// shows the three masters as voters with no change half done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn membership_schedule_finds_no_violation() {
    let dir = tempfile::Builder::new()
        .prefix("raftrain-jepsen-membership-")
        .tempdir()
        .expect("a directory");
    let binary = std::path::PathBuf::from(env!("CARGO_BIN_EXE_raftrain"));
    let options = RunOptions {
        binary,
        dir: dir.path().to_path_buf(),
        schedule: Schedule::fixed(1, &[Fault::Membership; 6]),
        workload: Workload::TaskQueue,
        clients: 4,
        check: CheckOptions::default(),
        netns: false,
        snapshot_every: None,
        jobs: 1,
    };
    let report = tokio::time::timeout(Duration::from_secs(240), run(&options))
        .await
        .expect("the membership run ends within its budget")
        .expect("the membership run completes");
    let summary = report.summary();
    println!("{summary}");
    assert!(report.valid(), "{summary}\nlogs kept in {}", dir.keep().display());
    let dispatched = report.counts.get("get-task ok").copied().unwrap_or(0);
    assert!(dispatched > 50, "the workload made progress: {summary}");
    assert_eq!(report.fault_counts.len(), 6, "one fault of each plan: {summary}");
    let rejoined = report.membership.iter().filter(|line| line.contains(" voter: ok "));
    assert_eq!(rejoined.count(), 6, "every removed master is a voter again: {summary}");
    assert_eq!(report.counts.get("members ok"), Some(&1), "{summary}");
}
