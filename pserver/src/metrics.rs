//! The pserver's Prometheus metrics: what it serves, how far it got, what it refused.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use platform::metrics_http::{Endpoints, Ready, Render};

use crate::held_slot::HeldSlot;
use crate::shard_cell::ShardCell;

/// The metrics endpoint's answers: this text, and ready while the shard serves under a
/// confirmed lease.
pub fn endpoints(
    held: Arc<HeldSlot>,
    cell: Arc<ShardCell>,
    recorded_step: Arc<AtomicU64>,
) -> Endpoints {
    let (ready_held, ready_cell) = (held.clone(), cell.clone());
    let render: Render = Arc::new(move || render(&held, &cell, &recorded_step));
    let ready: Ready = Arc::new(move || {
        ready_held.check().map_err(|error| error.to_string())?;
        ready_cell.ready().map(drop).map_err(|error| error.to_string())
    });
    Endpoints { render, ready }
}

/// What the metrics of a held slot read, set once the slot is claimed and restored.
pub struct SlotMetrics {
    pub held: Arc<HeldSlot>,
    pub cell: Arc<ShardCell>,
    pub recorded_step: Arc<AtomicU64>,
}

/// The endpoints of a pserver from its start: before it holds a slot (a standby, or a pserver
/// waiting for its job to be submitted) it is alive but not ready; once `slot` is set they
/// are the slot's (`endpoints`).
pub fn endpoints_from_start(slot: Arc<std::sync::OnceLock<SlotMetrics>>) -> Endpoints {
    let ready_slot = slot.clone();
    let render: Render = Arc::new(move || match slot.get() {
        Some(slot) => render(&slot.held, &slot.cell, &slot.recorded_step),
        None => {
            metrics::gauge!("raftrain_pserver_lease_held").set(0.0);
            metrics::gauge!("raftrain_pserver_ready").set(0.0);
            platform::telemetry::render()
        }
    });
    let ready: Ready =
        Arc::new(move || match ready_slot.get() {
            Some(slot) => {
                slot.held.check().map_err(|error| error.to_string())?;
                slot.cell.ready().map(drop).map_err(|error| error.to_string())
            }
            None => Err("no pserver slot yet: every slot is held, or the job is not submitted yet"
                .to_string()),
        });
    Endpoints { render, ready }
}

/// The metrics text at this moment: the gauges are set from the shard, then everything
/// recorded is rendered (`raftrain_pserver_bytes_pushed_total` and `_pulled_total` come from
/// the service, `raftrain_rpc_*` from the server).
pub fn render(held: &HeldSlot, cell: &ShardCell, recorded_step: &Arc<AtomicU64>) -> String {
    let (_, shard, _) = cell.describe();
    metrics::gauge!("raftrain_pserver_info", "slot" => held.slot().to_string(), "generation" => held.generation().to_string()).set(1.0);
    metrics::gauge!("raftrain_pserver_lease_held").set(f64::from(u8::from(held.check().is_ok())));
    metrics::gauge!("raftrain_pserver_ready").set(f64::from(u8::from(shard.is_some())));
    metrics::gauge!("raftrain_pserver_step")
        .set(shard.as_ref().map_or(0.0, |shard| shard.step() as f64));
    metrics::gauge!("raftrain_pserver_elements")
        .set(shard.as_ref().map_or(0.0, |shard| shard.element_count() as f64));
    metrics::gauge!("raftrain_pserver_checkpoint_step")
        .set(recorded_step.load(Ordering::SeqCst) as f64);
    let refused = shard.as_ref().map_or(0, |shard| shard.nonfinite_refused());
    metrics::counter!("raftrain_pserver_nonfinite_pushes_refused_total").absolute(refused);
    platform::telemetry::render()
}

/// The HELP lines of the pserver's metrics (`raftrain_pserver_*`), for
/// `platform::telemetry::install`.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge};
    describe_counter!("raftrain_pserver_bytes_pushed_total", "Gradient payload bytes applied.");
    describe_counter!("raftrain_pserver_bytes_pulled_total", "Parameter payload bytes served.");
    describe_counter!(
        "raftrain_pserver_nonfinite_pushes_refused_total",
        "Pushes refused for NaN or infinite gradients."
    );
    describe_gauge!(
        "raftrain_pserver_info",
        "Always 1; slot and generation labels name what this pserver serves."
    );
    describe_gauge!("raftrain_pserver_lease_held", "1 while the slot's lease is confirmed.");
    describe_gauge!("raftrain_pserver_ready", "1 once the shard serves (initialized or restored).");
    describe_gauge!("raftrain_pserver_step", "Pushes applied in all.");
    describe_gauge!("raftrain_pserver_elements", "Parameter elements this shard holds.");
    describe_gauge!(
        "raftrain_pserver_checkpoint_step",
        "The step of the newest recorded checkpoint."
    );
}
