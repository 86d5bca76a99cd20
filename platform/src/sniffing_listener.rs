//! `SniffingListener`: TLS and plain HTTP on one port, told apart by the first byte a client
//! sends (0x16 opens every TLS handshake; an HTTP/1 request starts with a method's letter and
//! HTTP/2 without TLS with `PRI`). With a TLS configuration it serves browsers over TLS and
//! still answers what cannot do TLS (kubelet's gRPC probes, a plain Prometheus scrape) in the
//! clear; the routes that must not travel in the clear ask [`HttpPeer::tls`]. Each connection
//! is sniffed and its handshake done on a task of its own, bounded by the port's first-bytes
//! limit, so a client that stalls holds only its own connection slot. Every connection is in
//! the port's [`HttpConnections`] from its accept on: when the port is full, the oldest one
//! with no request in progress, sniffed or not, is closed to make room.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::guarded_listener::GuardedListener;
use crate::guarded_stream::GuardedStream;
use crate::http_connections::{HttpConnections, Registered};

/// The first byte of a TLS record carrying a handshake.
const TLS_HANDSHAKE_BYTE: u8 = 0x16;
/// Sniffed connections waiting for the server to take them.
const READY_CONNECTIONS_MAX: usize = 64;

/// Who is on the other end of a connection, and whether it speaks TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpPeer {
    pub addr: SocketAddr,
    pub tls: bool,
    /// The address of ours the client reached (for a wildcard listener, the interface's).
    pub local: Option<SocketAddr>,
}

/// A sniffed connection, with its place among the port's connections.
pub(crate) struct HttpConnection {
    pub(crate) stream: HttpStream,
    pub(crate) peer: HttpPeer,
    pub(crate) registered: Registered,
}

/// One connection, in the clear or over TLS.
pub enum HttpStream {
    Plain(GuardedStream),
    Tls(Box<TlsStream<GuardedStream>>),
}

/// The port's connections, each sniffed and, when it starts a handshake, decrypted.
pub struct SniffingListener {
    ready: mpsc::Receiver<HttpConnection>,
    local_addr: io::Result<SocketAddr>,
    accepting: tokio::task::JoinHandle<()>,
}

impl SniffingListener {
    /// Accepts on `guarded` (evicting the oldest idle connection when full); `tls` decrypts
    /// the connections that start a handshake, which must finish within `handshake` (without
    /// it every connection is taken as plain).
    pub fn new(
        guarded: GuardedListener,
        tls: Option<Arc<rustls::ServerConfig>>,
        handshake: Duration,
    ) -> Self {
        let local_addr = axum::serve::Listener::local_addr(&guarded);
        let connections = Arc::new(HttpConnections::default());
        let mut guarded = guarded.with_eviction(connections.clone());
        let (sender, ready) = mpsc::channel(READY_CONNECTIONS_MAX);
        let acceptor = tls.map(TlsAcceptor::from);
        let accepting = tokio::spawn(async move {
            loop {
                let (stream, addr) = guarded.accept_guarded().await;
                if sender.is_closed() {
                    return;
                }
                let registered = connections.register();
                let (sender, acceptor) = (sender.clone(), acceptor.clone());
                tokio::spawn(async move {
                    let state = registered.state.clone();
                    let sniffed = tokio::select! {
                        sniffed = tokio::time::timeout(handshake, sniff(stream, addr, acceptor)) => sniffed,
                        // Made room for a newer connection before it was even sniffed.
                        () = state.evicted() => return,
                    };
                    if let Ok(Some((stream, peer))) = sniffed {
                        let _ = sender.send(HttpConnection { stream, peer, registered }).await;
                    }
                });
            }
        });
        Self { ready, local_addr, accepting }
    }

    /// The next sniffed connection; pending for ever once the accepting task ended (its
    /// runtime is stopping).
    pub(crate) async fn accept(&mut self) -> HttpConnection {
        match self.ready.recv().await {
            Some(connection) => connection,
            None => std::future::pending().await,
        }
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.local_addr {
            Ok(addr) => Ok(*addr),
            Err(error) => Err(io::Error::new(error.kind(), error.to_string())),
        }
    }
}

impl Drop for SniffingListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// The connection as plain or TLS by its first byte; `None` if it closed or failed its
/// handshake (which the client's side reports).
async fn sniff(
    stream: GuardedStream,
    addr: SocketAddr,
    acceptor: Option<TlsAcceptor>,
) -> Option<(HttpStream, HttpPeer)> {
    let local = stream.local_addr().ok();
    let plain = HttpPeer { addr, tls: false, local };
    let Some(acceptor) = acceptor else {
        return Some((HttpStream::Plain(stream), plain));
    };
    let first = stream.peek_first_byte().await.ok()??;
    if first != TLS_HANDSHAKE_BYTE {
        return Some((HttpStream::Plain(stream), plain));
    }
    match acceptor.accept(stream).await {
        Ok(tls) => Some((HttpStream::Tls(Box::new(tls)), HttpPeer { tls: true, ..plain })),
        Err(error) => {
            tracing::debug!(%addr, %error, "TLS handshake failed on the HTTP port");
            None
        }
    }
}

impl AsyncRead for HttpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HttpStream::Plain(stream) => Pin::new(stream).poll_read(context, buf),
            HttpStream::Tls(stream) => Pin::new(stream.as_mut()).poll_read(context, buf),
        }
    }
}

impl AsyncWrite for HttpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            HttpStream::Plain(stream) => Pin::new(stream).poll_write(context, buf),
            HttpStream::Tls(stream) => Pin::new(stream.as_mut()).poll_write(context, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HttpStream::Plain(stream) => Pin::new(stream).poll_flush(context),
            HttpStream::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(context),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HttpStream::Plain(stream) => Pin::new(stream).poll_shutdown(context),
            HttpStream::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(context),
        }
    }
}
