//! `--metrics-listen`: the HTTP endpoint every raftrain process serves, on axum (hyper):
//! `GET /metrics` (Prometheus text), `GET /healthz` (the process runs) and `GET /readyz`
//! (it can do its job: a master knows a leader, a pserver serves its slot, a trainer has
//! joined its job; 503 with the reason otherwise). Other paths are 404, other methods 405.
//! A master's and a pserver's also answer `grpc.health.v1.Health` (HTTP/2 without TLS, as
//! Kubernetes' `grpc:` probes speak it; their gRPC ports may need TLS, which those probes
//! cannot do) from the same statuses as their gRPC port's. A master adds its dashboard
//! ([`Extras::routes`]); with TLS configured ([`Extras::tls`]) the port speaks TLS and plain
//! HTTP both, and the added routes answer only over TLS (a plain request is redirected to
//! `https://` at this server's own address, never to a host the request names).
//!
//! The port is served by [`crate::http_server`]: request headers have `--http-header-read-ms`
//! to arrive, and a full port closes its oldest idle connection rather than refuse a probe.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::grpc_conventions::HEALTH_SERVICE;
use crate::http_server::serve_http;
use crate::{GrpcHealth, GuardedListener, HttpPeer, PortLimits, SniffingListener};

/// The Prometheus text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders the metrics text at each scrape.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;
/// Says whether the process is ready, or why not.
pub type Ready = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// What the endpoint answers with.
#[derive(Clone)]
pub struct Endpoints {
    pub render: Render,
    pub ready: Ready,
}

/// Binds `--metrics-listen` if given: before anything else is opened, so a bad address fails
/// with nothing to undo.
pub async fn bind(addr: Option<SocketAddr>) -> anyhow::Result<Option<TcpListener>> {
    let Some(addr) = addr else { return Ok(None) };
    let listener =
        TcpListener::bind(addr).await.with_context(|| format!("bind --metrics-listen {addr}"))?;
    if let Ok(bound) = listener.local_addr() {
        tracing::info!(metrics = %bound, "metrics served at http://{bound}/metrics");
    }
    Ok(Some(listener))
}

/// Serves `endpoints` on `listener` until `shutdown` completes, with `limits`' connection cap
/// and silence bounds (a scrape is one short request; a Prometheus connection kept open
/// between scrapes is heard every scrape interval, far below the idle bound).
pub async fn serve(
    listener: TcpListener,
    limits: &PortLimits,
    endpoints: Endpoints,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    serve_with_health(listener, limits, endpoints, None, shutdown).await
}

/// What a process serves on the port besides its metrics and probes.
#[derive(Clone, Default)]
pub struct Extras {
    /// `grpc.health.v1.Health`, from the same statuses as the process's gRPC port.
    pub health: Option<GrpcHealth>,
    /// More routes (a master's dashboard), behind the same connection limits; with `tls`,
    /// served only over TLS (a plain request is redirected to `https://` on the same port).
    pub routes: Option<Router>,
    /// Serve TLS on this port too, told from plain HTTP by each connection's first byte
    /// ([`SniffingListener`]): metrics and probes answer either way.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// Like [`serve`], and with `health`, `grpc.health.v1.Health` too.
pub async fn serve_with_health(
    listener: TcpListener,
    limits: &PortLimits,
    endpoints: Endpoints,
    health: Option<GrpcHealth>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let extras = Extras { health, ..Extras::default() };
    serve_with_extras(listener, limits, endpoints, extras, shutdown).await
}

/// Like [`serve`], and with `extras`.
pub async fn serve_with_extras(
    listener: TcpListener,
    limits: &PortLimits,
    endpoints: Endpoints,
    Extras { health, routes, tls }: Extras,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let mut router = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(endpoints);
    if let Some(health) = health {
        for method in ["Check", "Watch"] {
            let path = format!("/{HEALTH_SERVICE}/{method}");
            router = router.route_service(&path, health.service());
        }
    }
    let bound = listener.local_addr().ok();
    if let Some(routes) = routes {
        router = match tls {
            Some(_) => {
                let tls_only = axum::middleware::from_fn_with_state(bound, tls_only);
                router.merge(routes.layer(tls_only))
            }
            None => router.merge(routes),
        };
    }
    let listener =
        SniffingListener::new(GuardedListener::new(listener, limits), tls, limits.first_bytes());
    serve_http(listener, router, limits.http_header_read(), shutdown).await;
}

/// Serves `endpoints` on a task of its own until `stopped` turns true.
pub fn spawn(
    listener: TcpListener,
    limits: PortLimits,
    endpoints: Endpoints,
    stopped: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    spawn_with_health(listener, limits, endpoints, None, stopped)
}

/// Like [`spawn`], and with `health`, `grpc.health.v1.Health` too.
pub fn spawn_with_health(
    listener: TcpListener,
    limits: PortLimits,
    endpoints: Endpoints,
    health: Option<GrpcHealth>,
    stopped: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    spawn_with_extras(listener, limits, endpoints, Extras { health, ..Extras::default() }, stopped)
}

/// Like [`spawn`], and with `extras`.
pub fn spawn_with_extras(
    listener: TcpListener,
    limits: PortLimits,
    endpoints: Endpoints,
    extras: Extras,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let shutdown = async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    tokio::spawn(
        async move { serve_with_extras(listener, &limits, endpoints, extras, shutdown).await },
    )
}

/// Lets a request over TLS through; redirects a plain one to the same URL over TLS (the port
/// speaks both) when its `Host` names this server (`bound`, or the address the client
/// reached), and refuses it otherwise: redirecting to whatever host a request names would make
/// this port an open redirect.
async fn tls_only(
    State(bound): State<Option<SocketAddr>>,
    ConnectInfo(peer): ConnectInfo<HttpPeer>,
    request: Request,
    next: Next,
) -> Response {
    if peer.tls {
        return next.run(request).await;
    }
    let host = request.headers().get(header::HOST).and_then(|host| host.to_str().ok());
    let ours = [bound, peer.local];
    let target = request.uri().path_and_query().map_or("/", |path| path.as_str());
    let location = host
        .filter(|host| names_us(host, &ours))
        .and_then(|host| HeaderValue::from_str(&format!("https://{host}{target}")).ok());
    if let Some(location) = location {
        return (StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, location)]).into_response();
    }
    let at = peer.local.or(bound).map_or(String::new(), |addr| format!(" at https://{addr}/"));
    let explanation = format!(
        "this page is served over TLS only{at}; this plain request is not redirected because \
         its Host header does not name this server\n"
    );
    (StatusCode::BAD_REQUEST, explanation).into_response()
}

/// Whether `host` (a `Host` header: an address with its port, or `localhost` with it) is one
/// of `ours`: an IP address and port this port is bound to or was reached at.
fn names_us(host: &str, ours: &[Option<SocketAddr>]) -> bool {
    let ours = || ours.iter().flatten().filter(|addr| !addr.ip().is_unspecified());
    if let Ok(addr) = host.parse::<SocketAddr>() {
        return ours().any(|ours| *ours == addr);
    }
    let Some(port) = host.strip_prefix("localhost:").and_then(|port| port.parse::<u16>().ok())
    else {
        return false;
    };
    ours().any(|ours| ours.port() == port && ours.ip().is_loopback())
}

async fn metrics(State(endpoints): State<Endpoints>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], (endpoints.render)())
}

async fn ready(State(endpoints): State<Endpoints>) -> (StatusCode, String) {
    match (endpoints.ready)() {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {reason}\n")),
    }
}

/// Appends one metric with its help and type lines.
pub fn push_metric(text: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    use std::fmt::Write as _;
    // Writing to a String cannot fail.
    let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Host` names this server only as one of its addresses (with its port) or as
    /// `localhost` on a loopback address; any other host is never redirected to.
    #[test]
    fn only_our_own_hosts_are_redirected_to() {
        let loopback: SocketAddr = "127.0.0.1:9000".parse().expect("an address");
        let wildcard: SocketAddr = "0.0.0.0:9000".parse().expect("an address");
        let interface: SocketAddr = "10.1.2.3:9000".parse().expect("an address");
        let cases: [(&str, [Option<SocketAddr>; 2], bool); 8] = [
            ("127.0.0.1:9000", [Some(loopback), None], true),
            ("localhost:9000", [Some(loopback), None], true),
            ("10.1.2.3:9000", [Some(wildcard), Some(interface)], true),
            ("evil.example", [Some(loopback), Some(loopback)], false),
            ("evil.example:9000", [Some(loopback), Some(loopback)], false),
            ("127.0.0.1:9001", [Some(loopback), Some(loopback)], false),
            ("0.0.0.0:9000", [Some(wildcard), None], false),
            ("localhost:9000", [Some(wildcard), Some(interface)], false),
        ];
        for (host, ours, expected) in cases {
            assert_eq!(names_us(host, &ours), expected, "{host} against {ours:?}");
        }
    }

    /// A metric is its help line, its type line and one sample.
    #[test]
    fn metric_lines_follow_the_text_format() {
        let mut text = String::new();
        push_metric(&mut text, "raftrain_up", "gauge", "Always 1.", 1.0);
        assert_eq!(text, "# HELP raftrain_up Always 1.\n# TYPE raftrain_up gauge\nraftrain_up 1\n");
    }
}
