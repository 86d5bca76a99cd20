//! The Raft node's metrics (`raftrain_raft_*`): their HELP lines, and the gauges read from
//! openraft's metrics at scrape time. The counters and histograms are recorded where they
//! happen (`batcher`, `flusher`, `node`).

/// The HELP lines of the Raft node's metrics (`raftrain_raft_*`), for
/// `platform::telemetry::install`.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_gauge!("raftrain_raft_info", "Always 1; the node_id label names this replica.");
    describe_gauge!("raftrain_raft_term", "The current Raft term.");
    describe_gauge!("raftrain_raft_leader_id", "The leader this node knows (0: none).");
    describe_gauge!("raftrain_raft_is_leader", "1 if this node leads.");
    describe_gauge!("raftrain_raft_last_log_index", "Index of the last log entry.");
    describe_gauge!("raftrain_raft_last_applied_index", "Index of the last applied entry.");
    describe_gauge!("raftrain_raft_snapshot_index", "Last index in the newest snapshot.");
    describe_counter!("raftrain_raft_leader_changes_total", "Times this node saw a new leader.");
    describe_counter!(
        "raftrain_raft_proposals_committed_total",
        "Writes committed and applied through this node."
    );
    describe_counter!(
        "raftrain_raft_proposals_failed_total",
        "Writes that failed or timed out on this node."
    );
    describe_histogram!(
        "raftrain_raft_fsync_seconds",
        Unit::Seconds,
        "sled flush plus fsync of the log, per batch."
    );
    describe_counter!(
        "raftrain_raft_flushes_in_place_total",
        "Log flushes an append made on its own task (nothing else flushing, the last flush fast), not the flusher thread."
    );
    describe_histogram!(
        "raftrain_raft_commit_seconds",
        Unit::Seconds,
        "From proposing a write to its answer."
    );
}

/// Sets the Raft gauges of one node (`raftrain_raft_*`, and `raftrain_raft_info{node_id}`)
/// from its metrics, at scrape time.
pub fn record_gauges(raft: &crate::Metrics) {
    let leader = raft.current_leader.map_or(0.0, |id| id as f64);
    let is_leader = raft.state == openraft::ServerState::Leader;
    metrics::gauge!("raftrain_raft_info", "node_id" => raft.id.to_string()).set(1.0);
    metrics::gauge!("raftrain_raft_term").set(raft.current_term as f64);
    metrics::gauge!("raftrain_raft_leader_id").set(leader);
    metrics::gauge!("raftrain_raft_is_leader").set(f64::from(u8::from(is_leader)));
    metrics::gauge!("raftrain_raft_last_log_index")
        .set(raft.last_log_index.map_or(0.0, |index| index as f64));
    metrics::gauge!("raftrain_raft_last_applied_index")
        .set(raft.last_applied.map_or(0.0, |log_id| log_id.index as f64));
    metrics::gauge!("raftrain_raft_snapshot_index")
        .set(raft.snapshot.map_or(0.0, |log_id| log_id.index as f64));
}
