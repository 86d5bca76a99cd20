//! The trainer's metrics and readiness, served over HTTP (`platform::metrics_http`) from its
//! start until it stops.

use std::sync::Arc;

use client::MasterClient;
use tokio::sync::watch;

use crate::metrics::TrainerMetrics;

/// Serves the trainer's metrics until `stopped` turns true; ready while it trains (see
/// `TrainerMetrics::readiness`).
pub(super) fn serve_metrics(
    listener: tokio::net::TcpListener,
    limits: &platform::PortLimits,
    metrics: Arc<TrainerMetrics>,
    master: Arc<MasterClient>,
    stopped: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let ready_metrics = metrics.clone();
    let render: platform::metrics_http::Render = Arc::new(move || metrics.render());
    let ready: platform::metrics_http::Ready = Arc::new(move || ready_metrics.readiness(&master));
    platform::metrics_http::spawn(
        listener,
        limits.clone(),
        platform::metrics_http::Endpoints { render, ready },
        stopped,
    )
}
