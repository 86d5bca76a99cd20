//! The master's Prometheus metrics: the node's Raft gauges and the replicated job state as this
//! replica has applied it (a follower may lag the leader by a few entries).

use consensus::metrics_http::{push_metric, raft_metrics_text};
use consensus::ConsensusNode;

use crate::replicated_state::ReplicatedState;

/// The metrics text of `node` at this moment.
pub fn render(node: &ConsensusNode<ReplicatedState>) -> String {
    let mut text = raft_metrics_text(&node.metrics().borrow());
    let status = node.read(|replicated| replicated.state().status());
    let gauges: [(&str, &str, f64); 10] = [
        ("pass", "The running pass.", f64::from(status.pass)),
        ("passes", "Passes the job runs.", f64::from(status.passes)),
        ("tasks", "Tasks in the dataset.", status.task_count as f64),
        ("tasks_todo", "Tasks waiting for a trainer.", status.todo_count as f64),
        ("tasks_pending", "Tasks dispatched and not yet finished.", status.pending_count as f64),
        ("tasks_done", "Tasks finished in the running pass.", status.done_count as f64),
        ("tasks_failed", "Tasks past the failure limit.", status.failed_count as f64),
        ("trainers", "Registered trainers.", status.trainers.len() as f64),
        ("pservers", "Pserver slots held.", held_slots(&status) as f64),
        ("job_finished", "1 once every pass is done.", f64::from(u8::from(status.job_finished))),
    ];
    for (name, help, value) in gauges {
        push_metric(&mut text, &format!("raftrain_master_{name}"), "gauge", help, value);
    }
    text
}

fn held_slots(status: &crate::state::StatusView) -> usize {
    status.pservers.iter().filter(|slot| slot.holder.is_some()).count()
}
