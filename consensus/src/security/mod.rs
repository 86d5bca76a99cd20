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

use tonic::transport::Endpoint;

pub use auth_layer::{Auth, AuthLayer};
pub use files::SecurityFiles;
pub use rpc_channel::RpcChannel;
pub use tls::Tls;
pub use token::{Token, TOKEN_BYTES_MAX, TOKEN_BYTES_MIN};

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

    /// `http://addr` or, with TLS, `https://addr` configured with this process's certificates.
    pub fn endpoint(&self, addr: &str) -> Result<Endpoint, SecurityError> {
        let endpoint_error =
            |reason: String| SecurityError::Endpoint { addr: addr.to_string(), reason };
        let Some(tls) = &self.tls else {
            return Endpoint::from_shared(format!("http://{addr}"))
                .map_err(|error| endpoint_error(error.to_string()));
        };
        Endpoint::from_shared(format!("https://{addr}"))
            .and_then(|endpoint| endpoint.tls_config(tls.client_config()))
            .map_err(|error| endpoint_error(error.to_string()))
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
