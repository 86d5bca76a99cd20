//! `RendezvousClient` (native half): one torchrun rendezvous run's keys on the master group,
//! through `client::MasterClient` (leader discovery, redirects, retries inside the deadline,
//! one stamp per write so a retried `add` counts once, TLS and the token). The Python
//! `raftrain.rendezvous` module builds torch's `Store` and `RendezvousBackend` on it.

use std::sync::Arc;
use std::time::Duration;

use client::{MasterClient, RendezvousEntry, RendezvousWrite, RendezvousWritten};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::connection::Connection;
use crate::errors::{guarded, Failure};
use crate::process_bound::ProcessBound;
use crate::runtime::wait;

/// The longest wait a read may ask for (a day), in seconds.
const WAIT_S_MAX: f64 = 86_400.0;

/// A key's value and version, as Python sees it.
type Entry = Option<(Py<PyBytes>, u64)>;

#[pyclass(module = "raftrain._native", frozen)]
pub struct RendezvousClient {
    process: ProcessBound,
    master: Arc<MasterClient>,
    run: String,
}

#[pymethods]
impl RendezvousClient {
    /// The keys of rendezvous run `run` on the masters at `masters`; every call retries across
    /// leader changes for up to `deadline_s` seconds.
    #[new]
    #[pyo3(signature = (masters, run, tls_ca=None, tls_cert=None, tls_key=None, token_file=None, deadline_s=60.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        masters: Vec<String>,
        run: String,
        tls_ca: Option<std::path::PathBuf>,
        tls_cert: Option<std::path::PathBuf>,
        tls_key: Option<std::path::PathBuf>,
        token_file: Option<std::path::PathBuf>,
        deadline_s: Option<f64>,
    ) -> PyResult<Self> {
        guarded("RendezvousClient", || {
            if run.is_empty() {
                return Err(Failure::invalid("the rendezvous run id (--rdzv-id) is empty").into());
            }
            let job = String::new();
            let connection =
                Connection { masters, tls_ca, tls_cert, tls_key, token_file, deadline_s, job };
            let master = connection.master_client()?;
            Ok(Self { process: ProcessBound::here(), master, run })
        })
    }

    /// The run's id.
    #[getter]
    fn run(&self) -> String {
        self.run.clone()
    }

    /// `key = value`; the version written.
    fn set(&self, py: Python<'_>, key: String, value: Vec<u8>) -> PyResult<u64> {
        let written = self.write(py, "set", key, RendezvousWrite::Set(value))?;
        Ok(written.entry.map_or(0, |entry| entry.version))
    }

    /// c10d's compare_set: `(value after, version after, whether this call set it)`; the value
    /// is `None` when the key is absent.
    fn compare_set(
        &self,
        py: Python<'_>,
        key: String,
        expected: Vec<u8>,
        value: Vec<u8>,
    ) -> PyResult<(Entry, bool)> {
        let written =
            self.write(py, "compare_set", key, RendezvousWrite::CompareSet { expected, value })?;
        Ok((entry(py, written.entry), written.set))
    }

    /// Writes `value` if the key's version is `version` (0: only if absent): `((value,
    /// version) after or None, whether this call set it)`.
    fn compare_version(
        &self,
        py: Python<'_>,
        key: String,
        version: u64,
        value: Vec<u8>,
    ) -> PyResult<(Entry, bool)> {
        let write = RendezvousWrite::CompareVersion { version, value };
        let written = self.write(py, "compare_version", key, write)?;
        Ok((entry(py, written.entry), written.set))
    }

    /// c10d's add: the key's integer plus `delta`, counted once however often retried.
    fn add(&self, py: Python<'_>, key: String, delta: i64) -> PyResult<i64> {
        Ok(self.write(py, "add", key, RendezvousWrite::Add(delta))?.count)
    }

    /// Removes the key; whether it existed.
    fn delete(&self, py: Python<'_>, key: String) -> PyResult<bool> {
        Ok(self.write(py, "delete", key, RendezvousWrite::Delete)?.existed)
    }

    /// The `(value, version)` of each of `keys` (`None`: absent), waiting up to `wait_s`
    /// seconds for all of them to exist, and how many keys the run holds.
    #[pyo3(signature = (keys, wait_s=0.0))]
    fn read(&self, py: Python<'_>, keys: Vec<String>, wait_s: f64) -> PyResult<(Vec<Entry>, u64)> {
        guarded("read", || {
            self.process.check("RendezvousClient")?;
            if !(0.0..=WAIT_S_MAX).contains(&wait_s) {
                return Err(Failure::invalid(format!(
                    "wait_s {wait_s} is outside [0, {WAIT_S_MAX}]"
                ))
                .into());
            }
            let (master, run) = (self.master.clone(), self.run.clone());
            let reading = async move {
                master.rendezvous_read(&run, &keys, Duration::from_secs_f64(wait_s)).await
            };
            let (entries, key_count) = wait(py, reading)?.map_err(Failure::from)?;
            Ok((entries.into_iter().map(|found| entry(py, found)).collect(), key_count))
        })
    }

    /// Removes the whole run; whether it existed.
    fn delete_run(&self, py: Python<'_>) -> PyResult<bool> {
        guarded("delete_run", || {
            self.process.check("RendezvousClient")?;
            let (master, run) = (self.master.clone(), self.run.clone());
            let deleted = wait(py, async move { master.delete_rendezvous(&run).await })?;
            Ok(deleted.map_err(Failure::from)?)
        })
    }
}

impl RendezvousClient {
    fn write(
        &self,
        py: Python<'_>,
        call: &'static str,
        key: String,
        write: RendezvousWrite,
    ) -> PyResult<RendezvousWritten> {
        guarded(call, || {
            self.process.check("RendezvousClient")?;
            let (master, run) = (self.master.clone(), self.run.clone());
            let writing = async move { master.rendezvous_write(&run, &key, write).await };
            Ok(wait(py, writing)?.map_err(Failure::from)?)
        })
    }
}

fn entry(py: Python<'_>, entry: Option<RendezvousEntry>) -> Entry {
    entry.map(|entry| (PyBytes::new(py, &entry.value).unbind(), entry.version))
}
