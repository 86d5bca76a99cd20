//! [`server_builder`]: the one way a raftrain gRPC server is built, so none can skip TLS, the
//! token, the RPC metrics or the port's limits.

use std::time::Duration;

use tonic::transport::Server;
use tower::layer::util::{Identity, Stack};

use crate::endpoint::{CONNECTION_WINDOW_BYTES, STREAM_WINDOW_BYTES};
use crate::port_limits::{PortLimits, SERVER_KEEPALIVE_MS, STREAMS_PER_CONNECTION_MAX};
use crate::request_budget::RequestBudgetLayer;
use crate::rpc_metrics::RpcMetricsLayer;
use crate::security::{AuthLayer, Security, SecurityError};

/// The layers of every raftrain gRPC server: calls are measured, then their token is checked,
/// then their request body is put under the server's byte budget and deadline.
pub type ServerLayers =
    Stack<RequestBudgetLayer, Stack<AuthLayer, Stack<RpcMetricsLayer, Identity>>>;

/// Every raftrain gRPC server (see [`ServerLayers`]).
pub type ServerBuilder = Server<ServerLayers>;

/// A tonic server builder with the HTTP/2 windows multi-megabyte messages need, every call
/// measured ([`RpcMetricsLayer`]), `security`'s TLS and token check ([`AuthLayer`]), and
/// `limits`' bounds on streams per connection and unfinished request bytes
/// ([`RequestBudgetLayer`]). Serve it with [`crate::incoming`] for the connection bounds.
pub fn server_builder(
    security: &Security,
    limits: &PortLimits,
) -> Result<ServerBuilder, SecurityError> {
    let builder = match security.tls().and_then(|tls| tls.server_config()) {
        Some(config) => {
            // A TLS handshake must finish as soon as a silent connection would be closed.
            let config = config.timeout(limits.first_bytes());
            Server::builder().tls_config(config).map_err(|error| SecurityError::BadPem {
                flags: "--tls-cert/--tls-key",
                path: Default::default(),
                reason: error.to_string(),
            })?
        }
        None => Server::builder(),
    };
    Ok(builder
        .initial_stream_window_size(STREAM_WINDOW_BYTES)
        .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
        .http2_keepalive_interval(Some(Duration::from_millis(SERVER_KEEPALIVE_MS)))
        .max_concurrent_streams(STREAMS_PER_CONNECTION_MAX)
        .layer(RpcMetricsLayer)
        .layer(security.auth_layer())
        .layer(RequestBudgetLayer::new(limits)))
}
