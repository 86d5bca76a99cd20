//! The sizes every raftrain gRPC connection agrees on, and [`endpoint`], the one way a client
//! dials a raftrain port: the process's TLS, a connect timeout, no Nagle delay, and HTTP/2
//! windows large enough that a multi-megabyte message is not throttled.

use std::time::Duration;

use tonic::transport::Endpoint;

use crate::security::{Security, SecurityError};

/// A gRPC message (request or reply) may be at most this large on the Raft and master ports;
/// snapshot chunks and status replies are smaller.
pub const MESSAGE_BYTES_MAX: usize = 64 * 1024 * 1024;
/// HTTP/2 flow-control window per stream, so a multi-megabyte chunk is not throttled.
pub const STREAM_WINDOW_BYTES: u32 = 16 * 1024 * 1024;
/// HTTP/2 flow-control window per connection.
pub const CONNECTION_WINDOW_BYTES: u32 = 64 * 1024 * 1024;

/// An endpoint for `addr` with `security`'s TLS, giving up on a TCP connect after
/// `connect_timeout`, with `tcp_nodelay` and the windows above. Make a channel of it with
/// [`Security::channel`], which adds the token to every call.
pub fn endpoint(
    security: &Security,
    addr: &str,
    connect_timeout: Duration,
) -> Result<Endpoint, SecurityError> {
    Ok(security
        .endpoint(addr)?
        .connect_timeout(connect_timeout)
        .tcp_nodelay(true)
        .initial_stream_window_size(STREAM_WINDOW_BYTES)
        .initial_connection_window_size(CONNECTION_WINDOW_BYTES))
}
