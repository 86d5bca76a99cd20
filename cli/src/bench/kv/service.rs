//! A gRPC front for the key-value machine ([`consensus::kv`]): the consensus benchmark runs it in
//! each node process beside the Raft service, and drives it with [`KvClient`].

use std::future::Future;
use std::time::Duration;

use anyhow::Context as _;
use proto::kv::kv_service_client::KvServiceClient;
use proto::kv::kv_service_server::{KvService, KvServiceServer};
use proto::kv::{LoadReply, LoadRequest, PutReply, PutRequest};
use proto::raft::ClusterInfoRequest;
use tokio::net::TcpListener;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};

use super::stream::PutStream;
use consensus::kv::{KvCommand, KvStore};
use consensus::network::{endpoint, raft_client};
use consensus::{ClusterInfo, ConsensusNode, NodeConfig, WriteError};
use platform::security::{RpcChannel, Security};
use platform::MESSAGE_BYTES_MAX;
use platform::{conventional_router, incoming, server_builder, GrpcHealth, PortLimits};

/// Metadata key of the leader's address on an `UNAVAILABLE` answer from a follower.
pub const LEADER_METADATA_KEY: &str = "x-raftrain-leader";
/// Keys each writer (a benchmark client, or a `Load` writer) cycles through, so the state and
/// its snapshots stay small.
pub const KEYS_PER_WRITER: u64 = 100;
/// Concurrent writers a benchmark or a `Load` request may ask for.
pub const WRITERS_MAX: u32 = 4096;
/// Bytes of one written value at most.
pub const VALUE_BYTES_MAX: u32 = 16 * 1024;
/// Every client RPC fails after this long.
const RPC_TIMEOUT_MS: u64 = 10_000;

/// Serves `Put` and `PutStream` by writing through the node.
pub struct KvServer {
    node: ConsensusNode<KvStore>,
}

#[tonic::async_trait]
impl KvService for KvServer {
    async fn put(&self, request: Request<PutRequest>) -> Result<Response<PutReply>, Status> {
        let PutRequest { key, value } = request.into_inner();
        let command = KvCommand::Put { key, value };
        self.node.write(command.encode()).await.map_err(write_status)?;
        Ok(Response::new(PutReply {}))
    }

    type PutStreamStream = ReceiverStream<Result<PutReply, Status>>;

    async fn put_stream(
        &self,
        request: Request<Streaming<PutRequest>>,
    ) -> Result<Response<Self::PutStreamStream>, Status> {
        let replies = super::stream::serve(self.node.clone(), request.into_inner());
        Ok(Response::new(replies))
    }

    async fn load(&self, request: Request<LoadRequest>) -> Result<Response<LoadReply>, Status> {
        super::load::run(&self.node, request.into_inner()).await.map(Response::new)
    }
}

/// The one mapping of write errors to gRPC statuses for this service.
pub(crate) fn write_status(error: WriteError) -> Status {
    match &error {
        WriteError::ForwardToLeader { leader_addr, .. } => {
            let mut status = Status::unavailable(error.to_string());
            let leader = leader_addr.as_deref().and_then(|addr| addr.parse().ok());
            if let Some(leader) = leader {
                status.metadata_mut().insert(LEADER_METADATA_KEY, leader);
            }
            status
        }
        WriteError::CommandTooLarge { .. } => Status::invalid_argument(error.to_string()),
        WriteError::Timeout { .. } => Status::deadline_exceeded(error.to_string()),
        WriteError::NoQuorum { .. } | WriteError::Stopped { .. } => {
            Status::unavailable(error.to_string())
        }
    }
}

/// The request body deadline of the key-value service: a day, longer than any benchmark.
const KV_REQUEST_BODY_MS: u64 = 24 * 3600 * 1000;

/// Runs one key-value node: opens it, bootstraps, serves the Raft and key-value services on
/// `listener` until `shutdown` completes, then shuts the node down.
pub async fn run_node(
    config: NodeConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let node = ConsensusNode::open(config, KvStore::default()).await.context("open the node")?;
    node.bootstrap().await.context("bootstrap the group")?;
    let kv = KvServiceServer::new(KvServer { node: node.clone() })
        .max_decoding_message_size(MESSAGE_BYTES_MAX);
    // `PutStream` is a request stream as long as a benchmark runs: no body deadline for it.
    let limits = PortLimits { request_body_ms: KV_REQUEST_BODY_MS, ..PortLimits::default() };
    // Health (both services SERVING while the node serves) and reflection, as on every port.
    let kv_service = <KvServiceServer<KvServer> as tonic::server::NamedService>::NAME;
    let health = GrpcHealth::default();
    for service in [consensus::RAFT_SERVICE, kv_service] {
        health.set(service, true).await;
    }
    let mut builder = server_builder(node.security(), &limits)?;
    let services = [consensus::RAFT_SERVICE, kv_service];
    let stopping = node.clone();
    let shutdown = async move {
        shutdown.await;
        stopping.rpc_handler().end_streams();
    };
    conventional_router(&mut builder, &health, &services, proto::FILE_DESCRIPTOR_SET)?
        .add_service(node.raft_service())
        .add_service(kv)
        .serve_with_incoming_shutdown(incoming(listener, &limits), shutdown)
        .await
        .context("serve")?;
    node.shutdown().await.context("shut the node down")?;
    Ok(())
}

/// A key-value client bound to one node (normally the leader).
#[derive(Clone)]
pub struct KvClient {
    client: KvServiceClient<Channel>,
}

impl KvClient {
    /// Connects to the node at `addr` (`host:port`).
    pub async fn connect(addr: &str) -> anyhow::Result<Self> {
        let channel = endpoint(&Security::default(), addr)?
            .connect()
            .await
            .with_context(|| format!("connect to {addr}"))?;
        let client = KvServiceClient::new(channel).max_decoding_message_size(MESSAGE_BYTES_MAX);
        Ok(Self { client })
    }

    /// Writes `key = value`; returns once it is committed.
    pub async fn put(&mut self, key: String, value: String) -> anyhow::Result<()> {
        let mut request = Request::new(PutRequest { key, value });
        request.set_timeout(Duration::from_millis(RPC_TIMEOUT_MS));
        self.client.put(request).await?;
        Ok(())
    }

    /// Opens a write stream: one client writing one command at a time, each answered on
    /// the stream (`PutStream`), without a new HTTP/2 stream per write.
    pub async fn open_stream(&mut self) -> anyhow::Result<PutStream> {
        PutStream::open(&mut self.client, Duration::from_millis(RPC_TIMEOUT_MS)).await
    }

    /// Has the node run `writers` in-process writers for `duration`; returns each write's
    /// latency and the time the load took.
    pub async fn load(
        &mut self,
        writers: u32,
        duration: Duration,
        value_bytes: u32,
    ) -> anyhow::Result<(Vec<Duration>, Duration)> {
        let millis = u32::try_from(duration.as_millis()).context("the load is too long")?;
        let mut request = Request::new(LoadRequest { writers, millis, value_bytes });
        request.set_timeout(duration + Duration::from_millis(RPC_TIMEOUT_MS));
        let reply = self.client.load(request).await?.into_inner();
        let latencies = reply.latencies_us.iter().map(|&us| Duration::from_micros(us.into()));
        Ok((latencies.collect(), Duration::from_micros(reply.elapsed_us)))
    }
}

/// Asks `addr` who leads, over the Raft service's `ClusterInfo`.
pub async fn cluster_info(addr: &str) -> anyhow::Result<ClusterInfo> {
    let channel = endpoint(&Security::default(), addr)?
        .timeout(Duration::from_millis(RPC_TIMEOUT_MS))
        .connect()
        .await
        .with_context(|| format!("connect to {addr}"))?;
    let reply = raft_client(RpcChannel::new(channel, None))
        .cluster_info(ClusterInfoRequest::default())
        .await?
        .into_inner();
    Ok(ClusterInfo::from(&reply))
}
