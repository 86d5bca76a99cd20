//! `status`: a job (by name, or the group's only one) as the leader sees it, without
//! registering a trainer (what
//! `raftrain status --json` prints, through the same typed client).

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::connection::Connection;
use crate::errors::{guarded, Failure};
use crate::runtime::wait;

/// The job's status as JSON text, with the keys of `raftrain status --json`.
#[pyfunction]
#[pyo3(signature = (masters, job=String::new(), tls_ca=None, tls_cert=None, tls_key=None, token_file=None, deadline_s=None))]
#[allow(clippy::too_many_arguments)]
pub fn status_json(
    py: Python<'_>,
    masters: Vec<String>,
    job: String,
    tls_ca: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    token_file: Option<PathBuf>,
    deadline_s: Option<f64>,
) -> PyResult<String> {
    guarded("status", || {
        let connection =
            Connection { masters, tls_ca, tls_cert, tls_key, token_file, deadline_s, job };
        let master = connection.master_client()?;
        let status = wait(py, async move { status_with_jobs(&master).await })?;
        Ok(status.map_err(Failure::from)?)
    })
}

/// The client's job's status as `raftrain status --json` prints it (without the members' own
/// views, which the command line asks each master for): the job's keys, every job and every
/// rendezvous run, as JSON text.
pub async fn status_with_jobs(
    master: &client::MasterClient,
) -> Result<String, client::ClientError> {
    let mut value = master.status().await?.to_json();
    value["jobs"] = master.list_jobs().await?.to_json()["jobs"].clone();
    let (runs, _) = master.list_rendezvous().await?;
    value["rendezvous"] = runs.iter().map(client::RendezvousRun::to_json).collect();
    Ok(value.to_string())
}
