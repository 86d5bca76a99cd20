//! The master's Prometheus metrics. At each scrape the Raft gauges and the job gauges are set
//! from this replica's state, then every recorded metric is rendered. The job gauges are the
//! replicated state *as this replica has applied it*: read them from the leader (a follower may
//! lag by a few entries). The task counters (`raftrain_master_tasks_*_total`) count what this
//! process did while it led.

use consensus::raft_metrics;
use consensus::ConsensusNode;

use crate::replicated_state::ReplicatedState;

/// The metrics text of `node` at this moment.
pub fn render(node: &ConsensusNode<ReplicatedState>) -> String {
    raft_metrics::record_gauges(&node.metrics().borrow());
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
    platform::telemetry::render()
}

fn held_slots(status: &crate::state::StatusView) -> usize {
    status.pservers.iter().filter(|slot| slot.holder.is_some()).count()
}

/// The HELP lines of the master's metrics (`raftrain_master_*`), for
/// `platform::telemetry::install`.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge};
    describe_gauge!(
        "raftrain_master_tasks",
        "Tasks by queue state in the running pass (the applied state: read the leader's)."
    );
    describe_gauge!(
        "raftrain_master_pass",
        "The running pass (the applied state: read the leader's)."
    );
    describe_gauge!("raftrain_master_passes", "Passes the job runs.");
    describe_gauge!("raftrain_master_dataset_tasks", "Tasks in the dataset.");
    describe_gauge!(
        "raftrain_master_trainers",
        "Registered trainers (the applied state: read the leader's)."
    );
    describe_gauge!(
        "raftrain_master_pservers",
        "Pserver slots held (the applied state: read the leader's)."
    );
    describe_gauge!("raftrain_master_job_finished", "1 once every pass is done.");
    describe_counter!(
        "raftrain_master_tasks_dispatched_total",
        "Tasks this process handed out while it led."
    );
    describe_counter!(
        "raftrain_master_tasks_finished_total",
        "Task completions this process accepted while it led."
    );
    describe_counter!(
        "raftrain_master_tasks_failed_total",
        "Task failures accepted, and tasks past their failure limit, while it led."
    );
    describe_counter!(
        "raftrain_master_tasks_timed_out_total",
        "Tasks whose deadline passed, while it led."
    );
    describe_counter!(
        "raftrain_master_tasks_requeued_total",
        "Tasks sent back to todo (timed out, or their trainer lost), while it led."
    );
    describe_counter!(
        "raftrain_master_trainers_lost_total",
        "Trainers declared lost for missing their lease, while it led."
    );
}
