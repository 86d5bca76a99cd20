//! `Tls`: the certificates from `--tls-cert`, `--tls-key` and `--tls-ca`, as tonic's server
//! and client TLS configurations (rustls). With a CA, servers demand client certificates it
//! signed (mutual TLS) and clients trust only servers it signed; without one, clients trust
//! the system's roots and servers ask for no client certificate.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, Server, ServerTlsConfig};

use super::{SecurityError, SecurityFiles};

/// A TLS handshake that has not finished after this long is dropped, so a peer that opens
/// connections and says nothing cannot hold them.
const HANDSHAKE_TIMEOUT_MS: u64 = 10_000;

/// Loaded, validated TLS material.
#[derive(Clone, Debug)]
pub struct Tls {
    identity: Option<Identity>,
    ca: Option<Certificate>,
    /// The certificate served on the HTTP port (`https_config`), built at load.
    https: Option<Arc<rustls::ServerConfig>>,
}

impl Tls {
    /// Reads and checks the files named by `files`. `--tls-cert` and `--tls-key` come
    /// together; returns `None` when no TLS flag is given.
    pub fn load(files: &SecurityFiles) -> Result<Option<Self>, SecurityError> {
        let pems = match (&files.tls_cert, &files.tls_key) {
            (Some(cert), Some(key)) => Some((read("--tls-cert", cert)?, read("--tls-key", key)?)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(SecurityError::Pair { given: "--tls-cert", missing: "--tls-key" })
            }
            (None, Some(_)) => {
                return Err(SecurityError::Pair { given: "--tls-key", missing: "--tls-cert" })
            }
        };
        let ca = files.tls_ca.as_deref().map(|path| read("--tls-ca", path)).transpose()?;
        if pems.is_none() && ca.is_none() {
            return Ok(None);
        }
        let https = pems.as_ref().map(|(cert, key)| https_config(cert, key, files)).transpose()?;
        let identity = pems.map(|(cert, key)| Identity::from_pem(cert, key));
        let tls = Self { identity, ca: ca.map(Certificate::from_pem), https };
        tls.check(files)?;
        Ok(Some(tls))
    }

    /// Builds both configurations once, so a bad PEM file fails at start with its name
    /// instead of at the first connection.
    fn check(&self, files: &SecurityFiles) -> Result<(), SecurityError> {
        if let Some(config) = self.server_config() {
            Server::builder().tls_config(config).map_err(|error| SecurityError::BadPem {
                flags: "--tls-cert/--tls-key",
                path: files.tls_cert.clone().unwrap_or_default(),
                reason: error_chain(&error),
            })?;
        }
        let client = Endpoint::from_static("https://localhost").tls_config(self.client_config());
        client.map_err(|error| SecurityError::BadPem {
            flags: if files.tls_ca.is_some() { "--tls-ca" } else { "--tls-cert/--tls-key" },
            path: files.tls_ca.clone().or_else(|| files.tls_cert.clone()).unwrap_or_default(),
            reason: error_chain(&error),
        })?;
        Ok(())
    }

    /// The server side, or `None` when there is no certificate to serve.
    pub fn server_config(&self) -> Option<ServerTlsConfig> {
        let identity = self.identity.clone()?;
        let config = ServerTlsConfig::new()
            .identity(identity)
            .timeout(Duration::from_millis(HANDSHAKE_TIMEOUT_MS));
        Some(match &self.ca {
            Some(ca) => config.client_ca_root(ca.clone()),
            None => config,
        })
    }

    /// The client side: present the certificate if there is one; trust the CA, or the
    /// system's roots without one.
    pub fn client_config(&self) -> ClientTlsConfig {
        let config = match &self.ca {
            Some(ca) => ClientTlsConfig::new().ca_certificate(ca.clone()),
            None => ClientTlsConfig::new().with_native_roots(),
        };
        match &self.identity {
            Some(identity) => config.identity(identity.clone()),
            None => config,
        }
    }

    /// The HTTP port's TLS: this process's certificate, no client certificate asked (browsers
    /// read the dashboard; see the README on who can reach it), HTTP/2 or HTTP/1.1 by ALPN.
    /// `None` without a certificate.
    pub fn https_config(&self) -> Option<Arc<rustls::ServerConfig>> {
        self.https.clone()
    }

    /// Whether this process can serve TLS (it has a certificate and key).
    pub fn can_serve(&self) -> bool {
        self.identity.is_some()
    }
}

/// The HTTP port's server configuration from the PEM files' bytes.
fn https_config(
    cert: &[u8],
    key: &[u8],
    files: &SecurityFiles,
) -> Result<Arc<rustls::ServerConfig>, SecurityError> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |reason: String| SecurityError::BadPem {
        flags: "--tls-cert/--tls-key",
        path: files.tls_cert.clone().unwrap_or_default(),
        reason,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<_, _>>()
        .map_err(|error| bad(error.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|error| bad(error.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| bad(error.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|error| bad(error.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, SecurityError> {
    std::fs::read(path).map_err(|error| SecurityError::Read {
        flag,
        path: path.to_path_buf(),
        reason: error.to_string(),
    })
}

/// An error with its sources, which hold the useful part (the PEM or rustls complaint).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
