//! `DataPlaneServer`: the pserver's one gRPC service as the server mounts it. `PushGrads`,
//! `PullParams` and `PushPull` are served here without tonic's codec; every other call goes to
//! the generated service. Both paths end in the same `PServerRpc` methods, so the checks are
//! the same.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use platform::unary::{read_request, reply, small_message};
use proto::pserver as pb;
use proto::pserver::p_server_service_server::PServerServiceServer;
use proto::Message as _;
use tonic::server::NamedService;
use tonic::Status;
use tower::Service;

use super::{malformed, pull_message, push_message, SMALL_MESSAGE_BYTES_MAX};
use super::{PULL_PARAMS_PATH, PUSH_GRADS_PATH, PUSH_PULL_PATH};
use crate::conversions::ids_from_proto;
use crate::limits::MESSAGE_BYTES_MAX;
use crate::service::PServerRpc;

type Reply = http::Response<tonic::body::Body>;
type ReplyFuture = Pin<Box<dyn Future<Output = Result<Reply, Infallible>> + Send>>;

/// The pserver service with its data plane.
#[derive(Clone, Debug)]
pub struct DataPlaneServer {
    rpc: PServerRpc,
    generated: PServerServiceServer<PServerRpc>,
}

impl DataPlaneServer {
    pub fn new(rpc: PServerRpc) -> Self {
        let generated = PServerServiceServer::new(rpc.clone())
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX);
        Self { rpc, generated }
    }
}

impl NamedService for DataPlaneServer {
    const NAME: &'static str = <PServerServiceServer<PServerRpc> as NamedService>::NAME;
}

impl Service<http::Request<tonic::body::Body>> for DataPlaneServer {
    type Response = Reply;
    type Error = Infallible;
    type Future = ReplyFuture;

    fn poll_ready(&mut self, _context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> ReplyFuture {
        let rpc = self.rpc.clone();
        match request.uri().path() {
            PUSH_GRADS_PATH => Box::pin(async move { Ok(reply(push(rpc, request).await)) }),
            PULL_PARAMS_PATH => Box::pin(async move { Ok(reply(pull(rpc, request).await)) }),
            PUSH_PULL_PATH => Box::pin(async move { Ok(reply(push_pull(rpc, request).await)) }),
            _ => Box::pin(self.generated.call(request)),
        }
    }
}

async fn push(
    rpc: PServerRpc,
    request: http::Request<tonic::body::Body>,
) -> Result<Vec<Bytes>, Status> {
    let message = read_request(request, MESSAGE_BYTES_MAX).await?;
    let push = push_message::decode(message, false)?;
    let step = rpc.push_blocks(push.fence, push.blocks).await?;
    Ok(small_message(&pb::PushGradsReply { step }))
}

async fn push_pull(
    rpc: PServerRpc,
    request: http::Request<tonic::body::Body>,
) -> Result<Vec<Bytes>, Status> {
    let message = read_request(request, MESSAGE_BYTES_MAX).await?;
    let push = push_message::decode(message, true)?;
    let ids = ids_from_proto(push.pull);
    let (blocks, stamp) = rpc.push_pull(push.fence, push.blocks, &ids).await?;
    Ok(pull_message::encode(blocks, stamp))
}

async fn pull(
    rpc: PServerRpc,
    request: http::Request<tonic::body::Body>,
) -> Result<Vec<Bytes>, Status> {
    let message = read_request(request, SMALL_MESSAGE_BYTES_MAX).await?;
    let request = pb::PullParamsRequest::decode(message)
        .map_err(|error| malformed("the PullParams request", error))?;
    let (blocks, stamp) = rpc.pull_blocks(request.fence, &ids_from_proto(request.blocks))?;
    Ok(pull_message::encode(blocks, stamp))
}
