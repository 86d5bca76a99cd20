//! `raftrain._native`: the Rust half of the `raftrain` Python package. It wraps the Rust
//! crates, so a Python trainer behaves exactly as a Rust one: `client::MasterClient` (leader
//! discovery, redirects, retries inside a deadline, one stamp per logical write, TLS and the
//! token), `client::Session` (a trainer's registration and heartbeats), `storage`'s RecordIO and
//! `client::pserver::PServerClient`. The Python modules in `raftrain/` are the API; this
//! module is not meant to be used directly.
//!
//! Code map: `runtime` is the per-process tokio runtime and `wait` (GIL released, signals
//! checked), its threads under `background_policy`; `errors` maps every error to a `raftrain.errors` exception and catches panics;
//! `connection` turns the constructors' arguments into client options; `process_bound` refuses
//! an object used after `fork`, and `fork_guard` holds standard error and the log queue across
//! one; `log_forward` hands Rust's log events to Python's `logging`;
//! `task_client` and `task` are the task queue (`pending_step` a step asked ahead on the
//! runtime, `ask_gather` a round of such steps sent in one call), `status` the job's status; `recordio` and
//! `example` the data; `pserver_client` the parameter servers;
//! `rendezvous_client` a torchrun rendezvous run's keys.

mod ask_gather;
mod background_policy;
mod connection;
mod errors;
mod example;
mod fork_guard;
mod leader_hints;
mod log_forward;
mod pending_step;
mod process_bound;
mod pserver_client;
mod recordio;
mod rendezvous_client;
mod runtime;
mod status;
mod task;
mod task_client;
mod walk_step;

use pyo3::prelude::*;

/// The environment variable naming what the Rust code hands to Python's `logging` (a
/// `tracing` filter such as `warn` or `client=debug`); `warn` when unset.
const LOG_ENV: &str = "RAFTRAIN_LOG";

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    install_logging();
    module.add_class::<task_client::TaskClient>()?;
    module.add_class::<task::Task>()?;
    module.add_class::<walk_step::WalkStep>()?;
    module.add_class::<pending_step::PendingStep>()?;
    module.add_class::<ask_gather::AskGather>()?;
    module.add_class::<walk_step::StepKind>()?;
    module.add_class::<recordio::ChunkReader>()?;
    module.add_class::<recordio::ChunkWriter>()?;
    module.add_class::<pserver_client::PServerClient>()?;
    module.add_class::<rendezvous_client::RendezvousClient>()?;
    module.add_function(wrap_pyfunction!(recordio::read_task_chunk, module)?)?;
    module.add_function(wrap_pyfunction!(example::encode_example, module)?)?;
    module.add_function(wrap_pyfunction!(example::decode_example, module)?)?;
    module.add_function(wrap_pyfunction!(example::decode_dense, module)?)?;
    module.add_function(wrap_pyfunction!(status::status_json, module)?)?;
    module.add_function(wrap_pyfunction!(task::sample_order, module)?)?;
    module.add_function(wrap_pyfunction!(fork_guard::before_fork, module)?)?;
    module.add_function(wrap_pyfunction!(fork_guard::after_fork, module)?)?;
    module.add_function(wrap_pyfunction!(fork_guard::after_fork_in_child, module)?)?;
    module.add_function(wrap_pyfunction!(log_forward::next_log, module)?)?;
    module.add_function(wrap_pyfunction!(background_policy::run_as_background, module)?)?;
    module.add("SIGNAL_CHECK_MS", runtime::SIGNAL_CHECK_MS)?;
    module.add("FINISHED_PER_STEP_MAX", client::FINISHED_PER_ASK_MAX)?;
    module.add("ASKS_TOGETHER_MAX", client::ASKS_TOGETHER_MAX)?;
    Ok(())
}

/// The Rust side's warnings (a call waiting for a leader, a heartbeat failing) go to Python's
/// `logging` (`log_forward`); a process that already installed a subscriber keeps it.
fn install_logging() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_env(LOG_ENV)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let layers = tracing_subscriber::registry().with(filter).with(log_forward::ForwardLayer);
    let _ = layers.try_init();
}
