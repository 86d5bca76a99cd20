//! `AuthLayer`: a tower layer on every raftrain gRPC server that refuses, before any service
//! sees it, a call whose `authorization` header is not the cluster token (health checks
//! excepted, see `HEALTH_PATH_PREFIX`). A refused call is
//! `UNAUTHENTICATED`, counted in `raftrain_rpc_unauthenticated_total{method}`, and changes
//! nothing.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::AUTHORIZATION;
use tower::{Layer, Service};

use super::Token;

/// Checks every call against `token`; with no token, lets every call through.
#[derive(Clone, Debug, Default)]
pub struct AuthLayer {
    token: Option<Arc<Token>>,
}

impl AuthLayer {
    pub fn new(token: Option<Arc<Token>>) -> Self {
        Self { token }
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = Auth<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Auth { inner, token: self.token.clone() }
    }
}

/// The checking service around one server's services.
#[derive(Clone, Debug)]
pub struct Auth<S> {
    inner: S,
    token: Option<Arc<Token>>,
}

type Boxed<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B, R> Service<http::Request<B>> for Auth<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Boxed<S::Response, S::Error>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        match refusal(self.token.as_deref(), &request) {
            None => Box::pin(self.inner.call(request)),
            Some(status) => {
                let method = request.uri().path().rsplit('/').next().unwrap_or("unknown");
                metrics::counter!("raftrain_rpc_unauthenticated_total", "method" => method.to_string())
                    .increment(1);
                tracing::debug!(method, reason = status.message(), "call refused");
                Box::pin(std::future::ready(Ok(status.into_http())))
            }
        }
    }
}

/// The path prefix of `grpc.health.v1.Health` calls, which pass without the token: a
/// Kubernetes gRPC probe sends no metadata, and a status (SERVING or not, per service name)
/// reveals nothing a probe of the port would not. Reflection, which lists every method, needs
/// the token like any other service.
const HEALTH_PATH_PREFIX: &str = "/grpc.health.v1.Health/";

/// Why `request` may not pass, or `None` when it may.
fn refusal<B>(token: Option<&Token>, request: &http::Request<B>) -> Option<tonic::Status> {
    let token = token?;
    if request.uri().path().starts_with(HEALTH_PATH_PREFIX) {
        return None;
    }
    match request.headers().get(AUTHORIZATION) {
        None => Some(tonic::Status::unauthenticated(
            "no cluster token: this server needs `authorization: Bearer <token>` (--token-file)",
        )),
        Some(presented) if token.matches(presented.as_bytes()) => None,
        Some(_) => Some(tonic::Status::unauthenticated("wrong cluster token")),
    }
}
