//! `SniffingListener`: TLS and plain HTTP on one port, told apart by the first byte a client
//! sends (0x16 opens every TLS handshake; an HTTP/1 request starts with a method's letter and
//! HTTP/2 without TLS with `PRI`). With a TLS configuration it serves browsers over TLS and
//! still answers what cannot do TLS (kubelet's gRPC probes, a plain Prometheus scrape) in the
//! clear; the routes that must not travel in the clear ask [`HttpPeer::tls`]. Each connection
//! is sniffed and its handshake done on a task of its own, bounded by the port's first-bytes
//! limit, so a client that stalls holds only its own connection slot.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::guarded_listener::GuardedListener;
use crate::guarded_stream::GuardedStream;

/// The first byte of a TLS record carrying a handshake.
const TLS_HANDSHAKE_BYTE: u8 = 0x16;
/// Sniffed connections waiting for the server to take them.
const READY_CONNECTIONS_MAX: usize = 64;

/// Who is on the other end of a connection, and whether it speaks TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpPeer {
    pub addr: SocketAddr,
    pub tls: bool,
}

/// One connection, in the clear or over TLS.
pub enum HttpStream {
    Plain(GuardedStream),
    Tls(Box<TlsStream<GuardedStream>>),
}

/// The port's connections, each sniffed and, when it starts a handshake, decrypted.
pub struct SniffingListener {
    ready: mpsc::Receiver<(HttpStream, HttpPeer)>,
    local_addr: io::Result<SocketAddr>,
    accepting: tokio::task::JoinHandle<()>,
}

impl SniffingListener {
    /// Accepts on `guarded`; `tls` decrypts the connections that start a handshake, which
    /// must finish within `handshake` (without it every connection is taken as plain).
    pub fn new(
        mut guarded: GuardedListener,
        tls: Option<Arc<rustls::ServerConfig>>,
        handshake: Duration,
    ) -> Self {
        let local_addr = axum::serve::Listener::local_addr(&guarded);
        let (sender, ready) = mpsc::channel(READY_CONNECTIONS_MAX);
        let acceptor = tls.map(TlsAcceptor::from);
        let accepting = tokio::spawn(async move {
            loop {
                let (stream, addr) = guarded.accept_guarded().await;
                if sender.is_closed() {
                    return;
                }
                let (sender, acceptor) = (sender.clone(), acceptor.clone());
                tokio::spawn(async move {
                    let sniffed = tokio::time::timeout(handshake, sniff(stream, addr, acceptor));
                    if let Ok(Some(connection)) = sniffed.await {
                        let _ = sender.send(connection).await;
                    }
                });
            }
        });
        Self { ready, local_addr, accepting }
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
    let Some(acceptor) = acceptor else {
        return Some((HttpStream::Plain(stream), HttpPeer { addr, tls: false }));
    };
    let first = stream.peek_first_byte().await.ok()??;
    if first != TLS_HANDSHAKE_BYTE {
        return Some((HttpStream::Plain(stream), HttpPeer { addr, tls: false }));
    }
    match acceptor.accept(stream).await {
        Ok(tls) => Some((HttpStream::Tls(Box::new(tls)), HttpPeer { addr, tls: true })),
        Err(error) => {
            tracing::debug!(%addr, %error, "TLS handshake failed on the HTTP port");
            None
        }
    }
}

impl axum::serve::Listener for SniffingListener {
    type Io = HttpStream;
    type Addr = HttpPeer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accepting task ended (its runtime is stopping): no more connections.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        match &self.local_addr {
            Ok(addr) => Ok(HttpPeer { addr: *addr, tls: false }),
            Err(error) => Err(io::Error::new(error.kind(), error.to_string())),
        }
    }
}

impl Connected<IncomingStream<'_, SniffingListener>> for HttpPeer {
    fn connect_info(stream: IncomingStream<'_, SniffingListener>) -> Self {
        *stream.remote_addr()
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
