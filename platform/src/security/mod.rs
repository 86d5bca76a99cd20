//! Who may talk to a raftrain process: TLS on every gRPC connection (Raft traffic included)
//! and a shared cluster token on every call. [`Security`] is loaded once from the command
//! line's files and handed to every server builder and every client channel.

mod auth_layer;
mod files;
mod rpc_channel;
mod tls;
mod token;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tonic::transport::Endpoint;

pub use auth_layer::{Auth, AuthLayer};
pub use files::SecurityFiles;
pub use rpc_channel::RpcChannel;
pub use tls::Tls;
pub use token::{Token, TOKEN_BYTES_MAX, TOKEN_BYTES_MIN};

/// How often a client pings each connection, idle or not (HTTP/2 PING). A master paused
/// (SIGSTOP) or cut off without a reset keeps its TCP connections open for ever; only a ping
/// that goes unanswered tells the client. 2 s: a failover elects a new leader within one
/// election timeout (150-300 ms by default), so the 5 s of interval and timeout together is what
/// a client on a dead connection loses, and it is no longer than the default trainer and
/// pserver leases (5 s): a trainer whose `WatchPServers` stream sits on a paused leader learns
/// of a standby's claim (possible only after the old holder's lease ends) at about the time it
/// becomes possible. A ping is 17 bytes every 2 s per connection: nothing.
pub const KEEPALIVE_INTERVAL_MS: u64 = 2_000;
/// How long a ping may go unanswered before the connection is closed (and every call and
/// stream on it fails with UNAVAILABLE). 3 s, not less: on a loaded machine a healthy peer
/// answers within milliseconds, and one that cannot answer a ping in 3 s cannot serve a call
/// within its 2 s attempt deadline either. Servers answer pings without limit (h2's server has
/// no ping-abuse policy, and no raftrain server sets one).
pub const KEEPALIVE_TIMEOUT_MS: u64 = 3_000;

/// A security flag that cannot work, named with its file and the reason.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error("{flag} {}: {reason}", path.display())]
    Read { flag: &'static str, path: PathBuf, reason: String },
    #[error("--token-file {}: {reason}", path.display())]
    BadToken { path: PathBuf, reason: String },
    #[error("{given} needs {missing} too")]
    Pair { given: &'static str, missing: &'static str },
    #[error("{flags} {}: not usable: {reason}", path.display())]
    BadPem { flags: &'static str, path: PathBuf, reason: String },
    #[error("this server has --tls-ca but no certificate to serve: give --tls-cert and --tls-key")]
    ServerWithoutCertificate,
    #[error("cannot build a TLS endpoint for {addr}: {reason}")]
    Endpoint { addr: String, reason: String },
}

/// TLS and token settings of one process; the default is neither (plain, open).
#[derive(Clone, Debug, Default)]
pub struct Security {
    tls: Option<Arc<Tls>>,
    token: Option<Arc<Token>>,
}

impl Security {
    /// Loads and checks every file `files` names.
    pub fn load(files: &SecurityFiles) -> Result<Self, SecurityError> {
        let tls = Tls::load(files)?.map(Arc::new);
        let token = files.token_file.as_deref().map(Token::from_file).transpose()?.map(Arc::new);
        Ok(Self { tls, token })
    }

    /// Like [`Security::load`], for a process that serves gRPC: TLS flags must include the
    /// certificate it serves.
    pub fn load_for_server(files: &SecurityFiles) -> Result<Self, SecurityError> {
        let security = Self::load(files)?;
        match &security.tls {
            Some(tls) if !tls.can_serve() => Err(SecurityError::ServerWithoutCertificate),
            _ => Ok(security),
        }
    }

    /// Settings built in memory (tests, `demo --secure`).
    pub fn new(tls: Option<Tls>, token: Option<Token>) -> Self {
        Self { tls: tls.map(Arc::new), token: token.map(Arc::new) }
    }

    /// Whether connections use TLS.
    pub fn tls(&self) -> Option<&Tls> {
        self.tls.as_deref()
    }

    /// The cluster token, if one is set.
    pub fn token(&self) -> Option<&Token> {
        self.token.as_deref()
    }

    /// `http://addr` or, with TLS, `https://addr` configured with this process's certificates,
    /// with HTTP/2 keepalive (`KEEPALIVE_INTERVAL_MS`, `KEEPALIVE_TIMEOUT_MS`), so that a call
    /// or stream on a dead connection fails within seconds instead of waiting for ever.
    pub fn endpoint(&self, addr: &str) -> Result<Endpoint, SecurityError> {
        let endpoint_error =
            |reason: String| SecurityError::Endpoint { addr: addr.to_string(), reason };
        let endpoint = match &self.tls {
            None => Endpoint::from_shared(format!("http://{addr}")),
            Some(tls) => Endpoint::from_shared(format!("https://{addr}"))
                .and_then(|endpoint| endpoint.tls_config(tls.client_config())),
        };
        let endpoint = endpoint.map_err(|error| endpoint_error(error.to_string()))?;
        Ok(endpoint
            .http2_keep_alive_interval(Duration::from_millis(KEEPALIVE_INTERVAL_MS))
            .keep_alive_timeout(Duration::from_millis(KEEPALIVE_TIMEOUT_MS))
            .keep_alive_while_idle(true))
    }

    /// A lazily connecting channel to `endpoint` that sends the token on every call.
    pub fn channel(&self, endpoint: &Endpoint) -> RpcChannel {
        let authorization = self.token.as_ref().map(|token| token.header().clone());
        RpcChannel::new(endpoint.connect_lazy(), authorization)
    }

    /// The server-side check of the token, for a server's layer stack.
    pub fn auth_layer(&self) -> AuthLayer {
        AuthLayer::new(self.token.clone())
    }
}
