//! The shutdown signal of a long-running process: Ctrl-C (SIGINT) or SIGTERM, whichever comes
//! first. Either starts a graceful shutdown; SIGKILL, of course, does not.
//!
//! A server (master, pserver, trainer) holds both signals blocked from early in `main`
//! (`hold_signals`, before any other thread exists, so every thread inherits the block) until
//! their listeners are registered on the main thread (`server_shutdown`), which then releases
//! them there and only then asks to be signalled when its parent dies (`exit_with_parent`). A
//! signal that comes meanwhile waits and is received: while a handler is being installed the
//! kernel may run it before it knows whom to tell (signal-hook stores its actions after the
//! `sigaction`, tokio subscribes its listener after both), and such a SIGTERM was lost, leaving
//! a trainer or master of a SIGKILLed demo running. The main thread lives as long as the
//! process (it waits in `block_on`), so a released signal always has a thread to go to.

use std::future::Future;

use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow, Signal as Number};
use tokio::signal::unix::{signal, Signal, SignalKind};

/// The signals that stop a process gracefully.
fn shutdown_signals() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Number::SIGTERM);
    set.add(Number::SIGINT);
    set
}

/// Blocks SIGTERM and SIGINT on the calling thread: call it in `main` before any thread starts
/// (logging starts none), in a process that will `server_shutdown`.
pub(crate) fn hold_signals() {
    if let Err(error) = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&shutdown_signals()), None) {
        tracing::warn!(%error, "cannot hold SIGTERM until its handler is ready");
    }
}

/// A server's shutdown signal: registers the listeners on `runtime` from this (the main)
/// thread, releases the signals `hold_signals` held (one that came meanwhile is received now),
/// then asks the kernel for SIGTERM when a supervising parent dies.
pub(crate) fn server_shutdown(runtime: &tokio::runtime::Runtime) -> impl Future<Output = ()> {
    let listeners = {
        let _inside = runtime.enter();
        Listeners::register()
    };
    if let Err(error) = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&shutdown_signals()), None) {
        tracing::warn!(%error, "cannot release SIGTERM: only SIGKILL stops this process");
    }
    crate::process_group::exit_with_parent();
    listeners.received()
}

/// Resolves on SIGTERM or Ctrl-C; to be called inside a runtime (the listeners are registered
/// at once, before anything slow: a SIGTERM then starts a graceful shutdown instead of killing
/// the process by the signal's default action).
pub(crate) fn signal_received() -> impl Future<Output = ()> {
    Listeners::register().received()
}

/// The registered listeners of both signals (`None` where one could not be registered).
struct Listeners {
    terminate: Option<Signal>,
    interrupt: Option<Signal>,
}

impl Listeners {
    fn register() -> Self {
        let listen = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(listener) => Some(listener),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for {name}");
                None
            }
        };
        Listeners {
            terminate: listen(SignalKind::terminate(), "SIGTERM"),
            interrupt: listen(SignalKind::interrupt(), "SIGINT"),
        }
    }

    async fn received(self) {
        let Listeners { terminate, interrupt } = self;
        tokio::select! {
            () = next(interrupt) => tracing::info!("interrupted"),
            () = next(terminate) => tracing::info!("terminated"),
        }
    }
}

/// The next signal `listener` hears; never, without a listener.
async fn next(listener: Option<Signal>) {
    match listener {
        Some(mut listener) => {
            listener.recv().await;
        }
        None => std::future::pending().await,
    }
}
