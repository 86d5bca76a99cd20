//! Process-wide logging: `tracing` to standard error, filtered by `RAFTRAIN_LOG` (default
//! `info,openraft=warn`: openraft's own INFO lines are many and rarely what an operator
//! needs), as text (coloured only on a terminal) or one JSON object a line, and a panic hook
//! that logs the panic before the default report.

use std::io::IsTerminal as _;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// The environment variable holding a `tracing` filter such as `info,consensus=debug`.
const LOG_FILTER_VARIABLE: &str = "RAFTRAIN_LOG";
const LOG_FILTER_DEFAULT: &str = "info,openraft=warn";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (for log collectors).
    Json,
}

/// Installs the subscriber and the panic hook. Called once, first thing in `main`.
pub(crate) fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_env(LOG_FILTER_VARIABLE)
        .unwrap_or_else(|_| EnvFilter::new(LOG_FILTER_DEFAULT));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().init(),
    }
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        tracing::error!(panic = %info, "raftrain panicked; this is a bug");
        default_hook(info);
    }));
}
