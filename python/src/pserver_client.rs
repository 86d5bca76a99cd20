//! `PServerClient` (native half): the Rust `client::pserver::PServerClient` for Python. `init`
//! fixes the job's layout (from the parameters' names and shapes, the optimizer and the slot
//! count the master's table gives); `push` and `pull` then move whole tensors as little-endian
//! f32 buffers, so Python does no work per element.

use std::sync::Mutex;
use std::time::Duration;

use client::pserver::layout::{JobLayout, ParamSpec};
use client::pserver::{PServerClient as RustClient, PServerClientError, PServerClientOptions};
use optimizer::{OptimizerConfig, OptimizerKind};
use pyo3::prelude::*;
use pyo3::types::PyByteArray;

use crate::connection::Connection;
use crate::errors::{guarded, Failure};
use crate::example::floats;
use crate::process_bound::ProcessBound;
use crate::runtime::{runtime, wait};

/// A tensor as Python hands it over: name, shape, little-endian f32 bytes.
type Tensor = (String, Vec<u64>, Vec<u8>);
/// A pulled tensor as Python receives it: name, shape, little-endian f32 bytes.
type Pulled<'py> = (String, Vec<u64>, Bound<'py, PyByteArray>);

#[pyclass(module = "raftrain._native", frozen)]
pub struct PServerClient {
    process: ProcessBound,
    client: RustClient,
    /// How long to wait for every pserver slot to be held at `init`.
    slots_wait: Option<Duration>,
    layout: Mutex<Option<JobLayout>>,
}

#[pymethods]
impl PServerClient {
    #[new]
    #[pyo3(signature = (masters, initializer, job=String::new(), tls_ca=None, tls_cert=None, tls_key=None, token_file=None, deadline_s=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        masters: Vec<String>,
        initializer: u64,
        job: String,
        tls_ca: Option<std::path::PathBuf>,
        tls_cert: Option<std::path::PathBuf>,
        tls_key: Option<std::path::PathBuf>,
        token_file: Option<std::path::PathBuf>,
        deadline_s: Option<f64>,
    ) -> PyResult<Self> {
        guarded("PServerClient", || {
            let connection =
                Connection { masters, tls_ca, tls_cert, tls_key, token_file, deadline_s, job };
            let master = connection.master_client()?;
            let slots_wait = connection.options()?.call_deadline;
            let options = PServerClientOptions { replace_wait: slots_wait, ..Default::default() };
            let runtime = runtime().map_err(|error| Failure::new("INTERNAL", error.to_string()))?;
            // The client follows the master's pserver table on the runtime from now on.
            let client = {
                let _inside = runtime.enter();
                RustClient::new(master, initializer, options)
            };
            Ok(Self { process: ProcessBound::here(), client, slots_wait, layout: Mutex::new(None) })
        })
    }

    /// Waits for every slot, then offers the layout and initial values (the first
    /// initializer's values win; the others' must have the same layout).
    #[pyo3(signature = (tensors, optimizer, learning_rate, block_elements))]
    fn init(
        &self,
        py: Python<'_>,
        tensors: Vec<Tensor>,
        optimizer: &str,
        learning_rate: f32,
        block_elements: u32,
    ) -> PyResult<()> {
        guarded("PServerClient.init", || {
            self.process.check("PServerClient")?;
            let kind = optimizer_kind(optimizer)?;
            let values = tensor_values(&tensors)?;
            let client = self.client.clone();
            let slots_wait = self.slots_wait;
            let table = wait(py, async move { client.wait_for_slots(slots_wait).await })?
                .map_err(Failure::from)?;
            let params = tensors
                .iter()
                .map(|(name, shape, _)| ParamSpec { name: name.clone(), shape: shape.clone() })
                .collect();
            let optimizer = OptimizerConfig { learning_rate, kind };
            let layout = JobLayout { params, block_elements, slot_count: table.desired, optimizer };
            layout.validate().map_err(|error| Failure::invalid(error.to_string()))?;
            let client = self.client.clone();
            let offered = layout.clone();
            wait(py, async move {
                let borrowed: Vec<(&str, &[f32])> = values
                    .iter()
                    .map(|(name, values)| (name.as_str(), values.as_slice()))
                    .collect();
                client.init_or_wait(&offered, &borrowed).await
            })?
            .map_err(Failure::from)?;
            *self.layout.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(layout);
            Ok(())
        })
    }

    /// Applies gradients (some or every parameter) once; False when they were computed on a
    /// model a restore replaced since the last pull (refused, nothing applied).
    fn push(&self, py: Python<'_>, tensors: Vec<(String, Vec<u8>)>) -> PyResult<bool> {
        guarded("PServerClient.push", || {
            self.process.check("PServerClient")?;
            let layout = self.layout(py)?;
            let mut values = Vec::with_capacity(tensors.len());
            for (name, bytes) in &tensors {
                values.push((name.clone(), floats(name, bytes)?));
            }
            let client = self.client.clone();
            let pushed = wait(py, async move {
                let borrowed: Vec<(&str, &[f32])> = values
                    .iter()
                    .map(|(name, values)| (name.as_str(), values.as_slice()))
                    .collect();
                client.push(&layout, &borrowed).await
            })?;
            match pushed {
                Ok(()) => Ok(true),
                Err(PServerClientError::ModelRestored { .. }) => Ok(false),
                Err(error) => Err(Failure::from(error).into()),
            }
        })
    }

    /// The whole model: (name, shape, little-endian f32 bytes) per parameter.
    fn pull<'py>(&self, py: Python<'py>) -> PyResult<Vec<Pulled<'py>>> {
        guarded("PServerClient.pull", || {
            self.process.check("PServerClient")?;
            let layout = self.layout(py)?;
            let client = self.client.clone();
            let pulled = {
                let layout = layout.clone();
                wait(py, async move { client.pull(&layout).await })?.map_err(Failure::from)?
            };
            let mut tensors = Vec::with_capacity(layout.params.len());
            for param in &layout.params {
                let values = pulled.get(&param.name).map(Vec::as_slice).unwrap_or_default();
                let bytes = client::pserver::f32_bytes::encode(values);
                tensors.push((
                    param.name.clone(),
                    param.shape.clone(),
                    PyByteArray::new(py, &bytes),
                ));
            }
            Ok(tensors)
        })
    }
}

impl PServerClient {
    /// The layout `init` fixed, or else the one the job's pservers serve (asked once, waiting
    /// up to the client's deadline for a trainer to initialize them).
    fn layout(&self, py: Python<'_>) -> PyResult<JobLayout> {
        let known = self.layout.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        if let Some(layout) = known {
            return Ok(layout);
        }
        let (client, waiting) = (self.client.clone(), self.slots_wait);
        let served = wait(py, async move { client.served_layout(waiting).await })?;
        let served = served.map_err(Failure::from)?;
        *self.layout.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(served.clone());
        Ok(served)
    }
}

fn optimizer_kind(name: &str) -> Result<OptimizerKind, Failure> {
    Ok(match name {
        "sgd" => OptimizerKind::Sgd,
        "momentum" => OptimizerKind::MOMENTUM_DEFAULT,
        "adam" => OptimizerKind::ADAM_DEFAULT,
        "adagrad" => OptimizerKind::ADAGRAD_DEFAULT,
        other => {
            return Err(Failure::invalid(format!(
                "optimizer {other:?} is not one of sgd, momentum, adam, adagrad"
            )))
        }
    })
}

/// Each tensor's values, checked against its shape.
fn tensor_values(tensors: &[Tensor]) -> Result<Vec<(String, Vec<f32>)>, Failure> {
    let mut values = Vec::with_capacity(tensors.len());
    for (name, shape, bytes) in tensors {
        let floats = floats(name, bytes)?;
        let elements = shape.iter().try_fold(1u64, |total, dim| total.checked_mul(*dim));
        if elements != Some(floats.len() as u64) {
            return Err(Failure::invalid(format!(
                "{name}: {} values do not fill the shape {shape:?}",
                floats.len()
            )));
        }
        values.push((name.clone(), floats));
    }
    Ok(values)
}
