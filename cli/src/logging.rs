//! Process-wide logging: `tracing` to standard error, filtered by `RAFTRAIN_LOG` (default
//! `info`), and a panic hook that logs the panic before the default report.

use tracing_subscriber::EnvFilter;

/// The environment variable holding a `tracing` filter such as `info,consensus=debug`.
const LOG_FILTER_VARIABLE: &str = "RAFTRAIN_LOG";

/// Installs the subscriber and the panic hook. Called once, first thing in `main`.
pub(crate) fn init() {
    let filter =
        EnvFilter::try_from_env(LOG_FILTER_VARIABLE).unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        tracing::error!(panic = %info, "raftrain panicked; this is a bug");
        default_hook(info);
    }));
}
