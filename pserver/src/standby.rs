//! `Standby`: what a pserver's gRPC port answers before it serves a slot (while every slot is
//! held, while its job is not submitted yet, while it restores the slot it claimed). The port
//! is bound from the start, so without this its connections were accepted and never answered:
//! health checks hung instead of saying NOT_SERVING, and a caller's data-plane call waited
//! for its own deadline (issue 35). A standby answers health (the pserver service
//! NOT_SERVING), reflection, and refuses every `PServerService` call at once with
//! `UNAVAILABLE`, saying it is a standby.

use std::convert::Infallible;
use std::future::Ready;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use platform::security::Security;
use platform::{GrpcHealth, HandedIncoming, PortLimits};
use tokio::sync::watch;

use crate::run::PSERVER_SERVICE;

/// What a standby's refusal says.
pub const STANDBY_MESSAGE: &str = "this pserver is a standby: it serves no slot yet (every slot \
                                   is held, its job is not submitted, or it is restoring the \
                                   slot it claimed); use the slot's holder from the masters' \
                                   pserver table";
/// How long the standby's calls in flight may take to finish once the slot is served; its
/// `Watch` streams never end on their own, and are cut off then.
const STOP_MS_MAX: u64 = 1_000;

/// The standby server, running until [`Standby::stop`] (or dropped).
pub(crate) struct Standby {
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Standby {
    /// Serves the standby's answers on `incoming` (the pserver's port: the slot's server takes
    /// the connections the standby leaves).
    pub(crate) async fn start(
        incoming: HandedIncoming,
        (security, limits, health): (&Security, &PortLimits, &GrpcHealth),
    ) -> anyhow::Result<Self> {
        health.set(PSERVER_SERVICE, false).await;
        let mut builder = platform::server_builder(security, limits)?;
        let services = [PSERVER_SERVICE];
        let router = platform::conventional_router(
            &mut builder,
            health,
            &services,
            proto::FILE_DESCRIPTOR_SET,
        )?
        .add_service(StandbyRefusal);
        let (stop, mut stopped) = watch::channel(false);
        let server = tokio::spawn(async move {
            let stopped = async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            };
            router
                .serve_with_incoming_shutdown(incoming, stopped)
                .await
                .context("serve the standby's answers")
        });
        Ok(Self { stop, server })
    }

    /// Stops answering as a standby: new connections go to the slot's server, and the
    /// standby's own are told to go away (HTTP/2 GOAWAY) and closed within `STOP_MS_MAX`.
    pub(crate) async fn stop(mut self) {
        let _ = self.stop.send(true);
        let bound = Duration::from_millis(STOP_MS_MAX);
        match tokio::time::timeout(bound, &mut self.server).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => {
                tracing::warn!(error = format!("{error:#}"), "the standby's server failed")
            }
            Ok(Err(error)) => tracing::warn!(%error, "the standby's server panicked"),
            Err(_elapsed) => tracing::debug!(bound_ms = STOP_MS_MAX, "standby streams cut off"),
        }
    }
}

impl Drop for Standby {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// `PServerService` as a standby serves it: every call refused with `UNAVAILABLE`.
#[derive(Clone, Debug)]
struct StandbyRefusal;

impl tonic::server::NamedService for StandbyRefusal {
    const NAME: &'static str = PSERVER_SERVICE;
}

impl<B> tower::Service<http::Request<B>> for StandbyRefusal {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: http::Request<B>) -> Self::Future {
        std::future::ready(Ok(tonic::Status::unavailable(STANDBY_MESSAGE).into_http()))
    }
}
