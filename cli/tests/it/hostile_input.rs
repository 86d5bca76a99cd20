//! Hostile input to a real master with TLS and the token, from a caller that has both: an
//! unknown method, a malformed message, an oversized one and an absurd field are each refused
//! with a clear status, and the master's state (term, trainers) is unchanged; a stamp reused
//! with another body is refused as `stamp-reused`.

use std::time::Duration;

use http::uri::PathAndQuery;
use platform::security::Security;
use proto::master::{ClientStamp, RegisterTrainerReply, RegisterTrainerRequest};
use proto::raft::RaftRequest;
use tonic::client::Grpc;
use tonic_prost::ProstCodec;

use crate::security::{client, leader_and_term, secure_group, Pki};

/// Sends `message` to `path` on `addr`; the reply is decoded as `Reply`.
async fn call<Message, Reply>(
    security: &Security,
    addr: &str,
    path: &'static str,
    message: Message,
) -> Result<Reply, tonic::Status>
where
    Message: prost::Message + Send + Sync + 'static,
    Reply: prost::Message + Default + Send + Sync + 'static,
{
    let endpoint =
        platform::endpoint(security, addr, std::time::Duration::from_secs(1)).expect("an endpoint");
    let mut grpc = Grpc::new(security.channel(&endpoint));
    grpc.ready().await.map_err(|error| tonic::Status::unavailable(error.to_string()))?;
    let mut request = tonic::Request::new(message);
    request.set_timeout(Duration::from_secs(20));
    let codec = ProstCodec::<Message, Reply>::default();
    grpc.unary(request, PathAndQuery::from_static(path), codec)
        .await
        .map(tonic::Response::into_inner)
}

const REGISTER: &str = "/raftrain.master.v1.MasterService/RegisterTrainer";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_is_refused_and_changes_nothing() {
    let pki = Pki::new();
    let (group, _) = secure_group([&pki.cluster, &pki.cluster, &pki.cluster]);
    let (leader, term) = leader_and_term(&group, &pki).await;
    let addr = group.addrs[leader as usize - 1].clone();
    let security = Security::load(&pki.cluster).expect("the test's files load");
    let trainers = || async {
        let status = client(&group.addrs, &pki.cluster, Duration::from_secs(30)).status().await;
        status.expect("status").trainers.len()
    };
    let before = trainers().await;

    tracing::info!("--- an unknown method: UNIMPLEMENTED");
    let unknown: Result<RaftRequest, _> = call(
        &security,
        &addr,
        "/raftrain.master.v1.MasterService/DropAllTasks",
        RaftRequest { payload: Vec::new().into() },
    )
    .await;
    assert_eq!(unknown.expect_err("unknown").code(), tonic::Code::Unimplemented);

    tracing::info!(
        "--- a malformed message (another message's bytes): refused with the decode error"
    );
    let garbage = RaftRequest { payload: vec![0xff; 64].into() };
    let malformed: Result<proto::master::RegisterTrainerReply, _> =
        call(&security, &addr, REGISTER, garbage).await;
    let malformed = malformed.expect_err("malformed");
    assert!(malformed.message().contains("decode"), "{malformed:?}");

    tracing::info!("--- a message over the 64 MiB limit: refused before it is decoded");
    let huge =
        RegisterTrainerRequest { stamp: None, name: "x".repeat(65 << 20), job: String::new() };
    let oversized: Result<proto::master::RegisterTrainerReply, _> =
        call(&security, &addr, REGISTER, huge).await;
    let oversized = oversized.expect_err("oversized");
    assert_eq!(oversized.code(), tonic::Code::OutOfRange, "{oversized:?}");
    assert!(oversized.message().contains("decoded message length too large"), "{oversized:?}");

    tracing::info!("--- an absurd field (a 1 MiB trainer name): refused by the master's limits");
    let absurd =
        RegisterTrainerRequest { stamp: None, name: "x".repeat(1 << 20), job: String::new() };
    let absurd: Result<proto::master::RegisterTrainerReply, _> =
        call(&security, &addr, REGISTER, absurd).await;
    let absurd = absurd.expect_err("absurd");
    assert_eq!(absurd.code(), tonic::Code::InvalidArgument, "{absurd:?}");

    tracing::info!("--- nothing changed");
    assert_eq!(leader_and_term(&group, &pki).await, (leader, term));
    assert_eq!(trainers().await, before);
}

/// Registers `name` on `addr` under the stamp (`client_id`, 1).
async fn register_stamped(
    security: &Security,
    addr: &str,
    client_id: u64,
    name: &str,
) -> Result<RegisterTrainerReply, tonic::Status> {
    let stamp = Some(ClientStamp { client_id, seq: 1 });
    call(
        security,
        addr,
        REGISTER,
        RegisterTrainerRequest { stamp, name: name.to_string(), job: String::new() },
    )
    .await
}

/// A stamp reused with another request body is refused (FAILED_PRECONDITION, refusal
/// `stamp-reused`) instead of being answered with the first request's reply, and the genuine
/// retry still gets its answer: "mallory" with alice's stamp neither gets alice's id nor
/// registers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stamp_reused_with_another_body_is_refused() {
    let pki = Pki::new();
    let (group, _) = secure_group([&pki.cluster, &pki.cluster, &pki.cluster]);
    let (leader, _) = leader_and_term(&group, &pki).await;
    let addr = group.addrs[leader as usize - 1].clone();
    let security = Security::load(&pki.cluster).expect("the test's files load");
    let client_id = 0x5eed_a11c_e000_0001;

    tracing::info!("--- alice registers under her stamp");
    let alice = register_stamped(&security, &addr, client_id, "alice").await.expect("alice");

    tracing::info!("--- mallory replays alice's stamp with her own name: refused");
    let mallory = register_stamped(&security, &addr, client_id, "mallory").await;
    let mallory = mallory.expect_err("a reused stamp with another body must be refused");
    assert_eq!(mallory.code(), tonic::Code::FailedPrecondition, "{mallory:?}");
    let refusal = mallory.metadata().get("x-raftrain-refusal").and_then(|v| v.to_str().ok());
    assert_eq!(refusal, Some("stamp-reused"), "{mallory:?}");

    tracing::info!("--- alice's genuine retry still gets her id; mallory is not registered");
    let retry = register_stamped(&security, &addr, client_id, "alice").await.expect("retry");
    assert_eq!(retry.trainer_id, alice.trainer_id);
    let status = client(&group.addrs, &pki.cluster, Duration::from_secs(30)).status().await;
    let names: Vec<String> = status.expect("status").trainers.into_iter().map(|t| t.name).collect();
    assert_eq!(names, vec!["alice".to_string()]);
}
