//! A restore with the model under the faults of real use, with real processes (3 masters, 2
//! pservers of a named job): a cancel made while the restore waits for a paused pserver is
//! final (the slot released a lease later completes nothing); a pserver that cannot read any
//! file of its slot says why (`job list`) and gives its slot up, so the restore does not wait
//! for ever; a job submitted again under a used name never shares the old incarnation's
//! checkpoint files; and a gradient computed on the model before a restore never lands in the
//! restored one.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use client::pserver::layout::{JobLayout, ParamSpec};
use client::pserver::PServerClient;
use nix::sys::signal::Signal;
use optimizer::{OptimizerConfig, OptimizerKind};

use crate::command::{raftrain, raftrain_ok};
use crate::master_group::MasterGroup;
use crate::named_jobs::{client_of, job_list, wait_until};
use crate::pserver_processes::PServerProcesses;

/// The pservers' lease: short, so a dead holder's slot is freed within the test.
const LEASE_MS: &str = "1500";

fn layout() -> JobLayout {
    let params = vec![ParamSpec { name: "w".into(), shape: vec![1000] }];
    let optimizer = OptimizerConfig { learning_rate: 0.5, kind: OptimizerKind::Sgd };
    JobLayout { params, block_elements: 256, slot_count: 2, optimizer }
}

/// Job `name`'s entry of `job list --json`.
fn listed(group: &MasterGroup, name: &str) -> serde_json::Value {
    let list = job_list(group);
    let jobs = list["jobs"].as_array().cloned().unwrap_or_default();
    jobs.into_iter().find(|job| job["name"] == name).unwrap_or(serde_json::Value::Null)
}

/// Submits job `name` (20 one-index tasks), starts its 2 pservers, initializes the model and
/// takes a progress checkpoint both pservers back with theirs; the checkpoint's id.
async fn checkpointed(group: &MasterGroup, pservers: &mut PServerProcesses, name: &str) -> u64 {
    let masters = group.addrs.join(",");
    let submit = ["job", "submit", "--masters", &masters, "--name", name, "--index", "20"];
    raftrain_ok(&[&submit[..], &["--shard-size", "1", "--passes", "2"]].concat(), b"");
    pservers.spawn_with(&["--job", name]);
    pservers.spawn_with(&["--job", name]);
    let client = PServerClient::new(
        Arc::new(client_of(group, name)),
        1,
        crate::pserver_processes::test_client_options(),
    );
    client.wait_for_slots(Some(Duration::from_secs(30))).await.expect("both slots held");
    let initial = vec![0.5f32; 1000];
    client.init_or_wait(&layout(), &[("w", initial.as_slice())]).await.expect("init");
    let gradient = vec![0.1f32; 1000];
    client.push(&layout(), &[("w", gradient.as_slice())]).await.expect("push");
    let taken = raftrain_ok(&["job", "checkpoint", name, "--masters", &masters, "--json"], b"");
    let taken: serde_json::Value = serde_json::from_str(taken.trim()).expect("json");
    let id = taken["checkpoint"].as_u64().expect("an id");
    let tagged = || listed(group, name)["newest_model_checkpoint"].as_u64() == Some(id);
    wait_until(Duration::from_secs(30), tagged, || pservers.logs());
    id
}

/// `job restore` waiting for its pservers says the restore did not happen when the job is
/// cancelled meanwhile (it printed "restored ... with its model" and exited 0): a paused
/// pserver keeps its slot for its lease (long here), so the restore waits for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_waiting_when_its_job_is_cancelled_says_it_did_not_happen() {
    let group = MasterGroup::start(3, &["--pserver-lease-ms", "30000"]);
    let masters = group.addrs.join(",");
    let dir = tempfile::tempdir().expect("temp");
    let mut pservers = PServerProcesses::new(&group.addrs, dir.path(), 2);
    let id = checkpointed(&group, &mut pservers, "w").await.to_string();
    pservers.signal(0, Signal::SIGSTOP);
    let restore = ["job", "restore", "w", "--checkpoint", &id, "--masters", &masters];
    let owned: Vec<String> = restore.iter().map(|arg| arg.to_string()).collect();
    let waiting = std::thread::spawn(move || {
        let args: Vec<&str> = owned.iter().map(String::as_str).collect();
        raftrain(&[&args[..], &["--wait-secs", "60"]].concat(), b"")
    });
    let restoring = || listed(&group, "w")["reloads_waiting"].as_u64() >= Some(1);
    wait_until(Duration::from_secs(30), restoring, || pservers.logs());
    raftrain_ok(&["job", "cancel", "w", "--masters", &masters], b"");
    let waited = waiting.join().expect("the waiting restore");
    let said = "cancelled while its pservers reloaded: it was not restored";
    let output = format!("{}{}", waited.stdout_text(), waited.stderr);
    assert!(!waited.success && waited.stderr.contains(said), "{output}");
    pservers.kill(0);
}

/// A cancel made while a restore waits for its pservers is final: the paused pserver's slot is
/// released a lease after it is killed, and that release completes nothing; the job stays
/// cancelled, no restore waits, and a restore of it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_while_a_restore_waits_stays_cancelled() {
    let group = MasterGroup::start(3, &["--pserver-lease-ms", LEASE_MS]);
    let masters = group.addrs.join(",");
    let dir = tempfile::tempdir().expect("temp");
    let mut pservers = PServerProcesses::new(&group.addrs, dir.path(), 2);
    let id = checkpointed(&group, &mut pservers, "c").await;

    tracing::info!("--- one pserver paused: the restore waits for it");
    pservers.signal(0, Signal::SIGSTOP);
    let restore = ["job", "restore", "c", "--checkpoint", &id.to_string(), "--masters", &masters];
    let waited = raftrain(&[&restore[..], &["--wait-secs", "1"]].concat(), b"");
    assert!(!waited.success, "the paused pserver cannot reload: {}", waited.stderr);
    assert!(listed(&group, "c")["reloads_waiting"].as_u64() >= Some(1));

    tracing::info!("--- the cancel ends the restore; the paused holder dies, its slot is freed");
    raftrain_ok(&["job", "cancel", "c", "--masters", &masters], b"");
    assert_eq!(listed(&group, "c")["state"], "cancelled");
    assert_eq!(listed(&group, "c")["reloads_waiting"], 0);
    pservers.kill(0);
    let freed = || listed(&group, "c")["pservers"] == 0;
    wait_until(Duration::from_secs(30), freed, || pservers.logs());
    std::thread::sleep(Duration::from_millis(500));
    let job = listed(&group, "c");
    assert_eq!(job["state"], "cancelled", "the release put nothing back: {job}");
    assert_eq!(job["reloads_waiting"], 0);
    let again = raftrain(&restore, b"");
    assert!(!again.success && again.stderr.contains("cancelled"), "{}", again.stderr);
}

/// A pserver that cannot read its slot's file for a restore, nor any older one, tells the
/// masters why (`job list` shows the slot and the reason) and gives its slot up after a few
/// attempts, exiting non-zero: the restore waits no more for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pserver_that_cannot_reload_says_why_and_gives_its_slot_up() {
    let group = MasterGroup::start(3, &["--pserver-lease-ms", "3000"]);
    let masters = group.addrs.join(",");
    let dir = tempfile::tempdir().expect("temp");
    let mut pservers = PServerProcesses::new(&group.addrs, dir.path(), 2);
    let id = checkpointed(&group, &mut pservers, "r").await;

    tracing::info!("--- every checkpoint file of both slots is removed, the fallbacks too");
    let job_id = listed(&group, "r")["job_id"].as_u64().expect("the incarnation id");
    let job_dir =
        pserver::job_dir::job_checkpoint_dir(&dir.path().join("checkpoints"), job_id, "r");
    // Each pserver's periodic round (every second) writes the model it has once: after that
    // its rounds write nothing new, so nothing comes back after the removal.
    let periodic = || {
        let entries = std::fs::read_dir(&job_dir).into_iter().flatten().filter_map(Result::ok);
        entries.filter(|entry| entry.file_name().to_string_lossy().contains("-step-")).count()
    };
    wait_until(Duration::from_secs(30), || periodic() >= 2, || pservers.logs());
    std::thread::sleep(Duration::from_millis(1_500));
    remove_checkpoint_files(&job_dir);

    let client = client_of(&group, "r");
    let restore = ["job", "restore", "r", "--checkpoint", &id.to_string(), "--masters", &masters];
    let waited = raftrain(&[&restore[..], &["--wait-secs", "1"]].concat(), b"");
    assert!(!waited.success, "no pserver can reload: {}\n{}", waited.stderr, pservers.logs());
    let mut reasons = Vec::new();
    let said = || {
        let jobs = block_on(client.list_jobs()).expect("list the jobs");
        let job = jobs.jobs.into_iter().find(|summary| summary.job == "r").expect("job r");
        reasons = job.reload_waits;
        !reasons.is_empty()
    };
    wait_until(Duration::from_secs(20), said, || pservers.logs());
    assert!(reasons.iter().all(|(_, reason)| reason.contains("no usable file")), "{reasons:?}");

    tracing::info!("--- after a few attempts each holder gives its slot up: the restore ends");
    let waits_no_more = || listed(&group, "r")["reloads_waiting"] == 0;
    wait_until(Duration::from_secs(30), waits_no_more, || pservers.logs());
    for index in 0..2 {
        let code = pservers.wait_exit(index, Duration::from_secs(30));
        assert!(code.is_some_and(|code| code != 0), "pserver {index} exits non-zero: {code:?}");
        assert!(pservers.log(index).contains("gives the slot up"), "{}", pservers.log(index));
    }
}

/// A job cancelled, removed and submitted again under its name is a new incarnation: its
/// pservers write into a directory of their own and never touch the old one's files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_name_never_shares_the_old_jobs_files() {
    let group =
        MasterGroup::start(3, &["--pserver-lease-ms", LEASE_MS, "--job-retention-secs", "0"]);
    let masters = group.addrs.join(",");
    let dir = tempfile::tempdir().expect("temp");
    let mut pservers = PServerProcesses::new(&group.addrs, dir.path(), 2);
    checkpointed(&group, &mut pservers, "n").await;
    let first = listed(&group, "n")["job_id"].as_u64().expect("the first incarnation");
    let root = dir.path().join("checkpoints");
    let old_dir = pserver::job_dir::job_checkpoint_dir(&root, first, "n");
    raftrain_ok(&["job", "cancel", "n", "--masters", &masters], b"");
    for index in 0..2 {
        assert_eq!(
            pservers.wait_exit(index, Duration::from_secs(30)),
            Some(0),
            "cancelled: exit 0"
        );
    }
    let removed = || listed(&group, "n").is_null();
    wait_until(Duration::from_secs(30), removed, || pservers.logs());
    let old_files = files_under(&old_dir);
    assert!(!old_files.is_empty(), "the first incarnation's checkpoints are on disk");

    tracing::info!("--- the name again: a new incarnation, a new directory");
    checkpointed(&group, &mut pservers, "n").await;
    let second = listed(&group, "n")["job_id"].as_u64().expect("the second incarnation");
    assert!(second > first, "incarnation ids are never reused");
    let new_dir = pserver::job_dir::job_checkpoint_dir(&root, second, "n");
    assert_ne!(new_dir, old_dir);
    assert!(!files_under(&new_dir).is_empty(), "the new incarnation writes its own");
    assert_eq!(files_under(&old_dir), old_files, "the old incarnation's files are untouched");
}

/// Every file under `dir`, with its length, recursively.
fn files_under(dir: &Path) -> BTreeMap<String, u64> {
    let mut files = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return files };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else if let Ok(metadata) = entry.metadata() {
            files.insert(path.display().to_string(), metadata.len());
        }
    }
    files
}

/// Removes every checkpoint file under `dir`, recursively.
fn remove_checkpoint_files(dir: &Path) {
    for path in files_under(dir).keys() {
        let name = Path::new(path).file_name().map(|name| name.to_string_lossy().into_owned());
        if name.as_deref().and_then(storage::checkpoint::parse_file_name).is_some() {
            std::fs::remove_file(path).expect("remove a checkpoint file");
        }
    }
}

/// Runs `future` to its end on a runtime of its own (the test's closures are not async).
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

/// A gradient computed on values pulled before a restore with the model (a task in flight when
/// it was asked) is refused by the reloaded pservers and changes nothing; pulled again, the
/// restored model is the checkpoint's, and a gradient computed on it is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_computed_before_a_restore_never_lands_in_the_restored_model() {
    let group = MasterGroup::start(1, &["--pserver-lease-ms", LEASE_MS]);
    let masters = group.addrs.join(",");
    let dir = tempfile::tempdir().expect("temp");
    let mut pservers = PServerProcesses::new(&group.addrs, dir.path(), 2);
    let id = checkpointed(&group, &mut pservers, "f").await;
    let client = PServerClient::new(
        Arc::new(client_of(&group, "f")),
        2,
        crate::pserver_processes::test_client_options(),
    );
    let gradient = vec![0.1f32; 1000];
    client.pull(&layout()).await.expect("a pull before the restore");

    tracing::info!("--- the model is restored while this client's gradient is computed");
    let restore = ["job", "restore", "f", "--checkpoint", &id.to_string(), "--masters", &masters];
    raftrain_ok(&[&restore[..], &["--wait-secs", "30"]].concat(), b"");
    let steps = |statuses: Vec<(u32, Result<proto::pserver::StatusReply, tonic::Status>)>| {
        statuses.into_iter().map(|(slot, status)| (slot, status.expect("status").step)).collect()
    };
    let before: BTreeMap<u32, u64> = steps(client.statuses().await);
    let refused = client.push(&layout(), &[("w", gradient.as_slice())]).await;
    assert!(
        matches!(refused, Err(client::pserver::PServerClientError::ModelRestored { .. })),
        "{refused:?}\n{}",
        pservers.logs()
    );
    assert_eq!(steps(client.statuses().await), before, "nothing applied");

    tracing::info!("--- pulled again: the checkpoint's model; a push on it is applied");
    let pulled = client.pull(&layout()).await.expect("a pull after the restore");
    assert!(pulled["w"].iter().all(|value| (value - 0.45).abs() < 1e-6), "{:?}", &pulled["w"][..4]);
    client
        .push(&layout(), &[("w", gradient.as_slice())])
        .await
        .expect("a push on the restored model");
    let pulled = client.pull(&layout()).await.expect("pull");
    assert!(pulled["w"].iter().all(|value| (value - 0.40).abs() < 1e-6), "{:?}", &pulled["w"][..4]);
}
