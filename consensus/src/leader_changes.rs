//! Counting the known leader's changes (`raftrain_raft_leader_changes_total`) and noting when
//! this node began leading, from its Raft server metrics (sent only when the role changes).

use std::sync::Arc;

use openraft::ServerState;

/// Counts every change of the known leader (`raftrain_raft_leader_changes_total`) and notes
/// when this node began leading (`leading_since`, for a handoff) until the node stops.
pub(crate) async fn count_leader_changes(
    mut watched: tokio::sync::watch::Receiver<crate::ServerMetrics>,
    leading_since: Arc<std::sync::Mutex<Option<(u64, tokio::time::Instant)>>>,
) {
    let mut leader = None;
    loop {
        let (now, leads) = {
            let metrics = watched.borrow_and_update();
            let leads = metrics.state == ServerState::Leader;
            (metrics.current_leader.map(|id| (id, metrics.vote.leader_id().get_term())), leads)
        };
        if now != leader {
            if now.is_some() {
                metrics::counter!("raftrain_raft_leader_changes_total").increment(1);
            }
            let since = now.filter(|_| leads).map(|(_, term)| (term, tokio::time::Instant::now()));
            *leading_since.lock().unwrap_or_else(|poison| poison.into_inner()) = since;
        }
        leader = now;
        if watched.changed().await.is_err() {
            return;
        }
    }
}
