//! `PortLimits`: the bounds every listening port of a raftrain process keeps on what a client
//! may hold (connections, silence, unfinished request bytes, streams), as flags with defaults.
//!
//! Each limit exists because its absence let a client take a process down with little effort
//! (issue 21): silent sockets used up the file descriptors, and slow streams that announced
//! huge messages held memory for ever. Every limit admits what a real client needs: a live
//! HTTP/2 client is heard at least every `SERVER_KEEPALIVE_MS` (its pong to the server's ping,
//! and its own pings every `KEEPALIVE_INTERVAL_MS`), so it never idles out; the largest
//! legitimate message (`MESSAGE_BYTES_MAX`) fits the byte budget; a message arrives well within
//! the body deadline on any working network.

use std::time::Duration;

use clap::Args;

use crate::endpoint::MESSAGE_BYTES_MAX;

/// How often a server pings an HTTP/2 client that has been quiet: its pong is what a silent
/// but live connection is heard by.
pub const SERVER_KEEPALIVE_MS: u64 = 10_000;
/// A new connection that sends nothing (no TLS hello, no HTTP/2 preface, no request) for this
/// long is closed.
pub const FIRST_BYTES_MS_DEFAULT: u64 = 10_000;
/// A connection from which nothing arrives for this long is closed: six server pings
/// unanswered, far beyond any live client.
pub const IDLE_MS_DEFAULT: u64 = 6 * SERVER_KEEPALIVE_MS;
/// A request body (every message of it) must have arrived this long after the call started,
/// or the call fails with `DEADLINE_EXCEEDED` and its bytes are released: a 64 MiB message needs
/// only 2.2 MB/s. Responses (a `WatchPServers` stream) are not bounded by it, and no master,
/// pserver or Raft call streams its request (the key-value bench's `PutStream` does, and its
/// server sets a day).
pub const REQUEST_BODY_MS_DEFAULT: u64 = 30_000;
/// The most message bytes the calls of one server may have announced (in their 5-byte gRPC
/// prefixes) and not yet received: sixteen of the largest Raft messages, room for a whole push
/// of a 100M-parameter model to one pserver (400 MB in 4 MiB requests sent at once). A message
/// that does not fit waits a moment for room, then fails with `RESOURCE_EXHAUSTED`. What it
/// bounds is mostly reserved address space: a slow call's resident cost is about 2 MB.
pub const REQUEST_BYTES_IN_FLIGHT_DEFAULT: u64 = 16 * MESSAGE_BYTES_MAX as u64;
/// On the metrics port, a request's headers must have arrived this long after its connection
/// opened (or, over HTTP/1, after the previous response): a probe or a scrape sends them at
/// once, and a client dribbling them a byte at a time holds its connection no longer.
pub const HTTP_HEADER_READ_MS_DEFAULT: u64 = 5_000;
/// The most concurrent HTTP/2 streams (calls) one connection may open; a raftrain client
/// never has more than a few in flight.
pub const STREAMS_PER_CONNECTION_MAX: u32 = 256;
/// File descriptors kept out of the connection caps for everything else a process opens
/// (its data files, sled, checkpoint files, its own client connections).
pub const FD_RESERVE_COUNT: u64 = 64;
/// How many listeners the derived per-listener cap assumes (a master's client port, its
/// peer port and its metrics port).
const LISTENER_COUNT: u64 = 3;
/// The derived connection cap never goes below this (a tiny fd limit still serves a few
/// clients) nor above `CONNECTIONS_DERIVED_MAX`.
const CONNECTIONS_DERIVED_MIN: u64 = 8;
const CONNECTIONS_DERIVED_MAX: u64 = 16_384;
/// The fd limit assumed when `/proc/self/limits` cannot be read.
const FD_LIMIT_FALLBACK: u64 = 1024;

/// The limits of every listening port (gRPC and metrics) of one process.
#[derive(Debug, Clone, Args)]
pub struct PortLimits {
    /// The most connections each listening port (gRPC, metrics) keeps open at once; more are
    /// accepted and closed at once, with a warning (the metrics port instead closes its oldest
    /// connection with no request in progress, so probes still get in). Default: derived from the file descriptor
    /// limit (RLIMIT_NOFILE) so that every port full still leaves descriptors for real work.
    #[arg(long, env = "RAFTRAIN_CONNECTIONS_MAX")]
    pub connections_max: Option<u64>,
    /// Close a connection that sends nothing for this long after it was accepted.
    #[arg(long, env = "RAFTRAIN_FIRST_BYTES_MS", default_value_t = FIRST_BYTES_MS_DEFAULT)]
    pub first_bytes_ms: u64,
    /// Close a connection from which nothing arrives for this long (live HTTP/2 clients
    /// answer the server's ping every 10 s, so they never idle out).
    #[arg(long, env = "RAFTRAIN_IDLE_MS", default_value_t = IDLE_MS_DEFAULT)]
    pub idle_ms: u64,
    /// Fail a call (DEADLINE_EXCEEDED) whose request has not fully arrived this long after it
    /// started, releasing what it announced.
    #[arg(long, env = "RAFTRAIN_REQUEST_BODY_MS", default_value_t = REQUEST_BODY_MS_DEFAULT)]
    pub request_body_ms: u64,
    /// The most request message bytes a gRPC server admits announced but not yet received,
    /// over all its calls; a message beyond it waits up to a second for room, then its call
    /// fails (RESOURCE_EXHAUSTED). At least the largest message (64 MiB for Raft, 80 MiB for
    /// a pserver), below 4 GiB.
    #[arg(long, env = "RAFTRAIN_REQUEST_BYTES_IN_FLIGHT", default_value_t = REQUEST_BYTES_IN_FLIGHT_DEFAULT)]
    pub request_bytes_in_flight: u64,
    /// Close a metrics-port connection whose request headers have not all arrived this long
    /// after it opened (or after its previous response).
    #[arg(long, env = "RAFTRAIN_HTTP_HEADER_READ_MS", default_value_t = HTTP_HEADER_READ_MS_DEFAULT)]
    pub http_header_read_ms: u64,
}

impl Default for PortLimits {
    fn default() -> Self {
        Self {
            connections_max: None,
            first_bytes_ms: FIRST_BYTES_MS_DEFAULT,
            idle_ms: IDLE_MS_DEFAULT,
            request_body_ms: REQUEST_BODY_MS_DEFAULT,
            request_bytes_in_flight: REQUEST_BYTES_IN_FLIGHT_DEFAULT,
            http_header_read_ms: HTTP_HEADER_READ_MS_DEFAULT,
        }
    }
}

impl PortLimits {
    /// The rules between the limits, checked before anything is bound, for a process whose
    /// services accept messages of up to `message_bytes_max`.
    pub fn validate(&self, message_bytes_max: usize) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.request_bytes_in_flight >= message_bytes_max as u64
                && self.request_bytes_in_flight <= u64::from(u32::MAX),
            "--request-bytes-in-flight {} must admit the largest message ({message_bytes_max} \
             bytes) and stay below 4 GiB",
            self.request_bytes_in_flight
        );
        anyhow::ensure!(self.connections_max != Some(0), "--connections-max must be at least 1");
        anyhow::ensure!(
            self.first_bytes_ms > 0
                && self.idle_ms > 0
                && self.request_body_ms > 0
                && self.http_header_read_ms > 0,
            "--first-bytes-ms, --idle-ms, --request-body-ms and --http-header-read-ms must be \
             positive"
        );
        Ok(())
    }

    /// The connection cap of one listener: the flag, or derived from the fd limit.
    pub fn connections(&self) -> usize {
        let derived = || {
            let free = fd_limit().saturating_sub(FD_RESERVE_COUNT) / LISTENER_COUNT;
            free.clamp(CONNECTIONS_DERIVED_MIN, CONNECTIONS_DERIVED_MAX)
        };
        let count = self.connections_max.unwrap_or_else(derived);
        usize::try_from(count).unwrap_or(usize::MAX)
    }

    pub fn first_bytes(&self) -> Duration {
        Duration::from_millis(self.first_bytes_ms)
    }

    pub fn idle(&self) -> Duration {
        Duration::from_millis(self.idle_ms)
    }

    pub fn request_body(&self) -> Duration {
        Duration::from_millis(self.request_body_ms)
    }

    pub fn http_header_read(&self) -> Duration {
        Duration::from_millis(self.http_header_read_ms)
    }
}

/// This process's soft limit on open files, from `/proc/self/limits`.
fn fd_limit() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/limits") else {
        return FD_LIMIT_FALLBACK;
    };
    text.lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(3))
        .and_then(|soft| soft.parse().ok())
        .unwrap_or(FD_LIMIT_FALLBACK)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derived cap leaves room for everything else under the fd limit.
    #[test]
    fn derived_cap_fits_the_fd_limit() {
        let limits = PortLimits::default();
        let cap = limits.connections() as u64;
        assert!(cap >= CONNECTIONS_DERIVED_MIN);
        assert!(cap * LISTENER_COUNT + FD_RESERVE_COUNT <= fd_limit().max(cap * 4));
        assert!(limits.validate(MESSAGE_BYTES_MAX).is_ok());
        assert!(limits.validate(REQUEST_BYTES_IN_FLIGHT_DEFAULT as usize + 1).is_err());
    }
}
