//! Hostile `InitParams` against a real pserver process: a refused request leaves the shard as
//! it was (the real initializer is not kept waiting), and a tiny request whose layout would
//! need a table entry per element is refused before anything is allocated, with the pserver
//! still serving.

use std::time::Duration;

use proto::pserver as pb;
use proto::pserver::p_server_service_client::PServerServiceClient;
use tonic::transport::Channel;

use crate::master_group::MasterGroup;
use crate::pserver_processes::PServerProcesses;

/// A one-slot layout of one parameter with `elements` elements cut into `block_elements`.
fn layout(elements: u64, block_elements: u32) -> pb::JobLayout {
    let sgd = pb::optimizer::Kind::Sgd(pb::Sgd {});
    pb::JobLayout {
        params: vec![pb::ParamShape { name: "w".into(), shape: vec![elements] }],
        block_elements,
        slot_count: 1,
        optimizer: Some(pb::Optimizer { learning_rate: 0.1, kind: Some(sgd) }),
    }
}

fn init(
    fence: pb::Fence,
    initializer: u64,
    layout: pb::JobLayout,
    blocks: Vec<pb::Block>,
) -> pb::InitParamsRequest {
    pb::InitParamsRequest { fence: Some(fence), initializer, layout: Some(layout), blocks }
}

/// The fence of the only slot, once the pserver holds it.
async fn fence(group: &MasterGroup, processes: &PServerProcesses) -> pb::Fence {
    for _ in 0..400 {
        let table = group.client().list_pservers().await.expect("list pservers");
        if let Some(entry) = table.pservers.first() {
            return pb::Fence {
                slot: entry.slot,
                generation: entry.generation,
                model_restore: None,
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the slot was never held\n{}", processes.logs());
}

/// A client of the pserver at `addr`, once it serves its slot: until then its standby answers
/// every call `UNAVAILABLE` (the slot shows held in the table a moment before).
async fn connect(addr: &str) -> PServerServiceClient<Channel> {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("address")
        .timeout(Duration::from_secs(60));
    let mut client =
        PServerServiceClient::new(endpoint.connect().await.expect("connect to the pserver"));
    for _ in 0..400 {
        match shard_state(&mut client).await {
            Err(status) if status.code() == tonic::Code::Unavailable => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            _ => return client,
        }
    }
    panic!("the pserver at {addr} never served its slot")
}

async fn shard_state(
    client: &mut PServerServiceClient<Channel>,
) -> Result<pb::ShardState, tonic::Status> {
    let reply = client.status(pb::StatusRequest {}).await?.into_inner();
    Ok(reply.state())
}

/// A 30-byte layout of 2^30 one-element blocks is refused (INVALID_ARGUMENT, naming the block
/// limit) and the pserver keeps serving; a refused `InitParams` (a NaN initial value) leaves
/// the shard EMPTY and the next initializer is accepted at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_init_params_change_nothing_and_kill_nothing() {
    let group = MasterGroup::start(1, &[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut processes = PServerProcesses::new(&group.addrs, dir.path(), 1);
    processes.spawn();
    let fence = fence(&group, &processes).await;
    let mut client = connect(&processes.addrs[0]).await;

    tracing::info!("--- 2^30 one-element blocks in a 30-byte request: refused, the pserver lives");
    let absurd = init(fence, 8, layout(1 << 30, 1), Vec::new());
    let absurd = client.init_params(absurd).await.expect_err("the layout is refused");
    assert_eq!(absurd.code(), tonic::Code::InvalidArgument, "{absurd:?}\n{}", processes.logs());
    assert!(absurd.message().contains("blocks"), "{absurd:?}");
    assert!(
        shard_state(&mut client).await.is_ok(),
        "the pserver still answers\n{}",
        processes.logs()
    );

    tracing::info!("--- a refused InitParams (NaN initial value) leaves the shard EMPTY");
    let nan =
        pb::Block { name: "w".into(), index: 0, values: f32::NAN.to_le_bytes().to_vec().into() };
    let refused = client.init_params(init(fence, 666, layout(1, 1), vec![nan])).await;
    assert_eq!(refused.expect_err("a NaN is refused").code(), tonic::Code::InvalidArgument);
    assert_eq!(shard_state(&mut client).await.expect("status"), pb::ShardState::Empty);
    let genuine = client.init_params(init(fence, 7, layout(1, 1), Vec::new())).await;
    let outcome = genuine.expect("the real initializer is answered").into_inner().outcome();
    assert_eq!(outcome, pb::InitOutcome::Accepted, "the real initializer is not kept waiting");
}
