//! Forged pserver claims against real processes: heartbeats, releases and checkpoint records built from
//! the public fields of `ListPServers` (slot, address, generation) confirm nothing and record
//! nothing, and a slot whose pserver dies after such a forgery is still served by its
//! replacement from the genuine checkpoint.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use client::pserver::layout::{JobLayout, ParamSpec};
use client::pserver::PServerClient;
use optimizer::{OptimizerConfig, OptimizerKind};
use proto::master as pb;

use crate::master_group::MasterGroup;
use crate::pserver_processes::PServerProcesses;

/// A client id no real client draws (they draw random 64-bit ids).
const FORGER_CLIENT_ID: u64 = 0x00f0_5ed0;
/// A forger's guess at a claim's 16-byte secret.
const GUESSED_SECRET: [u8; 16] = [7; 16];

fn layout() -> JobLayout {
    let params = vec![ParamSpec { name: "w".into(), shape: vec![1000] }];
    let optimizer = OptimizerConfig { learning_rate: 0.5, kind: OptimizerKind::Sgd };
    JobLayout { params, block_elements: 256, slot_count: 1, optimizer }
}

fn values(value: f32) -> BTreeMap<String, Vec<f32>> {
    BTreeMap::from([("w".to_string(), vec![value; 1000])])
}

fn tensors(values: &BTreeMap<String, Vec<f32>>) -> Vec<(&str, &[f32])> {
    values.iter().map(|(name, values)| (name.as_str(), values.as_slice())).collect()
}

/// The only slot's public entry once `addr` holds it.
async fn entry_of(group: &MasterGroup, addr: &str, processes: &PServerProcesses) -> pb::PServer {
    for _ in 0..400 {
        let table = group.client().list_pservers().await.expect("list pservers");
        if let Some(entry) = table.pservers.into_iter().find(|entry| entry.addr == addr) {
            return pb::PServer {
                index: entry.slot,
                addr: entry.addr,
                generation: entry.generation,
                checkpoint_step: None,
                checkpoint_created_ms: 0,
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{addr} never held a slot\n{}", processes.logs());
}

/// Waits until the slot's recorded checkpoint covers every push.
async fn checkpointed(client: &PServerClient, processes: &PServerProcesses) {
    for _ in 0..300 {
        let statuses = client.statuses().await;
        let covered = statuses.iter().all(|(_, status)| {
            status.as_ref().is_ok_and(|s| s.step > 0 && s.checkpoint_step >= s.step)
        });
        if covered && !statuses.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("checkpoints never caught up\n{}", processes.logs());
}

/// A heartbeat with a serving pserver's public slot, address and generation is answered
/// not-holding, and a release with them is refused: only the claimer knows the claim's secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_heartbeat_or_release_with_public_fields_holds_and_frees_nothing() {
    let group = MasterGroup::start(1, &[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut processes = PServerProcesses::new(&group.addrs, dir.path(), 1);
    let only = processes.spawn();
    let entry = entry_of(&group, &processes.addrs[only].clone(), &processes).await;

    tracing::info!(
        "--- heartbeats built from ListPServers alone, without and with a guessed secret"
    );
    let mut service = group.leader_service().await;
    for secret in [Vec::new(), GUESSED_SECRET.to_vec()] {
        let forged = pb::PServerHeartbeatRequest {
            index: entry.index,
            addr: entry.addr.clone(),
            generation: entry.generation,
            secret: secret.clone().into(),
            step: 0,
            job: String::new(),
        };
        let answer = service.p_server_heartbeat(forged).await.map(|reply| reply.into_inner());
        assert!(
            !answer.as_ref().is_ok_and(|reply| reply.holds_slot),
            "a forged heartbeat was told it holds the slot: {answer:?}"
        );
        let stamp = pb::ClientStamp { client_id: FORGER_CLIENT_ID, seq: 1 };
        let release = pb::ReleasePServerSlotRequest {
            stamp: Some(stamp),
            job: String::new(),
            index: entry.index,
            generation: entry.generation,
            secret: secret.into(),
        };
        let released = service.release_p_server_slot(release).await;
        let refusal = released.expect_err("a forged release is refused");
        // No secret is malformed (INVALID_ARGUMENT); a guessed one is not the holder's.
        let refused = [tonic::Code::InvalidArgument, tonic::Code::FailedPrecondition];
        assert!(refused.contains(&refusal.code()), "{refusal:?}");
    }
    let table = group.client().list_pservers().await.expect("list pservers");
    assert!(table.pservers.iter().any(|held| held.addr == entry.addr), "still held: {table:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(processes.wait_exit(only, Duration::from_millis(10)), None, "the real one serves");
}

/// A forged `RecordCheckpoint` (a path outside the slot's naming, step 2^62, the public
/// generation) is refused; after the pserver is killed, its replacement restores the genuine
/// checkpoint and serves the slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_checkpoint_record_does_not_make_a_slot_unrecoverable() {
    let group = MasterGroup::start(1, &["--pserver-lease-ms", "1500"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut processes = PServerProcesses::new(&group.addrs, dir.path(), 1);
    let first = processes.spawn();
    let client = PServerClient::new(
        Arc::new(group.client()),
        1,
        crate::pserver_processes::test_client_options(),
    );
    client.wait_for_slots(Some(Duration::from_secs(30))).await.expect("the slot held");
    client.init_or_wait(&layout(), &tensors(&values(1.0))).await.expect("init");
    client.push(&layout(), &tensors(&values(0.5))).await.expect("push");
    checkpointed(&client, &processes).await;
    let trained = client.pull(&layout()).await.expect("pull");
    let entry = entry_of(&group, &processes.addrs[first].clone(), &processes).await;

    tracing::info!("--- checkpoint records built from ListPServers alone");
    let mut service = group.leader_service().await;
    for (seq, secret) in [(1, Vec::new()), (2, GUESSED_SECRET.to_vec())] {
        let meta = pb::CheckpointMeta {
            path: "/nonexistent".into(),
            step: 1 << 62,
            crc32: 0,
            created_ms: 0,
        };
        let forged = pb::RecordCheckpointRequest {
            stamp: Some(pb::ClientStamp { client_id: FORGER_CLIENT_ID, seq }),
            index: entry.index,
            meta: Some(meta),
            generation: entry.generation,
            secret: secret.into(),
            job: String::new(),
            for_progress: 0,
        };
        let answer = service.record_checkpoint(forged).await.map(|reply| reply.into_inner());
        assert!(
            !answer.as_ref().is_ok_and(|reply| reply.recorded),
            "a forged checkpoint record was recorded: {answer:?}"
        );
    }

    tracing::info!("--- kill -9 the pserver: a replacement serves the slot from the genuine file");
    processes.kill(first);
    let replacement = processes.spawn();
    entry_of(&group, &processes.addrs[replacement].clone(), &processes).await;
    let restored = tokio::time::timeout(Duration::from_secs(60), client.pull(&layout()))
        .await
        .map_err(|_| processes.logs())
        .expect("the replacement serves in time")
        .expect("pull from the replacement");
    assert_eq!(restored, trained, "restored from the genuine checkpoint");
}
