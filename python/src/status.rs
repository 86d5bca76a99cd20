//! `status`: the job as the leader sees it, without registering a trainer (what
//! `raftrain status --json` prints, through the same typed client).

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::connection::Connection;
use crate::errors::{guarded, Failure};
use crate::runtime::wait;

/// The job's status as JSON text, with the keys of `raftrain status --json`.
#[pyfunction]
#[pyo3(signature = (masters, tls_ca=None, tls_cert=None, tls_key=None, token_file=None, deadline_s=None))]
pub fn status_json(
    py: Python<'_>,
    masters: Vec<String>,
    tls_ca: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    token_file: Option<PathBuf>,
    deadline_s: Option<f64>,
) -> PyResult<String> {
    guarded("status", || {
        let connection = Connection { masters, tls_ca, tls_cert, tls_key, token_file, deadline_s };
        let master = connection.master_client()?;
        let status = wait(py, async move { master.status().await })?;
        Ok(status.map_err(Failure::from)?.to_json().to_string())
    })
}
