//! `SecurityFiles`: the `--tls-cert`, `--tls-key`, `--tls-ca` and `--token-file` flags every
//! server and client subcommand shares.

use std::path::PathBuf;

/// The files a process's TLS and token come from. No flag means plain TCP and no token.
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct SecurityFiles {
    /// This process's certificate (PEM) for TLS on every gRPC connection; with --tls-key.
    /// Servers (masters, pservers) serve it; clients present it when servers demand one.
    #[arg(long, env = "RAFTRAIN_TLS_CERT", value_name = "PEM")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, env = "RAFTRAIN_TLS_KEY", value_name = "PEM")]
    pub tls_key: Option<PathBuf>,
    /// The CA (PEM) that signs the cluster's certificates: peers are trusted only if it
    /// signed theirs, and servers then demand client certificates (mutual TLS). Without it,
    /// clients trust the system's roots and servers ask for no client certificate.
    #[arg(long, env = "RAFTRAIN_TLS_CA", value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,
    /// A file holding the cluster's shared secret (16-4096 visible ASCII characters): sent
    /// on every call, and required of every caller (Raft peers included) when given.
    #[arg(long, env = "RAFTRAIN_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

impl SecurityFiles {
    /// The same files as command-line arguments, to start a child process with.
    pub fn to_args(&self) -> Vec<String> {
        let flags = [
            ("--tls-cert", &self.tls_cert),
            ("--tls-key", &self.tls_key),
            ("--tls-ca", &self.tls_ca),
            ("--token-file", &self.token_file),
        ];
        let mut args = Vec::new();
        for (flag, path) in flags {
            if let Some(path) = path {
                args.push(flag.to_string());
                args.push(path.display().to_string());
            }
        }
        args
    }
}
