//! The master's Prometheus metrics. At each scrape the Raft gauges and the job gauges are set
//! from this replica's state, then every recorded metric is rendered. The job gauges are the
//! replicated state *as this replica has applied it*: read them from the leader (a follower may
//! lag by a few entries). The task counters (`raftrain_master_tasks_*_total`) count what this
//! process did while it led.

use consensus::metrics_http::record_raft_gauges;
use consensus::ConsensusNode;

use crate::replicated_state::ReplicatedState;

/// The metrics text of `node` at this moment.
pub fn render(node: &ConsensusNode<ReplicatedState>) -> String {
    record_raft_gauges(&node.metrics().borrow());
    let status = node.read(|replicated| replicated.state().status());
    let queues = [
        ("todo", status.todo_count),
        ("pending", status.pending_count),
        ("done", status.done_count),
        ("failed", status.failed_count),
    ];
    for (state, count) in queues {
        metrics::gauge!("raftrain_master_tasks", "state" => state).set(count as f64);
    }
    metrics::gauge!("raftrain_master_pass").set(f64::from(status.pass));
    metrics::gauge!("raftrain_master_passes").set(f64::from(status.passes));
    metrics::gauge!("raftrain_master_dataset_tasks").set(status.task_count as f64);
    metrics::gauge!("raftrain_master_trainers").set(status.trainers.len() as f64);
    metrics::gauge!("raftrain_master_pservers").set(held_slots(&status) as f64);
    metrics::gauge!("raftrain_master_job_finished").set(f64::from(u8::from(status.job_finished)));
    consensus::telemetry::render()
}

fn held_slots(status: &crate::state::StatusView) -> usize {
    status.pservers.iter().filter(|slot| slot.holder.is_some()).count()
}
