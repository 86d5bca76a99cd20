//! `RpcMetricsLayer`: a tower layer on every raftrain gRPC server recording each call's latency
//! (`raftrain_rpc_seconds{method}`, to the response's headers) and its errors
//! (`raftrain_rpc_errors_total{method, code}`, from a trailers-only error's `grpc-status`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use tower::{Layer, Service};

/// Adds [`RpcMetrics`] to a server's services.
#[derive(Clone, Copy, Debug, Default)]
pub struct RpcMetricsLayer;

impl<S> Layer<S> for RpcMetricsLayer {
    type Service = RpcMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RpcMetrics { inner }
    }
}

/// The measuring service around one gRPC service.
#[derive(Clone, Debug)]
pub struct RpcMetrics<S> {
    inner: S,
}

type Boxed<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B, R> Service<http::Request<B>> for RpcMetrics<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Boxed<S::Response, S::Error>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.uri().path().rsplit('/').next().unwrap_or("unknown").to_string();
        let started = Instant::now();
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await;
            metrics::histogram!("raftrain_rpc_seconds", "method" => method.clone())
                .record(started.elapsed().as_secs_f64());
            let code = response
                .as_ref()
                .ok()
                .and_then(|response| response.headers().get("grpc-status"))
                .and_then(|value| value.to_str().ok())
                .unwrap_or("0");
            if code != "0" {
                metrics::counter!("raftrain_rpc_errors_total", "method" => method, "code" => code.to_string()).increment(1);
            }
            response
        })
    }
}
