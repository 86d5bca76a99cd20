//! `raftrain member` and `raftrain master --join` with real masters while a job's tasks are
//! taken and finished: the group grows from 3 to 5 members and back to 3 (the leader among the
//! removed, so it hands off first), a dead member is removed and replaced on a new address, and
//! a client started with the three original addresses keeps working after all of them left.
//! Removed masters stop and refuse to serve again (one started with `--leave-on-stop` leaves on
//! SIGTERM and joins anew when started again); duplicate ids and addresses are refused; the
//! job finishes with every task done and none failed.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client::{MasterClient, TaskOutcome};

use crate::command::{raftrain, raftrain_ok};
use crate::master_group::MasterGroup;

const TASKS: u64 = 600;
const JOB: &str = "members";

type Finished = Arc<Mutex<BTreeSet<u64>>>;

/// Takes and finishes tasks until the job finishes, a few ms each; heartbeats keep the lease.
async fn work(client: Arc<MasterClient>, finished: Finished) {
    let trainer = client.register_trainer("worker").await.expect("register").trainer_id;
    let beating = client.clone();
    let heartbeat = tokio::spawn(async move {
        loop {
            let _ = beating.heartbeat(trainer, 0).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    });
    loop {
        match client.get_task(trainer, 0).await.expect("get_task") {
            TaskOutcome::Task(task) => {
                tokio::time::sleep(Duration::from_millis(25)).await;
                assert!(client.task_finished(task.task_id, task.epoch).await.expect("finish"));
                finished.lock().expect("not poisoned").insert(task.task_id);
            }
            TaskOutcome::NoMoreAvailable => tokio::time::sleep(Duration::from_millis(100)).await,
            TaskOutcome::JobFinished => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    heartbeat.abort();
}

fn count(finished: &Finished) -> usize {
    finished.lock().expect("not poisoned").len()
}

/// `member list --json` through `masters`.
fn members(masters: &str) -> serde_json::Value {
    let text = raftrain_ok(&["member", "list", "--json", "--masters", masters], b"");
    serde_json::from_str(&text).expect("member list prints JSON")
}

fn voters(members: &serde_json::Value) -> BTreeSet<u64> {
    let rows = members["members"].as_array().expect("a member array");
    let voters = rows.iter().filter(|row| row["voter"] == true);
    voters.map(|row| row["id"].as_u64().expect("an id")).collect()
}

/// Waits (300 looks, 200 ms apart) for the voters to be `want`.
async fn wait_voters(group: &MasterGroup, masters: &str, want: &[u64]) {
    let want: BTreeSet<u64> = want.iter().copied().collect();
    let mut listed = serde_json::Value::Null;
    for _ in 0..300 {
        listed = members(masters);
        if voters(&listed) == want && listed["joint"] == false {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the voters never became {want:?}: {listed}\n{}", group.logs());
}

/// Waits for removed replica `index` to stop, saying why.
fn assert_stops_removed(group: &mut MasterGroup, index: usize) {
    let status = group.wait_exit(index, Duration::from_secs(20));
    assert!(status.is_some_and(|status| !status.success()), "{status:?}\n{}", group.logs());
    let log = std::fs::read_to_string(group.log_path(index)).unwrap_or_default();
    assert!(log.contains("removed from the group"), "{log}");
}

/// Three masters, a job of `TASKS` tasks, and a worker taking and finishing them, built on the
/// three original addresses only (it must learn the members that replace them).
fn start_training() -> (MasterGroup, Finished, tokio::task::JoinHandle<()>) {
    let group = MasterGroup::start(3, &["--trainer-lease-ms", "3000"]);
    let masters = group.addrs.join(",");
    let tasks = TASKS.to_string();
    let submit = ["job", "submit", "--masters", &masters, "--name", JOB, "--index", &tasks];
    raftrain_ok(&[&submit[..], &["--shard-size", "1", "--passes", "1"]].concat(), b"");
    let finished = Finished::default();
    let worker = tokio::spawn(work(Arc::new(group.client()), finished.clone()));
    (group, finished, worker)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_group_grows_shrinks_and_replaces_members_while_a_job_trains() {
    let (mut group, finished, worker) = start_training();
    let original = group.addrs.clone();
    let masters = original.join(",");

    tracing::info!("--- grow from 3 to 5: two masters join");
    let four = group.add_joiner(&original);
    let five = group.add_joiner(&original);
    wait_voters(&group, &masters, &[1, 2, 3, 4, 5]).await;
    let (addr4, addr5) = (group.addrs[four].clone(), group.addrs[five].clone());
    let taken = raftrain(&["member", "add", "4", &addr5, "--masters", &masters], b"");
    assert!(!taken.success && taken.stderr.contains("already"), "{}", taken.stderr);
    let taken = raftrain(&["member", "add", "6", &addr4, "--masters", &masters], b"");
    assert!(!taken.success && taken.stderr.contains("already member 4"), "{}", taken.stderr);
    let before = count(&finished);

    tracing::info!("--- shrink to 3: the leader removes itself (handing off first), then another");
    let leader = group.leader_index().await;
    assert!(leader < 3, "an original member leads: {leader}");
    let leader_id = (leader + 1).to_string();
    let table = raftrain_ok(&["member", "remove", &leader_id, "--masters", &masters], b"");
    assert!(!table.contains(&format!("\n{leader_id:>6}  ")), "{table}");
    assert_stops_removed(&mut group, leader);
    let other = (0..3).find(|index| *index != leader).expect("another original");
    raftrain_ok(&["member", "remove", &(other + 1).to_string(), "--masters", &masters], b"");
    assert_stops_removed(&mut group, other);
    let last = (0..3).find(|index| *index != leader && *index != other).expect("the third");
    let last_id = last as u64 + 1;
    wait_voters(&group, &masters, &[last_id, 4, 5]).await;

    tracing::info!("--- remove a dead member and replace it on a new address");
    group.kill(last);
    let now = [addr4.clone(), addr5.clone()].join(",");
    raftrain_ok(&["member", "remove", &last_id.to_string(), "--masters", &now], b"");
    let six = group.add_joiner(std::slice::from_ref(&addr4));
    let now = [addr4, addr5, group.addrs[six].clone()].join(",");
    wait_voters(&group, &now, &[4, 5, 6]).await;
    let after_changes = count(&finished);
    assert!(after_changes > before, "tasks were finished while the members changed");

    tracing::info!("--- the worker, given only the original addresses, finishes the job");
    worker.await.expect("the worker finishes the job");
    let addrs: Vec<String> = now.split(',').map(str::to_string).collect();
    let client = MasterClient::new(&addrs, client::ClientOptions::default()).expect("a client");
    let status = client.status_of(JOB).await.expect("status");
    assert!(status.job_finished, "{status:?}");
    assert_eq!((status.done, status.failed), (TASKS, 0), "{status:?}");
    assert_eq!(count(&finished) as u64, TASKS);

    tracing::info!("--- a removed master refuses to start on its directory");
    group.spawn(leader);
    let status = group.wait_exit(leader, Duration::from_secs(20));
    assert!(status.is_some_and(|status| !status.success()), "{status:?}");
    let log = std::fs::read_to_string(group.log_path(leader)).unwrap_or_default();
    assert!(log.contains("was removed from its group"), "{log}");
}

/// Waits (3,000 looks, 20 ms apart) until member `id` is listed (as a learner or a voter).
async fn wait_listed(group: &MasterGroup, masters: &str, id: u64) {
    let mut listed = serde_json::Value::Null;
    for _ in 0..3000 {
        listed = members(masters);
        let rows = listed["members"].as_array().expect("a member array");
        if rows.iter().any(|row| row["id"] == id) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("member {id} was never listed: {listed}\n{}", group.logs());
}

/// The leader killed in the middle of a member's joining, and a learner killed while it
/// catches up: both joins complete once the killed processes are back, and the job finishes
/// with every task done and none failed. Changes that cannot be made are refused clearly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_complete_through_a_killed_leader_and_a_killed_learner() {
    let (mut group, finished, worker) = start_training();
    let original = group.addrs.clone();
    let masters = original.join(",");

    tracing::info!("--- changes that cannot be made are refused, naming why");
    let nobody = crate::master_group::free_loopback_addr();
    let out = raftrain(&["member", "add", "7", &nobody, "--masters", &masters], b"");
    assert!(!out.success && out.stderr.contains("no master answers"), "{}", out.stderr);
    let out = raftrain(&["member", "remove", "9", "--masters", &masters], b"");
    assert!(!out.success && out.stderr.contains("9 is not a member"), "{}", out.stderr);
    let out = raftrain(&["member", "add", "0", &nobody, "--masters", &masters], b"");
    assert!(!out.success && out.stderr.contains("id 0"), "{}", out.stderr);
    let out = raftrain(&["member", "add", "7", "localhost", "--masters", &masters], b"");
    assert!(!out.success && out.stderr.contains("no port"), "{}", out.stderr);

    tracing::info!("--- the leader is killed as soon as member 4 is listed");
    let four = group.add_joiner(&original);
    wait_listed(&group, &masters, 4).await;
    let leader = group.leader_index().await;
    group.kill(leader);
    let survivors: Vec<String> =
        (0..4).filter(|index| *index != leader).map(|index| group.addrs[index].clone()).collect();
    let survivors = survivors.join(",");
    wait_voters(&group, &survivors, &[1, 2, 3, 4]).await;
    group.spawn(leader);
    assert_eq!(four, 3);

    tracing::info!("--- member 5 is killed while it catches up, then started again");
    let five = group.add_joiner(&original);
    wait_listed(&group, &masters, 5).await;
    group.kill(five);
    tokio::time::sleep(Duration::from_millis(500)).await;
    group.spawn(five);
    wait_voters(&group, &masters, &[1, 2, 3, 4, 5]).await;

    tracing::info!("--- the job finishes, nothing lost");
    worker.await.expect("the worker finishes the job");
    let status = group.client().status_of(JOB).await.expect("status");
    assert!(status.job_finished, "{status:?}");
    assert_eq!((status.done, status.failed), (TASKS, 0), "{status:?}");
    assert_eq!(count(&finished) as u64, TASKS);
}

/// A `--join` master keeps the first committed membership that listed it (`JOINED`): started
/// on a copy of its directory from before its removal, it stops as removed instead of asking
/// to be added again (a removal is never undone by a join). A directory without that record
/// (an older build's) whose own log says it is a voter (as a joiner killed during its
/// catch-up restarts on the start of the group's log, where its id was a founding voter) is
/// not one for that: it asks the group until the leader lists it a voter. It used to trust its
/// own log, ask nothing and stay out of the group: the fault harness's membership nemesis found
/// it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_rejoining_on_an_old_log_asks_until_it_is_a_voter() {
    let mut group = MasterGroup::start(3, &[]);
    let masters = group.addrs.join(",");
    wait_voters(&group, &masters, &[1, 2, 3]).await;
    let leader = group.leader_index().await;
    let follower = (0..3).find(|index| *index != leader).expect("a follower");
    let id = (follower + 1).to_string();
    let data_dir = group.dir.path().join(format!("master-{}", follower + 1));
    let others: Vec<String> =
        (0..3).filter(|index| *index != follower).map(|index| group.addrs[index].clone()).collect();

    tracing::info!("--- remove a follower and bring it back with an empty directory and --join");
    raftrain_ok(&["member", "remove", &id, "--masters", &masters], b"");
    assert_stops_removed(&mut group, follower);
    std::fs::remove_dir_all(&data_dir).expect("wipe the removed master's directory");
    group.rejoin(follower, &others);
    wait_voters(&group, &masters, &[1, 2, 3]).await;

    tracing::info!("--- keep a copy of its directory while it is a voter");
    let stopped = group.terminate(follower, Duration::from_secs(20));
    assert!(stopped.is_some(), "{}", group.logs());
    let early = group.dir.path().join("early-copy");
    copy_dir(&data_dir, &early);
    assert!(early.join("JOINED").is_file(), "the joined master keeps its record");
    let joined_before = joined_count(&group, follower);
    group.spawn(follower);
    wait_voters(&group, &masters, &[1, 2, 3]).await;
    wait_joined(&group, follower, joined_before).await;

    tracing::info!("--- remove it again, then start it on the old copy: it stops as removed");
    raftrain_ok(&["member", "remove", &id, "--masters", &masters], b"");
    assert_stops_removed(&mut group, follower);
    let removals = removed_count(&group, follower);
    std::fs::remove_dir_all(&data_dir).expect("remove the removed master's directory");
    copy_dir(&early, &data_dir);
    group.spawn(follower);
    assert_stops_removed(&mut group, follower);
    assert_eq!(removed_count(&group, follower), removals + 1, "{}", group.logs());
    let why = std::fs::read_to_string(data_dir.join("REMOVED")).expect("the REMOVED marker");
    assert!(why.contains("listed this master"), "{why}");
    assert_eq!(voters(&members(&masters)).len(), 2);

    tracing::info!("--- the old copy without its record (an older build's): it asks, and votes");
    std::fs::remove_dir_all(&data_dir).expect("remove the removed master's directory");
    std::fs::remove_file(early.join("JOINED")).expect("drop the record");
    std::fs::rename(&early, &data_dir).expect("put the old copy in its place");
    group.spawn(follower);
    wait_voters(&group, &masters, &[1, 2, 3]).await;
}

/// How often replica `index`'s log says it stopped as removed.
fn removed_count(group: &MasterGroup, index: usize) -> usize {
    let log = std::fs::read_to_string(group.log_path(index)).unwrap_or_default();
    log.matches("exiting reason=this master was removed from the group").count()
}

/// `--leave-on-stop` (the masters' StatefulSet's pods beyond the three founders): a joined
/// member stopped with SIGTERM has the group remove it and exits cleanly, so a scale-down
/// leaves the three voters it started from (no dead voter, whose absence would make any
/// further failure cost the quorum); started again on its directory, it clears it and joins
/// anew; leading when stopped, it hands leadership off first (with a founder dead meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_leaves_on_stop_leaves_the_group_and_joins_again() {
    let mut group = MasterGroup::start(3, &[]);
    let original = group.addrs.clone();
    let masters = original.join(",");
    let four = group.add_joiner_with_env(&original, &[("RAFTRAIN_LEAVE_ON_STOP", "true")]);
    wait_voters(&group, &masters, &[1, 2, 3, 4]).await;

    tracing::info!("--- SIGTERM: it leaves the group and exits 0");
    let stopped = group.terminate(four, Duration::from_secs(30));
    assert!(stopped.is_some_and(|status| status.success()), "{stopped:?}\n{}", group.logs());
    wait_voters(&group, &masters, &[1, 2, 3]).await;
    let log = std::fs::read_to_string(group.log_path(four)).unwrap_or_default();
    assert!(log.contains("left the group (--leave-on-stop)"), "{log}");

    tracing::info!("--- started again on its directory (favoured in elections): it joins anew");
    group.favour(four);
    group.spawn(four);
    wait_voters(&group, &masters, &[1, 2, 3, 4]).await;
    let log = std::fs::read_to_string(group.log_path(four)).unwrap_or_default();
    assert!(log.contains("clearing its directory to join anew"), "{log}");

    tracing::info!("--- leading when stopped: it hands leadership off, then leaves");
    let founder = group.leader_index().await;
    group.kill(founder);
    let mut leader = founder;
    for _ in 0..300 {
        leader = group.leader_index().await;
        if leader == four {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(leader, four, "the favoured member leads\n{}", group.logs());
    let stopped = group.terminate(four, Duration::from_secs(30));
    assert!(stopped.is_some_and(|status| status.success()), "{stopped:?}\n{}", group.logs());
    wait_voters(&group, &masters, &[1, 2, 3]).await;
    let log = std::fs::read_to_string(group.log_path(four)).unwrap_or_default();
    assert!(log.contains("handed leadership off"), "{log}");
    assert_eq!(log.matches("left the group (--leave-on-stop)").count(), 2, "{log}");
    group.spawn(founder);
    wait_voters(&group, &masters, &[1, 2, 3]).await;
}

/// How often replica `index`'s log says its `--join` found it a voter.
fn joined_count(group: &MasterGroup, index: usize) -> usize {
    let log = std::fs::read_to_string(group.log_path(index)).unwrap_or_default();
    log.matches("a voter of the group").count()
}

/// Waits (300 looks, 100 ms apart) until replica `index`'s `--join` found it a voter again.
async fn wait_joined(group: &MasterGroup, index: usize, before: usize) {
    for _ in 0..300 {
        if joined_count(group, index) > before {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("replica {index} never found itself a voter\n{}", group.logs());
}

/// Copies directory `from` to `to`, files and subdirectories.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).expect("list the directory") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        match entry.file_type().expect("a file type").is_dir() {
            true => copy_dir(&entry.path(), &target),
            false => {
                std::fs::copy(entry.path(), &target).expect("copy a file");
            }
        }
    }
}

/// A master holding another group's log is refused by `member add` before the group changes:
/// one founded on its own (none of the group's members in its membership), and one seeded from
/// a backup of this very group (its terms start far above the group's). Added, either log would
/// meet the group's at the same indexes with other entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_holding_another_groups_log_is_refused() {
    let group = MasterGroup::start(3, &[]);
    let masters = group.addrs.join(",");
    wait_voters(&group, &masters, &[1, 2, 3]).await;
    let dir = group.dir.path();
    let founded = crate::master_group::free_loopback_addr();
    let own_peers = format!("4={founded}");
    let mut alone = start_master("4", &founded, &own_peers, &dir.join("alone"));
    wait_serving(&founded);
    refused(&masters, "4", &founded, "its members 4=");

    let backup = dir.join("backup.bin").display().to_string();
    raftrain_ok(&["snapshot", "save", &backup, "--masters", &masters], b"");
    let seeded = crate::master_group::free_loopback_addr();
    let peers: Vec<String> =
        (0..3).map(|index| format!("{}={}", index + 1, group.addrs[index])).collect();
    let peers = format!("{},5={seeded}", peers.join(","));
    let seeded_dir = dir.join("seeded").display().to_string();
    let restore =
        ["snapshot", "restore", &backup, "--data-dir", &seeded_dir, "--id", "5", "--peers", &peers];
    raftrain_ok(&restore, b"");
    let mut restored = start_master("5", &seeded, &peers, &dir.join("seeded"));
    refused(&masters, "5", &seeded, "is above the group's");
    assert_eq!(voters(&members(&masters)), BTreeSet::from([1, 2, 3]), "{}", group.logs());
    for child in [&mut alone, &mut restored] {
        child.kill().expect("kill the other master");
        child.wait().expect("reap it");
    }
}

fn start_master(
    id: &str,
    listen: &str,
    peers: &str,
    data_dir: &std::path::Path,
) -> std::process::Child {
    let data_dir = data_dir.display().to_string();
    let args =
        ["master", "--id", id, "--listen", listen, "--peers", peers, "--data-dir", &data_dir];
    std::process::Command::new(env!("CARGO_BIN_EXE_raftrain"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start a master")
}

/// Waits (300 looks, 100 ms apart) until the master at `addr` answers `status` as a leader.
fn wait_serving(addr: &str) {
    for _ in 0..300 {
        if raftrain(&["status", "--masters", addr], b"").success {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the master at {addr} never served");
}

/// `member add ID ADDR` is refused as another group's master, naming `why`; retried while the
/// newcomer is not answering yet.
fn refused(masters: &str, id: &str, addr: &str, why: &str) {
    let mut output = raftrain(&["member", "add", id, addr, "--masters", masters], b"");
    for _ in 0..100 {
        if !output.stderr.contains("no master answers") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        output = raftrain(&["member", "add", id, addr, "--masters", masters], b"");
    }
    assert!(!output.success, "member {id} was added");
    assert!(output.stderr.contains("holds a log of another group"), "{}", output.stderr);
    assert!(output.stderr.contains(why), "{}", output.stderr);
}
