//! The gRPC service over a real socket, as a pserver serves it (the data plane's calls
//! included) and as a generated client calls it: every bad request gets a clear status naming
//! what is wrong (and the refusal kind clients act on), and a refused request changes nothing.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use client::pserver::conversions::layout_to_proto;
use client::pserver::f32_bytes;
use client::pserver::refusal::refusal_of;
use proto::pserver as pb;
use proto::pserver::p_server_service_client::PServerServiceClient;
use pserver::clock::{Clock as _, SystemClock};
use pserver::data_plane::server::DataPlaneServer;
use pserver::held_slot::HeldSlot;
use pserver::service::PServerRpc;
use pserver::shard_cell::ShardCell;
use tonic::transport::Channel;
use tonic::Code;

use crate::support::{layout, payloads};

const SLOT: u32 = 0;
const GENERATION: u64 = 5;

/// Serves an empty slot-0 shard under a lease of `lease`; a client to it.
async fn serve(lease: Duration) -> PServerServiceClient<Channel> {
    serve_held(Arc::new(granted(lease))).await
}

/// Slot 0 generation 5, granted now on the system clock for `lease`.
fn granted(lease: Duration) -> HeldSlot {
    HeldSlot::granted(SLOT, GENERATION, lease, Arc::new(SystemClock), SystemClock.now())
}

async fn serve_held(held: Arc<HeldSlot>) -> PServerServiceClient<Channel> {
    serve_cell(Arc::new(ShardCell::empty(SLOT, 2)), held).await
}

async fn serve_cell(cell: Arc<ShardCell>, held: Arc<HeldSlot>) -> PServerServiceClient<Channel> {
    let rpc = PServerRpc::new(cell, held, Arc::new(AtomicU64::new(0)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let limits = platform::PortLimits::default();
    let router = platform::server_builder(&Default::default(), &limits)
        .expect("an open server needs no files")
        .add_service(DataPlaneServer::new(rpc));
    tokio::spawn(router.serve_with_incoming(platform::incoming(listener, &limits)));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect_lazy();
    PServerServiceClient::new(channel)
}

fn fence(generation: u64) -> Option<pb::Fence> {
    Some(pb::Fence { slot: SLOT, generation, model_restore: None })
}

fn blocks(value: f32) -> Vec<pb::Block> {
    payloads(SLOT, value)
        .into_iter()
        .map(|(id, bytes)| pb::Block { name: id.name, index: id.index, values: bytes.into() })
        .collect()
}

fn push(generation: u64, blocks: Vec<pb::Block>) -> pb::PushGradsRequest {
    pb::PushGradsRequest { fence: fence(generation), blocks }
}

/// Initializes the served shard with every block at 1.0, as initializer 1.
async fn initialize(client: &mut PServerServiceClient<Channel>) {
    let init = pb::InitParamsRequest {
        fence: fence(GENERATION),
        initializer: 1,
        layout: Some(layout_to_proto(&layout())),
        blocks: blocks(1.0),
    };
    client.init_params(init).await.expect("init");
    let finish = pb::FinishInitRequest { fence: fence(GENERATION), initializer: 1 };
    client.finish_init(finish).await.expect("finish");
}

/// Expects `code`, the refusal kind (if any) and `text` in the message.
fn check(
    answer: Result<tonic::Response<impl std::fmt::Debug>, tonic::Status>,
    code: Code,
    refusal: Option<&str>,
    text: &str,
) {
    let status = answer.expect_err("refused");
    assert_eq!((status.code(), refusal_of(&status)), (code, refusal), "{status:?}");
    assert!(status.message().contains(text), "{} lacks {text}", status.message());
}

#[tokio::test]
async fn bad_requests_are_refused_clearly_and_change_nothing() {
    let mut client = serve(Duration::from_secs(600)).await;
    check(
        client.push_grads(push(GENERATION, blocks(1.0))).await,
        Code::FailedPrecondition,
        Some("not-initialized"),
        "not initialized",
    );
    check(
        client.push_grads(pb::PushGradsRequest { fence: None, blocks: Vec::new() }).await,
        Code::InvalidArgument,
        None,
        "fence",
    );
    check(
        client.push_grads(push(GENERATION - 1, blocks(1.0))).await,
        Code::FailedPrecondition,
        Some("wrong-generation"),
        "generation 5",
    );

    let init = |blocks| pb::InitParamsRequest {
        fence: fence(GENERATION),
        initializer: 1,
        layout: Some(layout_to_proto(&layout())),
        blocks,
    };
    let reply = client.init_params(init(blocks(1.0))).await.expect("init").into_inner();
    assert_eq!(reply.outcome, i32::from(pb::InitOutcome::Accepted));
    client
        .finish_init(pb::FinishInitRequest { fence: fence(GENERATION), initializer: 1 })
        .await
        .expect("finish");
    let before = client
        .pull_params(pb::PullParamsRequest { fence: fence(GENERATION), blocks: Vec::new() })
        .await
        .expect("pull")
        .into_inner();

    let mut nan = blocks(0.5);
    let length = nan[0].values.len() / 4;
    let mut values = vec![0.0; length];
    values[1] = f32::NAN;
    nan[0].values = f32_bytes::encode(&values).into();
    check(
        client.push_grads(push(GENERATION, nan)).await,
        Code::InvalidArgument,
        None,
        "element 1 is NaN",
    );
    let mut unknown = blocks(0.5);
    unknown[0].name = "missing".into();
    check(
        client.push_grads(push(GENERATION, unknown)).await,
        Code::InvalidArgument,
        None,
        "block missing#",
    );
    let mut short = blocks(0.5);
    short[0].values = f32_bytes::encode(&[1.0]).into();
    check(
        client.push_grads(push(GENERATION, short)).await,
        Code::InvalidArgument,
        None,
        "1 values, the block has",
    );
    let after = client
        .pull_params(pb::PullParamsRequest { fence: fence(GENERATION), blocks: Vec::new() })
        .await
        .expect("pull")
        .into_inner();
    assert_eq!(after, before, "refused pushes changed nothing");
    let status = client.status(pb::StatusRequest {}).await.expect("status").into_inner();
    assert_eq!(
        (status.nonfinite_pushes_refused, status.step, status.state),
        (1, 0, i32::from(pb::ShardState::Ready))
    );
}

/// A lease past its end serves nothing (unconfirmed: it may come back after a failover); a
/// slot the master gave away serves nothing for good.
#[tokio::test]
async fn a_pserver_whose_lease_ran_out_serves_nothing() {
    let held = Arc::new(granted(Duration::from_millis(50)));
    let mut client = serve_held(held.clone()).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let pull = || pb::PullParamsRequest { fence: fence(GENERATION), blocks: Vec::new() };
    let unconfirmed = Some("lease-unconfirmed");
    check(
        client.pull_params(pull()).await,
        Code::Unavailable,
        unconfirmed,
        "slot 0 (generation 5) is not confirmed",
    );
    check(
        client.status(pb::StatusRequest {}).await,
        Code::Unavailable,
        unconfirmed,
        "past the lease",
    );
    held.lose("the master says slot 0 is held by generation 6".into());
    check(
        client.pull_params(pull()).await,
        Code::Unavailable,
        Some("lease-lost"),
        "no longer holds slot 0",
    );
}

/// `PushPull` answers with the pushed values applied (one round trip, the pull sees the push),
/// and one whose pull cannot be answered is refused before the push is applied.
#[tokio::test]
async fn push_pull_sees_its_push_and_a_refused_one_changes_nothing() {
    let mut client = serve(Duration::from_secs(600)).await;
    initialize(&mut client).await;
    let ids: Vec<pb::BlockId> = blocks(0.0)
        .into_iter()
        .map(|block| pb::BlockId { name: block.name, index: block.index })
        .collect();
    let push_pull = |pull: Vec<pb::BlockId>| pb::PushPullRequest {
        fence: fence(GENERATION),
        blocks: blocks(0.5),
        pull,
    };
    let reply = client.push_pull(push_pull(ids.clone())).await.expect("push and pull");
    let reply = reply.into_inner();
    assert_eq!(reply.step, 1);
    assert_eq!(reply.blocks.len(), ids.len());
    for block in &reply.blocks {
        let values = f32_bytes::decode(&block.values, block.values.len() / 4).expect("values");
        // Adam's first step moves every value by the learning rate against the gradient.
        assert!(values.iter().all(|value| (value - 0.9).abs() < 1e-4), "{values:?}");
    }

    let before = client
        .pull_params(pb::PullParamsRequest { fence: fence(GENERATION), blocks: Vec::new() })
        .await
        .expect("pull")
        .into_inner();
    let unknown = vec![pb::BlockId { name: "missing".into(), index: 0 }];
    check(
        client.push_pull(push_pull(unknown)).await,
        Code::InvalidArgument,
        None,
        "block missing#0",
    );
    let after = client
        .pull_params(pb::PullParamsRequest { fence: fence(GENERATION), blocks: Vec::new() })
        .await
        .expect("pull")
        .into_inner();
    assert_eq!(after, before, "the refused push was not applied");
}

/// A shard of model restore 3 (an empty cell claimed then, initialized by a trainer) says so
/// in every pull, and refuses a push or push-pull computed on another restore's model,
/// applying nothing; a push naming restore 3, or none, is applied.
#[tokio::test]
async fn a_push_computed_on_a_replaced_model_is_refused_and_changes_nothing() {
    let cell = Arc::new(ShardCell::empty(SLOT, 2).of_model_restore(3));
    let held = Arc::new(granted(Duration::from_secs(600)));
    let mut client = serve_cell(cell, held).await;
    initialize(&mut client).await;
    let pull = || pb::PullParamsRequest { fence: fence(GENERATION), blocks: Vec::new() };
    let before = client.pull_params(pull()).await.expect("pull").into_inner();
    assert_eq!(before.model_restore, 3, "the pull names the shard's restore");

    let based =
        |model_restore| Some(pb::Fence { slot: SLOT, generation: GENERATION, model_restore });
    for stale in [2, 4] {
        let push = pb::PushGradsRequest { fence: based(Some(stale)), blocks: blocks(0.5) };
        check(
            client.push_grads(push).await,
            Code::FailedPrecondition,
            Some("model-restored"),
            &format!("model of restore {stale}"),
        );
        let push_pull =
            pb::PushPullRequest { fence: based(Some(stale)), blocks: blocks(0.5), pull: vec![] };
        check(
            client.push_pull(push_pull).await,
            Code::FailedPrecondition,
            Some("model-restored"),
            "restore 3",
        );
    }
    let after = client.pull_params(pull()).await.expect("pull").into_inner();
    assert_eq!(after, before, "no refused push was applied");

    for basis in [Some(3), None] {
        let push = pb::PushGradsRequest { fence: based(basis), blocks: blocks(0.5) };
        client.push_grads(push).await.expect("a push on the shard's own model");
    }
    let reply = client.pull_params(pull()).await.expect("pull").into_inner();
    assert_eq!(reply.step, 2, "both applied");
}
