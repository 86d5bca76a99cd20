//! The gRPC conventions on real processes: `grpc.health.v1` answers per service (a master
//! without a known leader is NOT_SERVING, then SERVING once its group elects; a pserver is
//! SERVING once it serves its slot, on its gRPC port and on its plain metrics port, where
//! Kubernetes probes it), health works without the cluster token while reflection needs it,
//! and server reflection lists each port's services without any `.proto` file.

use std::time::Duration;

use platform::security::{Security, Token};
use tokio_stream::StreamExt as _;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::ServerReflectionRequest;

use crate::master_group::{free_loopback_addr, MasterGroup};
use crate::pserver_processes::PServerProcesses;

const MASTER_SERVICE: &str = "raftrain.master.v1.MasterService";
const RAFT_SERVICE: &str = "raftrain.raft.v1.RaftService";
const PSERVER_SERVICE: &str = "raftrain.pserver.v1.PServerService";
/// How long a process may take to start answering, or a group to elect: generous, a bound on
/// waiting, not a measurement.
const WAIT: Duration = Duration::from_secs(30);

fn channel(security: &Security, addr: &str) -> platform::security::RpcChannel {
    let endpoint = platform::endpoint(security, addr, Duration::from_secs(1)).expect("endpoint");
    security.channel(&endpoint)
}

/// `service`'s status at `addr` once the port answers (each try bounded: a pserver's port is
/// bound before it serves).
async fn status(security: &Security, addr: &str, service: &str) -> ServingStatus {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut client = HealthClient::new(channel(security, addr));
        let request = HealthCheckRequest { service: service.to_string() };
        let answer = tokio::time::timeout(Duration::from_secs(1), client.check(request)).await;
        if let Ok(Ok(answer)) = answer {
            return answer.into_inner().status();
        }
        assert!(tokio::time::Instant::now() < deadline, "{addr} never answered health: {answer:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `service` at `addr` is SERVING.
async fn serving(security: &Security, addr: &str, service: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while status(security, addr, service).await != ServingStatus::Serving {
        assert!(tokio::time::Instant::now() < deadline, "{service} at {addr} never SERVING");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The services reflection lists at `addr`.
async fn listed(security: &Security, addr: &str) -> Result<Vec<String>, tonic::Status> {
    let mut client = ServerReflectionClient::new(channel(security, addr));
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut answers =
        client.server_reflection_info(tokio_stream::once(request)).await?.into_inner();
    let answer = answers.next().await.expect("one answer")?;
    match answer.message_response {
        Some(MessageResponse::ListServicesResponse(list)) => {
            Ok(list.service.into_iter().map(|service| service.name).collect())
        }
        other => panic!("not a service list: {other:?}"),
    }
}

/// One master of three, alone, knows no leader: its master service is NOT_SERVING (its Raft
/// service, which the others need to reach it, is SERVING). The others start, the group
/// elects, and a `Watch` on the first sees SERVING. Reflection lists the port's services.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_is_serving_once_its_group_has_a_leader() {
    let mut group = MasterGroup::prepare(3, &[]);
    group.spawn(0);
    let open = Security::default();
    let first = group.addrs[0].clone();
    assert_eq!(status(&open, &first, MASTER_SERVICE).await, ServingStatus::NotServing);
    assert_eq!(status(&open, &first, RAFT_SERVICE).await, ServingStatus::Serving);
    assert_eq!(status(&open, &first, "").await, ServingStatus::Serving, "the process serves");

    tracing::info!("--- the others start: a Watch sees the group elect");
    let mut client = HealthClient::new(channel(&open, &first));
    let request = HealthCheckRequest { service: MASTER_SERVICE.to_string() };
    let mut updates = client.watch(request).await.expect("watch").into_inner();
    let first_update = updates.next().await.expect("an update").expect("a status");
    assert_eq!(first_update.status(), ServingStatus::NotServing);
    group.spawn(1);
    group.spawn(2);
    let elected = tokio::time::timeout(WAIT, async {
        while let Some(update) = updates.next().await {
            if update.expect("a status").status() == ServingStatus::Serving {
                return true;
            }
        }
        false
    });
    assert_eq!(elected.await.ok(), Some(true), "no SERVING update\n{}", group.logs());

    tracing::info!("--- reflection lists the port's services");
    let mut services = listed(&open, &first).await.expect("reflection answers");
    services.sort();
    let expected = [
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
        MASTER_SERVICE,
        RAFT_SERVICE,
    ];
    assert_eq!(services, expected);
}

/// With a cluster token, health answers a caller without it (a Kubernetes probe has none);
/// reflection, which describes every method, refuses it and answers the token's holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_needs_no_token_and_reflection_does() {
    let dir = tempfile::tempdir().expect("temp");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "a-cluster-token-of-enough-length").expect("write the token");
    let token_path = token_file.display().to_string();
    let group = MasterGroup::start(1, &["--token-file", &token_path]);
    let addr = group.addrs[0].clone();
    let open = Security::default();
    serving(&open, &addr, MASTER_SERVICE).await;
    let refused = listed(&open, &addr).await.expect_err("no token");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused}");
    let token = Token::from_bytes(b"a-cluster-token-of-enough-length").expect("a token");
    let holder = Security::new(None, Some(token));
    let services = listed(&holder, &addr).await.expect("the token's holder is answered");
    assert!(services.iter().any(|service| service == MASTER_SERVICE), "{services:?}");
}

/// A pserver is SERVING for its service once it holds its slot: on its gRPC port and on its
/// metrics port (HTTP/2 without TLS, as Kubernetes' `grpc:` probes speak). Its reflection
/// lists the pserver service and no master's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pserver_serving_its_slot_is_serving() {
    let dir = tempfile::tempdir().expect("temp");
    let group = MasterGroup::start(1, &[]);
    let mut pservers = PServerProcesses::new(&group.addrs, dir.path(), 1);
    let metrics = free_loopback_addr();
    let only = pservers.spawn_with(&["--metrics-listen", &metrics]);
    let open = Security::default();
    serving(&open, &pservers.addrs[only], PSERVER_SERVICE).await;
    assert_eq!(status(&open, &metrics, PSERVER_SERVICE).await, ServingStatus::Serving);
    let services = listed(&open, &pservers.addrs[only]).await.expect("reflection answers");
    assert!(services.iter().any(|service| service == PSERVER_SERVICE), "{services:?}");
    assert!(!services.iter().any(|service| service == MASTER_SERVICE), "{services:?}");
}
