//! A rolling upgrade from the previous release for real: three masters of the previous build
//! (`RAFTRAIN_PREVIOUS_BIN`, built by `.ci/run` from the commit `PREVIOUS_RELEASE` names) run a
//! job; each is replaced in turn by this build on its own data directory while the job goes on,
//! the mixed group's replicas agree byte for byte (the state digests of `ClusterInfo`), the job
//! finishes, and only then does the group rise to this build's feature level. Putting the
//! previous build back afterwards is refused at its start (it cannot open the raised group's
//! snapshot) instead of misreading the log.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use client::{MasterClient, TaskOutcome};
use proto::master::master_service_client::MasterServiceClient;
use proto::raft::ClusterInfoRequest;

use crate::command::raftrain_ok;
use crate::master_group::MasterGroup;

/// The release the upgrade starts from (what `.ci/run` builds `RAFTRAIN_PREVIOUS_BIN` from).
pub const PREVIOUS_RELEASE: &str = "3da7878";

const TASKS: u64 = 30;

/// The previous build, when the environment names one.
fn previous_build() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os("RAFTRAIN_PREVIOUS_BIN")?);
    assert!(path.is_file(), "RAFTRAIN_PREVIOUS_BIN {} is no file", path.display());
    Some(path)
}

/// Takes and finishes up to `count` tasks, each reported with the ask for the next (one write
/// once the group runs this build's level; before, a previous build ignores the receipts and
/// this build's leader refuses them, so the client reports them one by one): whether
/// the job finished.
async fn work(client: &MasterClient, trainer: u64, count: usize) -> bool {
    let mut finished = Vec::new();
    for _ in 0..count {
        let handed = client
            .finished_then_get_task(trainer, 0, &finished, &client::Together::Alone)
            .await
            .expect("hand-off");
        assert!(handed.finished.iter().all(|accepted| *accepted), "{finished:?}: {handed:?}");
        finished.clear();
        match handed.outcome {
            TaskOutcome::Task(task) => finished.push((task.task_id, task.epoch)),
            TaskOutcome::JobFinished | TaskOutcome::PassAfter { .. } => return true,
            other => panic!("{other:?}"),
        }
    }
    for (task_id, epoch) in finished {
        assert!(client.task_finished(task_id, epoch).await.expect("finish"));
    }
    false
}

/// Two trainers' asks gathered in one call (`client::AskGather`) to a group of the previous
/// build, which has no `GetTasks`: each ask is sent alone instead, and answered its own task.
async fn gathered_by_the_previous_build(
    group: &MasterGroup,
    (client, trainer): (&MasterClient, u64),
) {
    let other = group.client();
    let other_trainer = other.register_trainer("u").await.expect("register").trainer_id;
    let gather = client::AskGather::new(2).expect("a round of two");
    let together = client::Together::Gathered(gather.clone());
    let (first, second) = tokio::join!(
        client.finished_then_get_task(trainer, 0, &[], &together),
        other.finished_then_get_task(other_trainer, 0, &[], &together),
    );
    assert!(!gather.answered_in_one_call(), "the previous build answered GetTasks");
    for (client, handed) in [(client, first), (&other, second)] {
        match handed.expect("an ask sent alone").outcome {
            TaskOutcome::Task(task) => {
                assert!(client.task_finished(task.task_id, task.epoch).await.expect("finish"));
            }
            other => panic!("expected a task, got {other:?}"),
        }
    }
}

/// Waits until every replica applied the same index and says the same state digest there.
async fn await_agreement(group: &MasterGroup) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut answers = Vec::new();
        for addr in &group.addrs {
            let Ok(mut service) = MasterServiceClient::connect(format!("http://{addr}")).await
            else {
                continue;
            };
            let request = ClusterInfoRequest { state_digest: true };
            if let Ok(reply) = service.cluster_info(request).await {
                let reply = reply.into_inner();
                answers.push((reply.digest_applied_index, reply.state_digest));
            }
        }
        let agreed = answers.len() == group.addrs.len() && answers.windows(2).all(|w| w[0] == w[1]);
        if agreed {
            return answers[0].1;
        }
        assert!(
            Instant::now() < deadline,
            "the replicas never agreed: {answers:?}\n{}",
            group.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `dir` holds a snapshot file: the replica's snapshot of the raised level (the
/// job is far too short for one taken by count).
fn await_snapshot(dir: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let names = std::fs::read_dir(dir).into_iter().flatten().flatten();
        if names
            .map(|entry| entry.file_name())
            .any(|name| name.to_string_lossy().ends_with(".snap"))
        {
            return;
        }
        assert!(Instant::now() < deadline, "no snapshot in {}", dir.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The group's feature level as `raftrain status --json` says it.
fn group_level(masters: &str) -> u64 {
    let text = raftrain_ok(&["status", "--json", "--masters", masters], b"");
    let status: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    status["feature_level"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_of_the_previous_release_is_upgraded_one_master_at_a_time() {
    let Some(previous) = previous_build() else {
        eprintln!("skipped: RAFTRAIN_PREVIOUS_BIN is not set (.ci/run builds {PREVIOUS_RELEASE})");
        return;
    };
    let mut group = MasterGroup::prepare(3, &[]);
    for index in 0..3 {
        group.set_program(index, Some(&previous));
        group.spawn(index);
    }
    let masters = group.addrs.join(",");
    let mut args = vec!["job", "submit", "--masters", &masters, "--name", "upgraded"];
    let tasks = TASKS.to_string();
    args.extend(["--index", &tasks, "--shard-size", "1", "--passes", "1"]);
    raftrain_ok(&args, b"");
    let client = group.client();
    let trainer = client.register_trainer("t").await.expect("register").trainer_id;
    assert!(!work(&client, trainer, 5).await, "the job ran out early");
    gathered_by_the_previous_build(&group, (&client, trainer)).await;

    for index in 0..3 {
        tracing::info!(index, "--- master {} runs this build now", index + 1);
        group.kill(index);
        group.set_program(index, None);
        group.spawn(index);
        await_agreement(&group).await;
        if index < 2 {
            // 0 when a previous build leads (it says no level), else 1.
            let level = group_level(&masters);
            assert!(level <= 1, "raised while a previous build is a member\n{}", group.logs());
        }
        assert!(!work(&client, trainer, 5).await, "the job ran out early");
    }
    assert!(work(&client, trainer, TASKS as usize).await, "the job finishes");

    tracing::info!("--- every master runs this build: the group rises to its level");
    let deadline = Instant::now() + Duration::from_secs(30);
    while group_level(&masters) != u64::from(master::state::FEATURE_LEVEL) {
        assert!(Instant::now() < deadline, "never raised\n{}", group.logs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    await_agreement(&group).await;

    tracing::info!("--- the previous build put back on a raised replica refuses to start");
    await_snapshot(&group.dir.path().join("master-3/snapshots"));
    group.kill(2);
    group.set_program(2, Some(&previous));
    group.spawn(2);
    let exited = group.wait_exit(2, Duration::from_secs(30));
    let log = std::fs::read_to_string(group.log_path(2)).expect("master 3's log");
    assert!(exited.is_some_and(|status| !status.success()), "still running: {exited:?}\n{log}");
    assert!(log.contains("snapshot"), "{log}");
    group.set_program(2, None);
    group.spawn(2);
    await_agreement(&group).await;
}
