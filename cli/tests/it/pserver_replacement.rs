//! End-to-end, real processes: pservers hold their slots through the master, a standby waits
//! while the leases hold, a paused pserver whose slot was taken serves nothing after it
//! resumes and exits, and a pserver killed with SIGKILL is replaced by one that restores its
//! checkpoint bit for bit while the trainer's client carries on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use client::pserver::layout::{JobLayout, ParamSpec};
use client::pserver::PServerClient;
use nix::sys::signal::Signal;
use optimizer::{OptimizerConfig, OptimizerKind};
use proto::pserver as pb;
use proto::pserver::p_server_service_client::PServerServiceClient;

use crate::master_group::MasterGroup;
use crate::pserver_processes::PServerProcesses;

const LEASE_MS: &str = "1500";

fn layout() -> JobLayout {
    let params = vec![
        ParamSpec { name: "w".into(), shape: vec![300, 1000] },
        ParamSpec { name: "b".into(), shape: vec![10] },
    ];
    let optimizer = OptimizerConfig { learning_rate: 0.5, kind: OptimizerKind::MOMENTUM_DEFAULT };
    JobLayout { params, block_elements: 65_536, slot_count: 2, optimizer }
}

fn initial() -> BTreeMap<String, Vec<f32>> {
    let w = (0..300_000).map(|i| (i % 97) as f32 * 0.01).collect();
    BTreeMap::from([("w".to_string(), w), ("b".to_string(), vec![1.0; 10])])
}

fn tensors(values: &BTreeMap<String, Vec<f32>>) -> Vec<(&str, &[f32])> {
    values.iter().map(|(name, values)| (name.as_str(), values.as_slice())).collect()
}

async fn push_some(client: &PServerClient, count: usize) {
    let gradient = gradient();
    for _ in 0..count {
        client.push(&layout(), &tensors(&gradient)).await.expect("push");
    }
}

/// Waits until every slot's newest recorded checkpoint covers all its pushes.
async fn checkpointed(client: &PServerClient, processes: &PServerProcesses) {
    for _ in 0..300 {
        let statuses = client.statuses().await;
        let covered = statuses.iter().all(|(_, status)| {
            status.as_ref().is_ok_and(|s| s.step > 0 && s.checkpoint_step >= s.step)
        });
        if statuses.len() == 2 && covered {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("checkpoints never caught up\n{}", processes.logs());
}

/// The generation slot `slot` is held under, once held by `addr`.
async fn held_by(group: &MasterGroup, slot: u32, addr: &str, processes: &PServerProcesses) -> u64 {
    for _ in 0..400 {
        let table = group.client().list_pservers().await.expect("list pservers");
        if let Some(entry) =
            table.pservers.iter().find(|entry| entry.slot == slot && entry.addr == addr)
        {
            return entry.generation;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("slot {slot} never went to {addr}\n{}", processes.logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pservers_are_fenced_replaced_and_restored_bit_for_bit() {
    let group = MasterGroup::start(1, &["--pserver-lease-ms", LEASE_MS]);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut processes = PServerProcesses::new(&group.addrs, dir.path(), 2);
    let (first, second) = (processes.spawn(), processes.spawn());
    let client = PServerClient::new(
        Arc::new(group.client()),
        1,
        crate::pserver_processes::test_client_options(),
    );
    client.wait_for_slots(Some(Duration::from_secs(30))).await.expect("both slots held");

    tracing::info!("--- the first trainer initializes; pushes apply; checkpoints cover them");
    client.init_or_wait(&layout(), &tensors(&initial())).await.expect("init");
    push_some(&client, 5).await;
    checkpointed(&client, &processes).await;
    let trained = client.pull(&layout()).await.expect("pull");
    assert_ne!(trained, initial(), "the pushes changed the model");

    tracing::info!("--- a standby does not take a held slot");
    let standby = processes.spawn();
    tokio::time::sleep(Duration::from_millis(3 * 1500)).await;
    assert!(
        processes.log(standby).contains("all 2 pserver slots are held"),
        "{}",
        processes.logs()
    );
    let (slot_of_first, first_generation) = slot_held_by(&group, &processes.addrs[first]).await;

    tracing::info!("--- pause one: its slot goes to the standby, restored from the checkpoint");
    processes.signal(first, Signal::SIGSTOP);
    let generation =
        held_by(&group, slot_of_first, &processes.addrs[standby].clone(), &processes).await;
    assert!(generation > first_generation, "a new holder, a new generation");
    assert_eq!(
        client.pull(&layout()).await.expect("pull after the takeover"),
        trained,
        "restored bit for bit"
    );

    tracing::info!("--- resumed, the paused one serves nothing and exits");
    let stale_fence =
        pb::Fence { slot: slot_of_first, generation: first_generation, model_restore: None };
    processes.signal(first, Signal::SIGCONT);
    refused_or_gone(&processes.addrs[first], stale_fence).await;
    let code = processes.wait_exit(first, Duration::from_secs(10));
    // 3: lost slot (`cli/src/exit_code.rs`), what a supervisor replaces without alarm.
    assert_eq!(code, Some(3), "{}", processes.log(first));
    assert!(processes.log(first).contains("no longer holds slot"), "{}", processes.log(first));

    tracing::info!("--- kill -9 the other: a replacement restores it and the client carries on");
    push_some(&client, 3).await;
    checkpointed(&client, &processes).await;
    let trained = client.pull(&layout()).await.expect("pull");
    let (slot_of_second, _) = slot_held_by(&group, &processes.addrs[second]).await;
    processes.kill(second);
    let replacement = processes.spawn();
    held_by(&group, slot_of_second, &processes.addrs[replacement].clone(), &processes).await;
    assert_eq!(
        client.pull(&layout()).await.expect("pull after kill -9"),
        trained,
        "restored bit for bit"
    );
    push_some(&client, 2).await;
    assert_ne!(client.pull(&layout()).await.expect("pull"), trained, "training goes on");
}

/// SIGTERM to a pserver while a trainer pushes without pause, under a 60 s lease: the pserver
/// refuses new pushes, waits for those in flight, checkpoints and gives its slot back; the
/// standby holds it long before the lease could have run out, and no acknowledged push is
/// lost (each push adds one to each slot's step, so both slots' steps equal the pushes the
/// client saw acknowledged, the refused ones retried on the standby).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigtermed_pserver_hands_its_slot_over_with_every_acknowledged_push() {
    let group = MasterGroup::start(1, &["--pserver-lease-ms", "60000"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut processes = PServerProcesses::new(&group.addrs, dir.path(), 2);
    let leaving = processes.spawn();
    processes.spawn();
    let client = PServerClient::new(
        Arc::new(group.client()),
        1,
        crate::pserver_processes::test_client_options(),
    );
    client.wait_for_slots(Some(Duration::from_secs(30))).await.expect("both slots held");
    client.init_or_wait(&layout(), &tensors(&initial())).await.expect("init");
    let standby = processes.spawn();
    wait_for_log(&processes, standby, "all 2 pserver slots are held").await;
    let (slot, generation) = slot_held_by(&group, &processes.addrs[leaving]).await;

    tracing::info!("--- a trainer pushes without pause; SIGTERM reaches one pserver");
    let acknowledged = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let pusher = tokio::spawn(push_until(client.clone(), acknowledged.clone(), stopped));
    wait_for_pushes(&acknowledged, 5, &pusher, &processes).await;
    processes.signal(leaving, Signal::SIGTERM);
    let exited =
        tokio::task::block_in_place(|| processes.wait_exit(leaving, Duration::from_secs(15)));
    assert_eq!(exited, Some(0), "{}", processes.log(leaving));
    assert!(processes.log(leaving).contains("slot released"), "{}", processes.log(leaving));
    let taken = held_by(&group, slot, &processes.addrs[standby].clone(), &processes).await;
    assert!(taken > generation, "the standby holds the slot under a new generation");

    tracing::info!("--- the trainer goes on with the standby; every acknowledged push is there");
    let before = acknowledged.load(std::sync::atomic::Ordering::SeqCst);
    wait_for_pushes(&acknowledged, before + 3, &pusher, &processes).await;
    let _ = stop.send(true);
    pusher.await.expect("the pusher");
    let pushes = acknowledged.load(std::sync::atomic::Ordering::SeqCst);
    for (index, status) in client.statuses().await {
        let status = status.expect("status");
        assert_eq!(
            status.step,
            pushes,
            "slot {index}: every acknowledged push applied once\n{}",
            processes.logs()
        );
    }
}

/// Waits until `count` pushes were acknowledged; fails (rather than hangs) when the pusher
/// ended or 60 s pass.
async fn wait_for_pushes(
    acknowledged: &std::sync::atomic::AtomicU64,
    count: u64,
    pusher: &tokio::task::JoinHandle<()>,
    processes: &PServerProcesses,
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while acknowledged.load(std::sync::atomic::Ordering::SeqCst) < count {
        assert!(!pusher.is_finished(), "the pusher failed\n{}", processes.logs());
        assert!(std::time::Instant::now() < deadline, "no push within 60 s\n{}", processes.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Pushes `gradient()` until `stopped`, counting the pushes acknowledged.
async fn push_until(
    client: PServerClient,
    acknowledged: Arc<std::sync::atomic::AtomicU64>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let gradient = gradient();
    while !*stopped.borrow_and_update() {
        client.push(&layout(), &tensors(&gradient)).await.expect("push");
        acknowledged.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Waits until pserver `index`'s log contains `text`.
async fn wait_for_log(processes: &PServerProcesses, index: usize, text: &str) {
    for _ in 0..400 {
        if processes.log(index).contains(text) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("pserver {index} never logged {text:?}\n{}", processes.logs());
}

/// The slot and generation `addr` holds.
async fn slot_held_by(group: &MasterGroup, addr: &str) -> (u32, u64) {
    let table = group.client().list_pservers().await.expect("list pservers");
    let entry =
        table.pservers.iter().find(|entry| entry.addr == addr).expect("the pserver holds a slot");
    (entry.slot, entry.generation)
}

/// A request with the resumed pserver's own (old) fence is refused as lease-lost, or finds it
/// gone; never served.
async fn refused_or_gone(addr: &str, fence: pb::Fence) {
    let Ok(channel) = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect()
        .await
    else {
        return;
    };
    let mut client = PServerServiceClient::new(channel);
    let answer =
        client.pull_params(pb::PullParamsRequest { fence: Some(fence), blocks: Vec::new() }).await;
    let status = answer.expect_err("a pserver that lost its slot serves nothing");
    let lease_lost =
        status.metadata().get("x-raftrain-refusal").is_some_and(|kind| kind == "lease-lost");
    assert!(lease_lost || status.code() == tonic::Code::Unavailable, "{status:?}");
}

/// One pserver of a one-slot job, serving after a client initialized it.
async fn one_serving_pserver(
    group: &MasterGroup,
    dir: &std::path::Path,
) -> (PServerProcesses, PServerClient, JobLayout) {
    let mut processes = PServerProcesses::new(&group.addrs, dir, 1);
    processes.spawn();
    let client = PServerClient::new(
        Arc::new(group.client()),
        1,
        crate::pserver_processes::test_client_options(),
    );
    client.wait_for_slots(Some(Duration::from_secs(30))).await.expect("the slot held");
    let layout = JobLayout { slot_count: 1, ..layout() };
    client.init_or_wait(&layout, &tensors(&initial())).await.expect("init");
    (processes, client, layout)
}

/// A gradient for every parameter of `layout()`.
fn gradient() -> BTreeMap<String, Vec<f32>> {
    BTreeMap::from([("w".to_string(), vec![0.25; 300_000]), ("b".to_string(), vec![-1.0; 10])])
}

/// A master failover longer than the pserver lease (500 ms here; an election takes over a
/// second with these timeouts) suspends the pserver, never kills it: the new leader confirms its
/// generation and it serves again, still holding its slot. (It exited before.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pserver_rides_out_a_master_failover_longer_than_its_lease() {
    let mut group = MasterGroup::start(3, &["--pserver-lease-ms", "500"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut processes, client, layout) = one_serving_pserver(&group, dir.path()).await;
    let only = 0;
    let (_, generation) = slot_held_by(&group, &processes.addrs[only]).await;

    tracing::info!("--- kill the master leader; the election outlasts the pserver's lease");
    let leader = group.leader_index().await;
    group.kill(leader);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        processes.wait_exit(only, Duration::from_millis(10)),
        None,
        "{}",
        processes.log(only)
    );
    let log = processes.log(only);
    assert!(
        log.contains("is not confirmed") || log.contains("no answer in time"),
        "the lease did run out: {log}"
    );
    let gradient = gradient();
    if let Err(error) = client.push(&layout, &tensors(&gradient)).await {
        // Both sides' logs: whether the heartbeats went unanswered or were refused.
        panic!("push after the failover: {error}\n{}\n{}", processes.log(only), group.logs());
    }
    client.pull(&layout).await.expect("pull after the failover");
    assert_eq!(
        slot_held_by(&group, &processes.addrs[only]).await,
        (0, generation),
        "the same holder"
    );
}

/// SIGTERM reaches a pserver right after every master hung (SIGSTOP: connections stay open,
/// nothing answers), while it still trusts its lease: its last checkpoint cannot be recorded,
/// and it exits 0 within the shutdown bounds (5 s for the last checkpoint, 3 s for open calls)
/// instead of waiting on the masters for its calls' whole deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pserver_stops_in_bounded_time_when_the_masters_are_gone() {
    let group = MasterGroup::start(3, &["--pserver-lease-ms", "20000"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut processes, client, layout) = one_serving_pserver(&group, dir.path()).await;
    let only = 0;
    let gradient = gradient();
    client.push(&layout, &tensors(&gradient)).await.expect("push before the stop");

    tracing::info!("--- every master hangs; the pserver still trusts its 20 s lease");
    for index in 0..3 {
        group.signal(index, nix::sys::signal::Signal::SIGSTOP);
    }
    processes.signal(only, nix::sys::signal::Signal::SIGTERM);
    let exited = tokio::task::block_in_place(|| processes.wait_exit(only, Duration::from_secs(15)));
    assert_eq!(exited, Some(0), "{}", processes.log(only));
}

/// Both followers are down for five pserver leases while the leader lives on alone (it keeps
/// believing it leads, but no renewal can be confirmed): when they return, the leader holds the
/// pserver's lease for the time nobody could renew instead of freeing the slot of a pserver
/// that was alive all along, and the pserver serves again under the same generation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_pserver_keeps_its_slot_through_a_majority_outage() {
    keeps_its_slot_through(Outage::Killed).await;
}

/// The same with both followers paused (SIGSTOP) for five leases, then resumed: their
/// connections stay open and nothing answers, as on a hung host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_pserver_keeps_its_slot_while_the_followers_hang() {
    keeps_its_slot_through(Outage::Paused).await;
}

/// How the followers are taken away for the outage.
#[derive(Clone, Copy, Debug)]
enum Outage {
    Killed,
    Paused,
}

async fn keeps_its_slot_through(outage: Outage) {
    let mut group = MasterGroup::start(3, &["--pserver-lease-ms", "1000"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut processes, client, layout) = one_serving_pserver(&group, dir.path()).await;
    let only = 0;
    let held = slot_held_by(&group, &processes.addrs[only]).await;

    tracing::info!(?outage, "--- both followers gone for 5 s; the leader stays up alone");
    let leader = group.leader_index().await;
    let followers: Vec<usize> = (0..3).filter(|index| *index != leader).collect();
    for index in &followers {
        match outage {
            Outage::Killed => group.kill(*index),
            Outage::Paused => group.signal(*index, nix::sys::signal::Signal::SIGSTOP),
        }
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    for index in &followers {
        match outage {
            Outage::Killed => group.spawn(*index),
            Outage::Paused => group.signal(*index, nix::sys::signal::Signal::SIGCONT),
        }
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        processes.wait_exit(only, Duration::from_millis(10)),
        None,
        "the pserver was told it lost its slot\n{}",
        processes.log(only)
    );
    assert_eq!(slot_held_by(&group, &processes.addrs[only]).await, held, "the same holder");
    let gradient = gradient();
    let gradient = tensors(&gradient);
    let push = client.push(&layout, &gradient);
    let pushed = tokio::time::timeout(Duration::from_secs(60), push).await;
    assert!(matches!(pushed, Ok(Ok(_))), "push after the outage: {pushed:?}");
}
