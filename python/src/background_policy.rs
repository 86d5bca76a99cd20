//! The scheduling policy of this extension's own threads (the runtime's, and the Python
//! threads that send reports and forward logs): Linux's `SCHED_BATCH`, which keeps their full
//! share of the CPU but never lets one that wakes take a core from a running thread at once.
//! An RPC's answer wakes the runtime's threads several times; under the default policy each
//! wake could preempt the training thread on its core (BENCHMARKS.md, the Python package's
//! loader rows, says how that was found and what it cost). Elsewhere it does nothing.

/// Puts the calling thread under the background policy (best effort: a failure only costs
/// the training thread those preemptions, and is logged at debug level).
#[pyo3::pyfunction]
pub fn run_as_background() {
    #[cfg(target_os = "linux")]
    set_batch_policy();
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn set_batch_policy() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `sched_setscheduler` only reads `param` during the call; pid 0 names the calling
    // thread, and a normal policy takes priority 0.
    let set = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    if set != 0 {
        let error = std::io::Error::last_os_error();
        tracing::debug!("cannot put a background thread under SCHED_BATCH: {error}");
    }
}
