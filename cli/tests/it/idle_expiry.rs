//! Jobs left alone and jobs trained again (issue 38): a job nobody touches for the masters'
//! `--job-idle-expiry-ms` is cancelled by the leader while a job whose slow trainer holds a
//! task and heartbeats runs on; `job submit --restart` of a finished job trains it again as a
//! new incarnation, while a plain submit leaves it finished.

use std::time::{Duration, Instant};

use client::TaskOutcome;

use crate::command::raftrain_ok;
use crate::master_group::MasterGroup;
use crate::named_jobs::{client_of, job_list, wait_until};

/// Short leases, so that a short idle expiry is valid (at least both leases).
const FLAGS: [&str; 6] =
    ["--trainer-lease-ms", "1000", "--pserver-lease-ms", "1000", "--job-idle-expiry-ms", "2000"];

/// `raftrain job submit` of an index job `name` of `size` one-index tasks, plus `extra` flags.
fn submit(group: &MasterGroup, name: &str, size: &str, passes: &str, extra: &[&str]) -> String {
    let masters = group.addrs.join(",");
    let mut args = vec!["job", "submit", "--masters", &masters, "--name", name, "--index", size];
    args.extend(["--shard-size", "1", "--passes", passes]);
    args.extend(extra);
    raftrain_ok(&args, b"")
}

/// Every listed incarnation of job `name`: (job id, state, passes), by id.
fn incarnations(group: &MasterGroup, name: &str) -> Vec<(u64, String, u64)> {
    let list = job_list(group);
    let jobs = list["jobs"].as_array().cloned().unwrap_or_default();
    let mut found: Vec<(u64, String, u64)> = jobs
        .iter()
        .filter(|job| job["name"] == name)
        .map(|job| {
            let state = job["state"].as_str().unwrap_or_default().to_string();
            (job["job_id"].as_u64().unwrap_or(0), state, job["passes"].as_u64().unwrap_or(0))
        })
        .collect();
    found.sort();
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untouched_job_is_cancelled_and_a_slow_live_trainer_keeps_its_job() {
    let group = MasterGroup::start(3, &FLAGS);
    submit(&group, "idle", "10", "1", &[]);
    submit(&group, "busy", "10", "1", &[]);

    tracing::info!("--- a slow trainer of busy holds one task and only heartbeats");
    let busy = std::sync::Arc::new(client_of(&group, "busy"));
    let trainer = busy.register_trainer("slow").await.expect("register").trainer_id;
    let outcome = busy.get_task(trainer, 0).await.expect("a task");
    assert!(matches!(outcome, TaskOutcome::Task(_)), "{outcome:?}");
    // Heartbeats go every 250 ms from a task of their own: the polls below run `raftrain job
    // list`, which may take seconds on a loaded machine.
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let heartbeats = tokio::spawn({
        let busy = busy.clone();
        async move {
            while !*stopped.borrow() {
                busy.heartbeat(trainer, 0).await.expect("heartbeat");
                let pause = tokio::time::sleep(Duration::from_millis(250));
                tokio::select! { () = pause => {}, _ = stopped.changed() => {} }
            }
        }
    });
    let (started, patience) = (Instant::now(), Duration::from_secs(60));
    let idle_gone =
        || incarnations(&group, "idle").first().is_some_and(|(_, state, _)| state == "cancelled");
    while !idle_gone() || started.elapsed() < Duration::from_secs(6) {
        let deadline = started + patience;
        assert!(Instant::now() < deadline, "idle not cancelled\n{}", group.logs());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(incarnations(&group, "busy")[0].1, "running", "three idle expiries later");
    assert!(group.logs().contains("idle expiry"), "the leader says why it cancelled");

    tracing::info!("--- once its trainer stops too, busy expires as well");
    stop.send(true).expect("the heartbeat task listens");
    heartbeats.await.expect("the heartbeats ran without a failure");
    drop(busy);
    let busy_gone = || incarnations(&group, "busy")[0].1 == "cancelled";
    wait_until(Duration::from_secs(60), busy_gone, || group.logs());
}

/// Trains job `name` to its end with one trainer that finishes every task at once.
async fn train_to_the_end(group: &MasterGroup, name: &str) {
    let client = client_of(group, name);
    let trainer = client.register_trainer("quick").await.expect("register").trainer_id;
    let mut pass = 0;
    loop {
        match client.get_task(trainer, pass).await.expect("get a task") {
            TaskOutcome::Task(task) => {
                client.task_finished(task.task_id, task.epoch).await.expect("finish");
            }
            TaskOutcome::PassBefore { current } => pass = current,
            TaskOutcome::JobFinished => return,
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_submit_restart_trains_a_finished_job_again() {
    let group = MasterGroup::start(3, &[]);
    submit(&group, "again", "3", "1", &[]);
    train_to_the_end(&group, "again").await;
    let first = incarnations(&group, "again");
    assert!(matches!(&first[..], [(_, state, 1)] if state == "finished"), "{first:?}");

    tracing::info!("--- a plain submit leaves the finished job as it is");
    submit(&group, "again", "3", "1", &[]);
    assert_eq!(incarnations(&group, "again"), first);

    tracing::info!("--- --restart starts a new incarnation, with passes of its own");
    submit(&group, "again", "4", "2", &["--restart"]);
    submit(&group, "again", "4", "2", &["--restart"]);
    let second = incarnations(&group, "again");
    assert_eq!(second.len(), 2, "a restart of a running job joins it: {second:?}");
    assert_eq!(second[0], first[0], "the old incarnation stays finished");
    assert!(second[1].0 > first[0].0 && second[1].1 == "running" && second[1].2 == 2, "{second:?}");
    train_to_the_end(&group, "again").await;
    assert_eq!(incarnations(&group, "again")[1].1, "finished");
}
