//! The RPC platform every raftrain process stands on: who may connect and how, how much a
//! connection may make a server hold, and what every server measures. Nothing here knows Raft,
//! tasks or parameters.
//!
//! Code map:
//! - `security`: TLS on every connection and the cluster token on every call ([`Security`],
//!   loaded once from the command line's files).
//! - `endpoint` and `server_builder`: the only ways a client dials and a server is built, with
//!   the message and HTTP/2 window sizes they agree on. A tidy test keeps tonic's own
//!   constructors out of every other file.
//! - `port_limits` ([`PortLimits`]) bounds what a peer can make a server hold: connections
//!   (`guarded_listener`, `guarded_stream`: connection count, first bytes, idle time), and the
//!   bytes of unfinished requests (`request_budget`, `budget_body`, `grpc_framing`).
//! - `grpc_conventions`: `grpc.health.v1` ([`GrpcHealth`]) and server reflection, mounted on
//!   every server ([`conventional_router`]) and health also on the metrics port; its `Watch`
//!   streams bounded per connection and in all (`health_watches`).
//! - `unary`: unary calls whose large messages go to h2 and come from it as `Bytes` pieces,
//!   without tonic's codec buffers (the pservers' data plane).
//! - `clock`: where a master or a pserver reads time (a seam the simulation fills).
//! - `rpc_metrics`: every call's latency and errors; `telemetry`: the process's Prometheus
//!   recorder; `metrics_http`: the `/metrics`, `/healthz` and `/readyz` server (and what a
//!   process adds, a master's dashboard), on `sniffing_listener`: TLS and plain HTTP on one
//!   port, told apart by each connection's first byte; `http_server` serves it with a bound on
//!   header reads, and `http_connections` makes room for a probe on a full port.
//!
//! Architecture invariants:
//! - No server is built and no endpoint dialled except through [`server_builder`] and
//!   [`endpoint`] (or `Security::endpoint`), so nothing skips TLS, the token or the limits.
//! - Each crate describes the metrics it records next to its own code; this crate describes
//!   only the build's and the RPC layer's.

mod budget_body;
mod call_stream;
pub mod clock;
pub mod endpoint;
pub mod grpc_conventions;
mod grpc_framing;
mod guarded_listener;
mod guarded_stream;
mod handed_incoming;
pub mod health_watches;
mod http_connections;
mod http_server;
mod lingering_close;
pub mod metrics_http;
pub mod planted;
pub mod port_limits;
mod request_budget;
pub mod rpc_metrics;
pub mod security;
mod serve_in_order;
mod server_builder;
mod sniffing_listener;
pub mod telemetry;
pub mod unary;

pub use call_stream::{CallStream, StreamFailure};
pub use endpoint::{endpoint, CONNECTION_WINDOW_BYTES, MESSAGE_BYTES_MAX, STREAM_WINDOW_BYTES};
pub use grpc_conventions::{conventional_router, GrpcHealth, ServerRouter};
pub use guarded_listener::{incoming, GuardedListener};
pub use guarded_stream::GuardedStream;
pub use handed_incoming::HandedIncoming;
pub use port_limits::PortLimits;
pub use security::Security;
pub use serve_in_order::{serve_in_order, Answered};
pub use server_builder::{server_builder, ServerBuilder, ServerLayers};
pub use sniffing_listener::{HttpPeer, HttpStream, SniffingListener};
