//! `--worker-threads`: the size of a server process's tokio runtime.

use anyhow::Context as _;
use clap::Args;

#[derive(Debug, Args)]
pub(crate) struct RuntimeArgs {
    /// Tokio worker threads (default: one per CPU). Where several raftrain servers share few
    /// cores (three masters on one small machine), 1 each avoids idle workers being woken to
    /// steal work: `raftrain bench consensus` on 2 cores measured 16,100 writes/s at 64 clients
    /// with 1 worker per replica, 13,300 with 2 (BENCHMARKS.md).
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
