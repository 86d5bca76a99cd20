//! The process's tokio runtime and the one way Python code waits on it.
//!
//! One runtime per process, made on first use and remade in a forked child: a runtime's
//! worker threads do not survive `fork` (DataLoader workers are forked), so a child that used
//! its parent's would wait for ever. The parent's runtime is leaked in the child, never
//! dropped (dropping it would join threads that do not exist there).
//!
//! [`wait`] runs a future with the GIL released, in slices of [`SIGNAL_CHECK_MS`], checking for
//! Python signals between slices: Ctrl-C interrupts a call waiting for a master leader instead
//! of being held until the call ends.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::Runtime;

/// How often a waiting call takes the GIL back to look for signals (KeyboardInterrupt).
pub const SIGNAL_CHECK_MS: u64 = 100;
/// Worker threads of the runtime: the RPCs are light; the machine's cores belong to training.
const WORKER_THREADS: usize = 2;

/// The runtime and the process that made it.
struct Owned {
    pid: u32,
    runtime: Arc<Runtime>,
}

static RUNTIME: Mutex<Option<Owned>> = Mutex::new(None);

/// This process's runtime, made now if this process has none yet.
pub fn runtime() -> Result<Arc<Runtime>, std::io::Error> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(owned) = slot.as_ref().filter(|owned| owned.pid == pid) {
        return Ok(owned.runtime.clone());
    }
    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            .thread_name("raftrain-runtime")
            .on_thread_start(crate::background_policy::run_as_background)
            .enable_all()
            .build()?,
    );
    // A runtime inherited through fork: its threads are gone; leak it rather than join them.
    if let Some(inherited) = slot.replace(Owned { pid, runtime: runtime.clone() }) {
        std::mem::forget(inherited);
    }
    Ok(runtime)
}

/// Runs `future` to its end on this process's runtime with the GIL released; a Python signal
/// handler that raises (Ctrl-C) cancels it and its error is returned.
pub fn wait<F>(py: Python<'_>, future: F) -> PyResult<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let runtime = runtime().map_err(|error| {
        crate::errors::Failure::new("INTERNAL", format!("cannot start the tokio runtime: {error}"))
    })?;
    let mut future = std::pin::pin!(future);
    let slice = Duration::from_millis(SIGNAL_CHECK_MS);
    loop {
        let outcome = py.detach(|| {
            runtime.block_on(async { tokio::time::timeout(slice, future.as_mut()).await })
        });
        match outcome {
            Ok(output) => return Ok(output),
            Err(_elapsed) => py.check_signals()?,
        }
    }
}
