//! `HandedIncoming`: one port's accepted connections, handed from one server to the next. A
//! pserver's port answers as a standby, then serves its slot: two tonic servers, one after the
//! other, on one socket. tonic drops its incoming stream when it stops, and a stream that owns
//! the accept loop closes every connection accepted but not yet taken with it; a client that
//! reconnected just then (after the standby's GOAWAY) lost its request with the connection. Here
//! the accept loop lives as long as any clone of the stream: a server that stops leaves the
//! connections it did not take in the queue, and the next server takes them.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::Stream;

use crate::guarded_listener::accept_loop;
use crate::guarded_stream::GuardedStream;
use crate::port_limits::PortLimits;

/// The accepted connections of one listener, for one server at a time (each clone is a handle
/// on the same queue); accepting stops when the last clone is dropped.
#[derive(Clone)]
pub struct HandedIncoming {
    queue: Arc<Mutex<mpsc::Receiver<io::Result<GuardedStream>>>>,
}

impl HandedIncoming {
    /// Starts accepting on `listener` under `limits`.
    pub fn new(listener: TcpListener, limits: &PortLimits) -> Self {
        Self { queue: Arc::new(Mutex::new(accept_loop(listener, limits))) }
    }
}

impl Stream for HandedIncoming {
    type Item = io::Result<GuardedStream>;

    /// Takes the next connection; the queue gives a connection only to a poll that returns it
    /// (`poll_recv` is cancel-safe), so none is lost between two servers.
    fn poll_next(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.poll_recv(context)
    }
}

#[cfg(test)]
mod tests;
