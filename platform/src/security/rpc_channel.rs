//! `RpcChannel`: the client side of every raftrain gRPC connection, a tonic `Channel` (TLS or
//! not) that puts the cluster token in each call's `authorization` header. The simulation
//! builds one over an in-process service instead of a socket, so that clients run unchanged.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::header::AUTHORIZATION;
use http::HeaderValue;
use tonic::body::Body;
use tonic::transport::Channel;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Service, ServiceExt as _};

/// A service that answers gRPC requests without a socket (the simulation's network).
pub type InProcessService =
    BoxCloneSyncService<http::Request<Body>, http::Response<Body>, BoxError>;

/// A channel that authenticates its calls. Cheap to clone: clones share the connection.
#[derive(Clone)]
pub struct RpcChannel {
    transport: Transport,
    authorization: Option<HeaderValue>,
}

#[derive(Clone)]
enum Transport {
    Tonic(Channel),
    InProcess(InProcessService),
}

impl std::fmt::Debug for RpcChannel {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let transport = match &self.transport {
            Transport::Tonic(channel) => format!("{channel:?}"),
            Transport::InProcess(_) => "in process".to_string(),
        };
        formatter
            .debug_struct("RpcChannel")
            .field("transport", &transport)
            .field("token", &self.authorization.is_some())
            .finish()
    }
}

impl RpcChannel {
    /// `channel` sending `authorization` (the token's header) on every call, if given.
    pub fn new(channel: Channel, authorization: Option<HeaderValue>) -> Self {
        Self { transport: Transport::Tonic(channel), authorization }
    }

    /// A channel whose calls `service` answers in this process. An error it returns that is a
    /// `tonic::Status` reaches the caller as that status.
    pub fn in_process(service: InProcessService) -> Self {
        Self { transport: Transport::InProcess(service), authorization: None }
    }
}

type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<Body>, BoxError>> + Send + 'static>>;

impl Service<http::Request<Body>> for RpcChannel {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        match &mut self.transport {
            Transport::Tonic(channel) => {
                Service::<http::Request<Body>>::poll_ready(channel, context).map_err(Into::into)
            }
            Transport::InProcess(service) => service.poll_ready(context),
        }
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        if let Some(value) = &self.authorization {
            request.headers_mut().insert(AUTHORIZATION, value.clone());
        }
        match &mut self.transport {
            Transport::Tonic(channel) => {
                let call = channel.call(request);
                Box::pin(async move { call.await.map_err(Into::into) })
            }
            Transport::InProcess(service) => Box::pin(service.clone().oneshot(request)),
        }
    }
}

/// A channel without a token (an open cluster).
impl From<Channel> for RpcChannel {
    fn from(channel: Channel) -> Self {
        Self::new(channel, None)
    }
}
