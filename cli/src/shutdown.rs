//! The shutdown signal of a long-running process: Ctrl-C (SIGINT) or SIGTERM, whichever comes
//! first. Either starts a graceful shutdown; SIGKILL, of course, does not.

use tokio::signal::unix::{signal, SignalKind};

pub(crate) async fn signal_received() {
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(terminate) => terminate,
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops this process");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted"),
        _ = terminate.recv() => tracing::info!("terminated"),
    }
}
