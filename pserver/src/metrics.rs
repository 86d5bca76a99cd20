//! The pserver's Prometheus metrics: what it serves, how far it got, what it refused.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use consensus::metrics_http::{Endpoints, Ready, Render};

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
        ready_held.check(Instant::now()).map_err(|error| error.to_string())?;
        ready_cell.ready().map(drop).map_err(|error| error.to_string())
    });
    Endpoints { render, ready }
}

/// The metrics text at this moment.
pub fn render(held: &HeldSlot, cell: &ShardCell, recorded_step: &Arc<AtomicU64>) -> String {
    let (_, shard, _) = cell.describe();
    let gauges = [
        ("raftrain_pserver_slot", "The slot this pserver serves.", u64::from(held.index())),
        ("raftrain_pserver_generation", "The generation of its claim.", held.generation()),
        (
            "raftrain_pserver_lease_held",
            "1 while the slot's lease holds.",
            u64::from(held.check(Instant::now()).is_ok()),
        ),
        (
            "raftrain_pserver_ready",
            "1 once the shard serves (initialized or restored).",
            u64::from(shard.is_some()),
        ),
        (
            "raftrain_pserver_step",
            "Pushes applied in all.",
            shard.as_ref().map_or(0, |shard| shard.step()),
        ),
        (
            "raftrain_pserver_elements",
            "Parameter elements this shard holds.",
            shard.as_ref().map_or(0, |shard| shard.element_count()),
        ),
        (
            "raftrain_pserver_checkpoint_step",
            "The step of the newest recorded checkpoint.",
            recorded_step.load(Ordering::SeqCst),
        ),
    ];
    let mut text = String::new();
    for (name, help, value) in gauges {
        text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"));
    }
    let refused = shard.as_ref().map_or(0, |shard| shard.nonfinite_refused());
    let name = "raftrain_pserver_nonfinite_pushes_refused_total";
    text.push_str(&format!("# HELP {name} Pushes refused for NaN or infinite gradients.\n# TYPE {name} counter\n{name} {refused}\n"));
    text
}
