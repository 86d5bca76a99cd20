//! The shutdown signal of a long-running process: Ctrl-C (SIGINT) or SIGTERM, whichever comes
//! first. Either starts a graceful shutdown; SIGKILL, of course, does not.

use std::future::Future;

use tokio::signal::unix::{signal, Signal, SignalKind};

/// Resolves on SIGTERM or Ctrl-C. The SIGTERM handler is installed at once when called inside
/// a runtime (before anything slow at start-up: a SIGTERM then starts a graceful shutdown
/// instead of killing the process by the signal's default action), else at the first poll.
pub(crate) fn signal_received() -> impl Future<Output = ()> {
    let early = tokio::runtime::Handle::try_current().ok().map(|_| terminate_signal());
    async move {
        let registered = match early {
            Some(registered) => registered,
            None => terminate_signal(),
        };
        let mut terminate = match registered {
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
}

fn terminate_signal() -> std::io::Result<Signal> {
    signal(SignalKind::terminate())
}
