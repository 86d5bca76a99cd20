//! `GuardedStream`: an accepted TCP connection that holds its listener's connection permit
//! (given back when the connection closes) and fails its reads once the peer has been silent
//! too long, so the server closes it: `first_bytes` before anything arrived, `idle` after.
//! Dropped with unread bytes waiting, it lingers (`lingering_close`), permit held, unless it
//! was closed for its silence.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// One accepted connection under its listener's limits.
pub struct GuardedStream {
    inner: TcpStream,
    /// The listener's connection permit, given back when this is dropped (or when its
    /// lingering ends).
    permit: Option<OwnedSemaphorePermit>,
    /// When the connection counts as silent unless something arrives (moved lazily: a read
    /// only notes its time, and the timer is pushed back when it fires).
    deadline: Pin<Box<Sleep>>,
    last_heard: Option<Instant>,
    idle: Duration,
    /// Whether a read failed for the peer's silence: such a connection closes at once.
    silent: bool,
}

impl GuardedStream {
    pub(crate) fn new(
        inner: TcpStream,
        permit: OwnedSemaphorePermit,
        first_bytes: Duration,
        idle: Duration,
    ) -> Self {
        let deadline = Box::pin(tokio::time::sleep(first_bytes));
        Self { inner, permit: Some(permit), deadline, last_heard: None, idle, silent: false }
    }

    /// The first byte the peer sent, left unread for whoever reads the stream; `None` when the
    /// peer closed before sending one.
    pub(crate) async fn peek_first_byte(&self) -> io::Result<Option<u8>> {
        let mut first = [0u8; 1];
        let peeked = self.inner.peek(&mut first).await?;
        Ok((peeked == 1).then_some(first[0]))
    }

    /// The address of ours the peer connected to.
    pub(crate) fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }

    /// `Ready(error)` when the silence bound has passed; otherwise the timer is armed.
    fn poll_silence(&mut self, context: &mut Context<'_>) -> Poll<io::Error> {
        loop {
            if self.deadline.as_mut().poll(context).is_pending() {
                return Poll::Pending;
            }
            let Some(heard) = self.last_heard else {
                self.silent = true;
                return Poll::Ready(silent("sent nothing after connecting"));
            };
            let next = heard + self.idle;
            if next <= Instant::now() {
                self.silent = true;
                return Poll::Ready(silent("went idle"));
            }
            self.deadline.as_mut().reset(next);
        }
    }
}

fn silent(what: &str) -> io::Error {
    tracing::debug!(what, "closing a silent connection");
    io::Error::new(io::ErrorKind::TimedOut, format!("the connection {what}; closed"))
}

impl Drop for GuardedStream {
    fn drop(&mut self) {
        if let (false, Some(permit)) = (self.silent, self.permit.take()) {
            crate::lingering_close::linger(&self.inner, permit);
        }
    }
}

impl AsyncRead for GuardedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let filled = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(context, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > filled {
                    this.last_heard = Some(Instant::now());
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => this.poll_silence(context).map(Err),
        }
    }
}

impl AsyncWrite for GuardedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(context, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(context, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(context)
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(context)
    }
}

impl Connected for GuardedStream {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests;
