//! Proposing the leader's decisions, and counting what they did in the master's metrics.

use crate::service::Proposer;
use crate::state::Command;

/// Proposes a leader decision. A failure is logged here, where it is handled: the next tick
/// sees the same state and tries again.
pub(super) async fn decide(proposer: &Proposer, term: u64, command: Command) {
    if !proposer.admits(&command) {
        // Due again at the next tick, once the group's feature level covers it.
        tracing::debug!(?command, "leader duty waits for the group's feature level");
        return;
    }
    match proposer.decide(term, command).await {
        Ok(crate::state::Response::WrongTerm { decided, committed }) => {
            tracing::info!(decided, committed, "leader duty from an old term refused");
        }
        Ok(crate::state::Response::Expired { requeued, failed }) => {
            let timed_out = (requeued.len() + failed.len()) as u64;
            metrics::counter!("raftrain_master_tasks_timed_out_total").increment(timed_out);
            metrics::counter!("raftrain_master_tasks_requeued_total")
                .increment(requeued.len() as u64);
            metrics::counter!("raftrain_master_tasks_failed_total").increment(failed.len() as u64);
        }
        Ok(crate::state::Response::TrainerRemoved { requeued }) => {
            metrics::counter!("raftrain_master_trainers_lost_total").increment(1);
            metrics::counter!("raftrain_master_tasks_requeued_total")
                .increment(requeued.len() as u64);
        }
        Ok(_) => {}
        Err(status) => {
            tracing::info!(error = %status.message(), "leader duty not committed; will retry");
        }
    }
}
