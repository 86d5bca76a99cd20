//! `BoundedHealth`: `grpc.health.v1.Health` with a bound on the `Watch` streams clients hold
//! open, per connection and in all. Health needs no token (a Kubernetes probe sends none), so
//! without the bound anyone who reaches a port could open watches until the process ran out of
//! memory: each costs about 8 KB, and 102,400 of them (400 connections of 256 streams) added
//! 825 MB to a master (issue 35). A watch over a bound is refused at once with
//! `RESOURCE_EXHAUSTED` naming the bound; `Check`, what probes use, is never bounded.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio_stream::Stream;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_server::Health;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_health::server::{HealthService, WatchStream};

use crate::sniffing_listener::HttpPeer;

/// The most `Watch` streams one connection may hold open: a client watches a few services at
/// most (the server, a master's or a pserver's own service), each once.
pub const WATCHES_PER_CONNECTION_MAX: usize = 16;
/// The most `Watch` streams one process holds open over all its connections and ports (its
/// gRPC port and its metrics port share them): about 8 MB at 8 KB each, and room for a watch
/// from each of hundreds of clients.
pub const WATCHES_MAX: usize = 1024;

/// The open watches, in all and by connection (its peer's address).
#[derive(Debug, Default)]
pub(crate) struct WatchCounts {
    total: usize,
    by_connection: HashMap<SocketAddr, usize>,
}

/// The health service of one process, its watches counted. Clones share the counts.
#[derive(Clone, Debug)]
pub struct BoundedHealth {
    inner: Arc<HealthService>,
    counts: Arc<Mutex<WatchCounts>>,
}

impl BoundedHealth {
    pub(crate) fn new(inner: HealthService, counts: Arc<Mutex<WatchCounts>>) -> Self {
        Self { inner: Arc::new(inner), counts }
    }

    /// A place for one more watch from `connection`, or the bound that refuses it.
    fn admit(&self, connection: Option<SocketAddr>) -> Result<HeldWatch, Status> {
        let mut counts = lock(&self.counts);
        if counts.total >= WATCHES_MAX {
            return Err(Status::resource_exhausted(format!(
                "this server already holds {WATCHES_MAX} health watches, the most it holds in \
                 all (WATCHES_MAX); use Check, or watch again later"
            )));
        }
        if let Some(connection) = connection {
            let held = counts.by_connection.entry(connection).or_insert(0);
            if *held >= WATCHES_PER_CONNECTION_MAX {
                return Err(Status::resource_exhausted(format!(
                    "this connection already holds {WATCHES_PER_CONNECTION_MAX} health watches, \
                     the most one connection may hold (WATCHES_PER_CONNECTION_MAX)"
                )));
            }
            *held += 1;
        }
        counts.total += 1;
        Ok(HeldWatch { counts: self.counts.clone(), connection })
    }
}

/// The counts stay consistent whatever panicked while holding them (each update is one step).
fn lock(counts: &Mutex<WatchCounts>) -> std::sync::MutexGuard<'_, WatchCounts> {
    counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The peer of the connection a call came on: tonic's (plain or TLS) or the metrics port's.
fn connection_of<T>(request: &Request<T>) -> Option<SocketAddr> {
    let http_peer = || {
        let info = request.extensions().get::<axum::extract::ConnectInfo<HttpPeer>>()?;
        Some(info.0.addr)
    };
    request.remote_addr().or_else(http_peer)
}

/// One open watch's place, given back when its stream is dropped (the client cancelled it or
/// its connection closed).
#[derive(Debug)]
struct HeldWatch {
    counts: Arc<Mutex<WatchCounts>>,
    connection: Option<SocketAddr>,
}

impl Drop for HeldWatch {
    fn drop(&mut self) {
        let mut counts = lock(&self.counts);
        counts.total = counts.total.saturating_sub(1);
        let Some(connection) = self.connection else { return };
        if let Some(held) = counts.by_connection.get_mut(&connection) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                counts.by_connection.remove(&connection);
            }
        }
    }
}

/// A watch's stream holding its place.
#[derive(Debug)]
pub struct BoundedWatchStream {
    inner: WatchStream,
    _held: HeldWatch,
}

impl Stream for BoundedWatchStream {
    type Item = Result<HealthCheckResponse, Status>;

    fn poll_next(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.get_mut().inner).poll_next(context)
    }
}

#[tonic::async_trait]
impl Health for BoundedHealth {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        self.inner.check(request).await
    }

    type WatchStream = BoundedWatchStream;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let held = self.admit(connection_of(&request))?;
        let inner = self.inner.watch(request).await?.into_inner();
        Ok(Response::new(BoundedWatchStream { inner, _held: held }))
    }
}
