//! `GuardedListener`: a TCP listener that keeps at most `PortLimits::connections()` connections
//! open (one more is accepted and closed at once, with a warning at most every
//! `REFUSAL_WARN_MS`), sets `TCP_NODELAY`, and wraps each connection in a [`GuardedStream`] that
//! closes it when silent. Serves tonic (through [`incoming`]) and axum (as its `Listener`).
//! The metrics port's listener evicts instead of refusing ([`GuardedListener::with_eviction`]):
//! when full, it closes the oldest connection with no request in progress to let the new one
//! in, so a probe is answered whatever idle or dribbling connections hold the port.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;

use crate::guarded_stream::GuardedStream;
use crate::http_connections::HttpConnections;
use crate::port_limits::PortLimits;

/// The least time between two warnings about refused connections.
const REFUSAL_WARN_MS: u64 = 10_000;
/// How long to wait after a failed accept (out of file descriptors) before trying again, so
/// the accept loop does not spin.
const ACCEPT_RETRY_MS: u64 = 50;
/// How long a new connection waits for an evicted one to give its place back (its task
/// closes it as soon as it runs) before it is refused after all.
const EVICTION_WAIT_MS: u64 = 1_000;

/// A listener under its port's limits.
pub struct GuardedListener {
    listener: TcpListener,
    permits: Arc<Semaphore>,
    connections_max: usize,
    first_bytes: Duration,
    idle: Duration,
    refused_count: u64,
    evicted_count: u64,
    warned_at: Option<Instant>,
    /// The connections to evict from when full, if this port evicts rather than refuses.
    evictable: Option<Arc<HttpConnections>>,
}

impl GuardedListener {
    pub fn new(listener: TcpListener, limits: &PortLimits) -> Self {
        let connections_max = limits.connections();
        Self {
            listener,
            permits: Arc::new(Semaphore::new(connections_max)),
            connections_max,
            first_bytes: limits.first_bytes(),
            idle: limits.idle(),
            refused_count: 0,
            evicted_count: 0,
            warned_at: None,
            evictable: None,
        }
    }

    /// When full, evicts the oldest of `connections` with no request in progress instead of
    /// refusing the new connection (refusing only when every one is serving a request).
    pub(crate) fn with_eviction(mut self, connections: Arc<HttpConnections>) -> Self {
        self.evictable = Some(connections);
        self
    }

    /// The next connection within the cap; waits out accept errors (a full fd table).
    pub async fn accept_guarded(&mut self) -> (GuardedStream, SocketAddr) {
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::debug!(%error, "accept failed; retrying");
                    tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await;
                    continue;
                }
            };
            let permit = match self.permits.clone().try_acquire_owned() {
                Ok(permit) => permit,
                Err(_full) => match self.make_room().await {
                    Some(permit) => permit,
                    None => {
                        self.refuse(peer);
                        continue;
                    }
                },
            };
            // Without it small RPCs wait 40 ms for delayed ACKs; a socket that refuses it is
            // still usable.
            let _ = stream.set_nodelay(true);
            return (GuardedStream::new(stream, permit, self.first_bytes, self.idle), peer);
        }
    }

    /// Evicts one idle connection, if this port evicts and one is idle, and takes its place.
    async fn make_room(&mut self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let evictable = self.evictable.as_ref()?;
        if !evictable.evict_idlest() {
            return None;
        }
        let wait = Duration::from_millis(EVICTION_WAIT_MS);
        let permit = tokio::time::timeout(wait, self.permits.clone().acquire_owned()).await;
        self.evicted_count += 1;
        if self.evicted_count.is_power_of_two() {
            tracing::warn!(
                connections_max = self.connections_max,
                evicted = self.evicted_count,
                "the port is full: closed its oldest idle connection to let a new one in"
            );
        }
        permit.ok()?.ok()
    }

    /// Closes a connection beyond the cap (by dropping it) and says so now and then.
    fn refuse(&mut self, peer: SocketAddr) {
        self.refused_count += 1;
        let now = Instant::now();
        let quiet = Duration::from_millis(REFUSAL_WARN_MS);
        if self.warned_at.is_some_and(|warned| now < warned + quiet) {
            return;
        }
        self.warned_at = Some(now);
        tracing::warn!(
            %peer,
            connections_max = self.connections_max,
            refused = self.refused_count,
            "connection refused: the port already holds --connections-max connections"
        );
    }
}

/// The accepted connections of `listener` under `limits`, for tonic's
/// `serve_with_incoming`. Accepting stops when the stream is dropped.
pub fn incoming(
    listener: TcpListener,
    limits: &PortLimits,
) -> impl Stream<Item = io::Result<GuardedStream>> {
    ReceiverStream::new(accept_loop(listener, limits))
}

/// Accepts on `listener` under `limits` into a queue of one, until the queue's receiver is
/// dropped.
pub(crate) fn accept_loop(
    listener: TcpListener,
    limits: &PortLimits,
) -> mpsc::Receiver<io::Result<GuardedStream>> {
    let mut guarded = GuardedListener::new(listener, limits);
    let (sender, receiver) = mpsc::channel(1);
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                () = sender.closed() => return,
                (stream, _peer) = guarded.accept_guarded() => stream,
            };
            if sender.send(Ok(stream)).await.is_err() {
                return;
            }
        }
    });
    receiver
}

impl axum::serve::Listener for GuardedListener {
    type Io = GuardedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        self.accept_guarded().await
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}
