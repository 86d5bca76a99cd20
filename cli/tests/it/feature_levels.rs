//! Feature levels on real masters: a master held at an older level (`--feature-level 1`, as a
//! build before levels would answer) keeps the group at that level, so a command of a newer
//! level is refused naming the level and the member; once the hold is lifted the leader raises
//! the group's level and the command runs; a master then held below the group's level refuses
//! to run (a group's level never goes down) rather than apply what it was told not to admit.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::command::{raftrain, raftrain_ok, Output};
use crate::master_group::MasterGroup;

/// `raftrain status --json` of the group.
fn status(masters: &str) -> Value {
    let text = raftrain_ok(&["status", "--json", "--masters", masters], b"");
    serde_json::from_str(&text).expect("status --json is JSON")
}

/// Waits until the group's status says feature level `level`.
fn await_level(masters: &str, level: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = status(masters);
        if status["feature_level"] == level {
            return status;
        }
        assert!(Instant::now() < deadline, "the group never reached level {level}: {status}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Submits index job `name` of 4 tasks, shuffled with seed 7 when `shuffled`.
fn submit(masters: &str, name: &str, shuffled: bool) -> Output {
    let mut args = vec!["job", "submit", "--masters", masters, "--name", name];
    args.extend(["--index", "4", "--shard-size", "1", "--passes", "1"]);
    if shuffled {
        args.extend(["--shuffle", "--seed", "7"]);
    }
    raftrain(&args, b"")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_member_keeps_the_group_at_its_level_and_a_level_never_goes_down() {
    let mut group = MasterGroup::start_with_env(3, &[], &[(2, "RAFTRAIN_FEATURE_LEVEL", "1")]);
    let masters = group.addrs.join(",");
    let held = await_level(&masters, 1);
    let levels: Vec<&Value> =
        held["members"].as_array().expect("members").iter().map(|m| &m["feature_level"]).collect();
    assert!(levels.contains(&&Value::from(1)), "master 3 says level 1: {held}");

    tracing::info!("--- a level-1 command runs, a level-2 one is refused naming both levels");
    assert!(submit(&masters, "plain", false).success, "{}", group.logs());
    let refused = submit(&masters, "shuffled", true);
    let stderr = &refused.stderr;
    assert!(!refused.success, "a shuffled job needs level 2");
    assert!(
        stderr.contains("feature level 2") && stderr.contains("decodes only level 1"),
        "{stderr}"
    );
    let text = raftrain_ok(&["status", "--masters", &masters], b"");
    assert!(text.contains("feature level 1") && text.contains("decodes level 1"), "{text}");

    tracing::info!("--- the hold is lifted: the leader raises the group to level 2");
    group.kill(2);
    group.set_env(2, "RAFTRAIN_FEATURE_LEVEL", "2");
    group.spawn(2);
    await_level(&masters, 2);
    let accepted = submit(&masters, "shuffled", true);
    assert!(accepted.success, "{}\n{}", accepted.stderr, group.logs());

    tracing::info!("--- held at level 1 again, master 3 refuses to run on a level-2 group");
    group.kill(2);
    group.set_env(2, "RAFTRAIN_FEATURE_LEVEL", "1");
    group.spawn(2);
    let exited = group.wait_exit(2, Duration::from_secs(30));
    assert!(exited.is_some_and(|status| !status.success()), "still running: {exited:?}");
    let log = std::fs::read_to_string(group.log_path(2)).expect("master 3's log");
    assert!(log.contains("admits up to 1") && log.contains("lift its hold"), "{log}");
    assert!(submit(&masters, "after", true).success, "the other two go on at level 2");
}
