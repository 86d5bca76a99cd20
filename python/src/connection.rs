//! How a Python client reaches the masters: the addresses, TLS and token files and the call
//! deadline become the Rust client's `ClientOptions`, so discovery, redirects, retries, stamps,
//! TLS and the token are the Rust client's own.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use client::{ClientOptions, MasterClient};
use platform::security::{Security, SecurityFiles};

use crate::errors::Failure;

/// The longest call deadline a Python caller may ask for (a day); `None` asks for none.
const DEADLINE_S_MAX: f64 = 86_400.0;

/// What the Python constructors take, as given.
#[derive(Debug, Default)]
pub struct Connection {
    pub masters: Vec<String>,
    pub tls_ca: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub token_file: Option<PathBuf>,
    /// Seconds a call retries across leader changes; `None`: until a leader answers.
    pub deadline_s: Option<f64>,
    /// The job the client's calls name (empty: the group's only job).
    pub job: String,
}

impl Connection {
    /// The client options, with every file loaded and checked now (a bad PEM or token file
    /// fails here, naming the file).
    pub fn options(&self) -> Result<ClientOptions, Failure> {
        let files = SecurityFiles {
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            tls_ca: self.tls_ca.clone(),
            token_file: self.token_file.clone(),
        };
        let security = Security::load(&files)?;
        let call_deadline = match self.deadline_s {
            None => None,
            Some(seconds) if seconds > 0.0 && seconds <= DEADLINE_S_MAX => {
                Some(Duration::from_secs_f64(seconds))
            }
            Some(seconds) => {
                return Err(Failure::invalid(format!(
                "deadline_s {seconds} is outside (0, {DEADLINE_S_MAX}]; None waits without limit"
            )))
            }
        };
        let job = self.job.clone();
        Ok(ClientOptions { security, call_deadline, job, ..ClientOptions::default() })
    }

    /// A master client on these settings (it connects on its first call, to the leader
    /// another client of this process with the same addresses and credentials follows if one
    /// does: `leader_hints`).
    pub fn master_client(&self) -> Result<Arc<MasterClient>, Failure> {
        let masters: Vec<String> =
            self.masters.iter().map(|addr| addr.trim().to_string()).collect();
        let client = Arc::new(MasterClient::new(&masters, self.options()?)?);
        crate::leader_hints::share(&self.hint_key(&masters), &client);
        Ok(client)
    }

    /// What clients that may share a leader hint have alike: the addresses, and the files
    /// they authenticate with (a client without the group's token must meet its refusal where
    /// any such client does, in discovery, not at a leader another client found).
    fn hint_key(&self, masters: &[String]) -> Vec<String> {
        let files = [&self.tls_ca, &self.tls_cert, &self.tls_key, &self.token_file];
        let files = files.into_iter().map(|file| format!("{file:?}"));
        masters.iter().cloned().chain(files).collect()
    }
}
