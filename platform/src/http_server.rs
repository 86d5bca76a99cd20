//! `serve_http`: the metrics port's server loop (hyper, HTTP/1 or HTTP/2 by each connection's
//! first bytes), in place of `axum::serve`, for the bounds that one does not keep: a request's
//! headers must have arrived `PortLimits::http_header_read()` after its connection opened
//! (and, over HTTP/1, after the previous response), an idle connection is closed when the port
//! is full and a new one needs its place ([`crate::http_connections`]), and a stop waits for
//! the open connections a bounded time (a `Watch` stream never ends on its own).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt as _;

use crate::http_connections::RequestInProgress;
use crate::sniffing_listener::{HttpConnection, SniffingListener};

/// At a stop, how long open connections may take to finish their requests before they are
/// cut off.
const DRAIN_MS_MAX: u64 = 3_000;

/// Serves `router` on `listener`'s connections until `shutdown` completes, each connection's
/// headers bounded by `header_read`.
pub(crate) async fn serve_http(
    mut listener: SniffingListener,
    router: Router,
    header_read: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let (stop, stopped) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            connection = listener.accept() => {
                let served = serve_connection(connection, router.clone(), header_read, stopped.clone());
                connections.spawn(served);
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop.send(true);
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_millis(DRAIN_MS_MAX), drain).await.is_err() {
        // Dropping the set aborts what is left.
        tracing::debug!(bound_ms = DRAIN_MS_MAX, "metrics connections still open; cut off");
    }
}

/// Serves one connection until it closes, is evicted, sends no request headers in time, or
/// the server stops (then its requests in progress finish first).
async fn serve_connection(
    connection: HttpConnection,
    router: Router,
    header_read: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    let HttpConnection { stream, peer, registered } = connection;
    let state = registered.state.clone();
    let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        let in_progress = state.begin_request();
        let mut request = request.map(axum::body::Body::new);
        request.extensions_mut().insert(ConnectInfo(peer));
        let router = router.clone();
        async move {
            let response = router.oneshot(request).await?;
            Ok::<_, Infallible>(
                response.map(|inner| InProgressBody { inner, _in_progress: in_progress }),
            )
        }
    });
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_read);
    let served = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    tokio::pin!(served);
    let state = registered.state.clone();
    // hyper's own bound starts only once HTTP/1 is told from HTTP/2: this one covers a
    // connection from its accept to its first request, whatever it dribbles.
    let first_headers = tokio::time::sleep(header_read);
    let evicted = state.evicted();
    let stop = stopped.wait_for(|stop| *stop);
    tokio::pin!(first_headers, evicted, stop);
    let (mut waiting_first, mut stopping) = (true, false);
    loop {
        tokio::select! {
            result = served.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(peer = %peer.addr, %error, "metrics connection failed");
                }
                return;
            }
            () = &mut evicted => {
                tracing::debug!(peer = %peer.addr, "closed to make room for a new connection");
                return;
            }
            () = &mut first_headers, if waiting_first => {
                if !state.has_started() {
                    tracing::debug!(peer = %peer.addr, "no request headers in time; closed");
                    return;
                }
                waiting_first = false;
            }
            _ = &mut stop, if !stopping => {
                served.as_mut().graceful_shutdown();
                stopping = true;
            }
        }
    }
}

/// A response body that keeps its request counted as in progress until it is all sent.
struct InProgressBody {
    inner: axum::body::Body,
    _in_progress: RequestInProgress,
}

impl http_body::Body for InProgressBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(context)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
