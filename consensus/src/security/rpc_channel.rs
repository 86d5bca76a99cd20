//! `RpcChannel`: the client side of every raftrain gRPC connection, a tonic `Channel` (TLS or
//! not) that puts the cluster token in each call's `authorization` header.

use std::task::{Context, Poll};

use http::header::AUTHORIZATION;
use http::HeaderValue;
use tonic::body::Body;
use tonic::transport::channel::ResponseFuture;
use tonic::transport::Channel;
use tower::Service;

/// A channel that authenticates its calls. Cheap to clone: clones share the connection.
#[derive(Clone, Debug)]
pub struct RpcChannel {
    channel: Channel,
    authorization: Option<HeaderValue>,
}

impl RpcChannel {
    /// `channel` sending `authorization` (the token's header) on every call, if given.
    pub fn new(channel: Channel, authorization: Option<HeaderValue>) -> Self {
        Self { channel, authorization }
    }
}

impl Service<http::Request<Body>> for RpcChannel {
    type Response = http::Response<Body>;
    type Error = tonic::transport::Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Service::<http::Request<Body>>::poll_ready(&mut self.channel, context)
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        if let Some(value) = &self.authorization {
            request.headers_mut().insert(AUTHORIZATION, value.clone());
        }
        self.channel.call(request)
    }
}

/// A channel without a token (an open cluster).
impl From<Channel> for RpcChannel {
    fn from(channel: Channel) -> Self {
        Self::new(channel, None)
    }
}
