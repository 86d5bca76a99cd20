//! The server side of the Raft transport: decodes bincode payloads (garbage is
//! `INVALID_ARGUMENT`, never a panic), hands them to openraft, and answers `ClusterInfo`.

use std::future::Future;

use platform::{
    conventional_router, incoming, server_builder, GrpcHealth, PortLimits, MESSAGE_BYTES_MAX,
};
use proto::raft::raft_service_server::{RaftService, RaftServiceServer};
use proto::raft::{ClusterInfoReply, ClusterInfoRequest, RaftReply, RaftRequest};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio_stream::wrappers::ReceiverStream;
use tonic::server::NamedService;
use tonic::{Request, Response, Status, Streaming};

use crate::append_stream;
use crate::cluster_info::{cluster_info_reply, ClusterInfo};
use crate::rpc_handler::RpcHandler;
use crate::{codec, ConsensusNode, StateMachine};

/// The `RaftService` implementation for one node.
pub struct RaftServer {
    handler: RpcHandler,
    node_id: u64,
    feature_level: u32,
}

impl RaftServer {
    /// The tonic service with this crate's message limits.
    pub(crate) fn service(
        handler: RpcHandler,
        node_id: u64,
        feature_level: u32,
    ) -> RaftServiceServer<Self> {
        RaftServiceServer::new(Self { handler, node_id, feature_level })
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX)
    }
}

/// A request's bincode payload; garbage is `INVALID_ARGUMENT`.
pub(crate) fn decode_payload<T: DeserializeOwned>(payload: &[u8]) -> Result<T, Status> {
    codec::decode(payload)
        .map_err(|error| Status::invalid_argument(format!("payload does not decode: {error}")))
}

fn decode_request<T: DeserializeOwned>(request: &Request<RaftRequest>) -> Result<T, Status> {
    decode_payload(&request.get_ref().payload)
}

/// An answer as a reply message.
pub(crate) fn encode_reply<T: Serialize>(result: &T) -> Result<RaftReply, Status> {
    let payload = codec::encode(result)
        .map_err(|error| Status::internal(format!("reply does not encode: {error}")))?;
    Ok(RaftReply { payload: payload.into() })
}

fn reply<T: Serialize>(result: &T) -> Result<Response<RaftReply>, Status> {
    encode_reply(result).map(Response::new)
}

#[tonic::async_trait]
impl RaftService for RaftServer {
    #[tracing::instrument(level = "trace", skip_all, fields(node = self.node_id, term = self.handler.raft().metrics().borrow().current_term))]
    async fn append_entries(
        &self,
        request: Request<RaftRequest>,
    ) -> Result<Response<RaftReply>, Status> {
        let result = self.handler.append_entries(decode_request(&request)?).await;
        reply(&result)
    }

    type AppendEntriesStreamStream = ReceiverStream<Result<RaftReply, Status>>;

    #[tracing::instrument(level = "debug", skip_all, fields(node = self.node_id))]
    async fn append_entries_stream(
        &self,
        request: Request<Streaming<RaftRequest>>,
    ) -> Result<Response<Self::AppendEntriesStreamStream>, Status> {
        Ok(Response::new(append_stream::serve(self.handler.clone(), request.into_inner())))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(node = self.node_id, term = self.handler.raft().metrics().borrow().current_term))]
    async fn vote(&self, request: Request<RaftRequest>) -> Result<Response<RaftReply>, Status> {
        let result = self.handler.vote(decode_request(&request)?).await;
        reply(&result)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(node = self.node_id, term = self.handler.raft().metrics().borrow().current_term))]
    async fn install_snapshot(
        &self,
        request: Request<RaftRequest>,
    ) -> Result<Response<RaftReply>, Status> {
        let result = self.handler.install_snapshot(decode_request(&request)?).await;
        reply(&result)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(node = self.node_id))]
    async fn timeout_now(
        &self,
        request: Request<RaftRequest>,
    ) -> Result<Response<RaftReply>, Status> {
        let result = self.handler.timeout_now(decode_request(&request)?).await;
        // The refusal travels as its text: a result with a string error is what every
        // version of the service sends (see `TimeoutNowError::Refused`).
        reply(&result.map_err(|refusal| refusal.to_string()))
    }

    async fn cluster_info(
        &self,
        _request: Request<ClusterInfoRequest>,
    ) -> Result<Response<ClusterInfoReply>, Status> {
        let mut info = ClusterInfo::from_metrics(&self.handler.raft().metrics().borrow());
        info.feature_level = self.feature_level;
        Ok(Response::new(cluster_info_reply(&info)))
    }
}

/// The Raft service's full name, as health and reflection know it.
pub const RAFT_SERVICE: &str = <RaftServiceServer<RaftServer> as NamedService>::NAME;

/// Serves the node's Raft service on `listener` until `shutdown` completes, with the node's
/// own security settings and `limits`; beside it health (the Raft service SERVING while the
/// port serves) and reflection.
pub async fn serve<S: StateMachine>(
    listener: TcpListener,
    node: ConsensusNode<S>,
    limits: PortLimits,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let health = GrpcHealth::default();
    health.set(RAFT_SERVICE, true).await;
    let handler = node.rpc_handler();
    let shutdown = async move {
        shutdown.await;
        handler.end_streams();
    };
    let mut builder = server_builder(node.security(), &limits)?;
    conventional_router(&mut builder, &health, &[RAFT_SERVICE], proto::FILE_DESCRIPTOR_SET)?
        .add_service(node.raft_service())
        .serve_with_incoming_shutdown(incoming(listener, &limits), shutdown)
        .await?;
    Ok(())
}
