//! `--worker-threads`: the size of a server process's tokio runtime.

use anyhow::Context as _;
use clap::Args;

#[derive(Debug, Args)]
pub(crate) struct RuntimeArgs {
    /// Tokio worker threads (default: one per CPU). Where several raftrain servers share few
    /// cores, measure: on 2 cores with one write in flight, 1 worker per replica beat 2
    /// (`bench consensus`, 64 unary clients: 16,100 vs 13,300 writes/s); with two entries in
    /// flight, 2 workers beat 1 (64 stream clients: 21,200-23,800 vs 17,900-18,250).
    #[arg(long, env = "RAFTRAIN_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..))]
    worker_threads: Option<u16>,
}

impl RuntimeArgs {
    /// A multi-threaded runtime with every driver enabled and the requested workers.
    pub(crate) fn build(&self) -> anyhow::Result<tokio::runtime::Runtime> {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        if let Some(threads) = self.worker_threads {
            builder.worker_threads(usize::from(threads));
        }
        builder.enable_all().build().context("start the tokio runtime")
    }
}

/// Runs a server process's main future on `runtime`'s workers and waits for it. Polled by
/// `block_on` itself, the future would run on the main thread, outside the workers: every
/// wake-up of what it awaits directly (the Raft core's metrics watch changes several times
/// per write) would be a wake-up of another thread, two context switches each. A panic in it
/// is the process's panic, as under `block_on`.
pub(crate) fn serve<F>(runtime: &tokio::runtime::Runtime, main: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    match runtime.block_on(runtime.spawn(main)) {
        Ok(output) => output,
        Err(error) => match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // A task is cancelled only by the runtime shutting down, which `block_on` prevents.
            Err(error) => panic!("the main task ended without an answer: {error}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        RuntimeArgs { worker_threads: Some(1) }.build().expect("a runtime starts")
    }

    /// The main future runs on a worker, not on the thread that waits for it, and its answer
    /// comes back.
    #[test]
    fn the_main_future_runs_on_a_worker() {
        let caller = std::thread::current().id();
        let ran_on = serve(&runtime(), async { std::thread::current().id() });
        assert_ne!(ran_on, caller, "the main future ran on the waiting thread");
    }

    /// A panic in the main future is the caller's panic, with its message.
    #[test]
    fn a_panic_in_the_main_future_reaches_the_caller() {
        let runtime = runtime();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            serve(&runtime, async { panic!("the main future failed") })
        }));
        let payload = caught.expect_err("the panic propagates");
        let message = payload.downcast_ref::<&str>().copied().unwrap_or_default();
        assert_eq!(message, "the main future failed");
    }
}
