//! Process-wide metrics on the `metrics` crate and its Prometheus exporter: counters end in
//! `_total`, latencies are `_seconds` histograms, identities are labels. The recorder is
//! installed once per process ([`install`], when `--metrics-listen` is given); before that the
//! `metrics` macros record nothing, at no cost.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Histogram buckets of every `_seconds` metric: 100 us to 10 s.
const SECONDS_BUCKETS: [f64; 14] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5, 10.0];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process's recorder (once; later calls are no-ops) and records
/// `raftrain_build_info`.
pub fn install() {
    let handle = HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new().set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS);
        match builder.and_then(PrometheusBuilder::install_recorder) {
            Ok(handle) => Some(handle),
            Err(error) => {
                tracing::warn!(%error, "cannot install the metrics recorder; /metrics will be empty");
                None
            }
        }
    });
    if handle.is_some() {
        describe();
        metrics::gauge!("raftrain_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    }
}

/// The HELP line of every metric raftrain records.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_gauge!("raftrain_build_info", "Always 1; the version label says which build runs.");
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
    describe_histogram!(
        "raftrain_raft_commit_seconds",
        Unit::Seconds,
        "From proposing a write to its answer."
    );
    describe_histogram!(
        "raftrain_rpc_seconds",
        Unit::Seconds,
        "gRPC call latency by method, to the response headers."
    );
    describe_counter!(
        "raftrain_rpc_errors_total",
        "gRPC calls answered with an error, by method and code."
    );
    describe_counter!(
        "raftrain_rpc_unauthenticated_total",
        "gRPC calls refused for a missing or wrong cluster token, by method."
    );
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
    describe_counter!("raftrain_trainer_examples_total", "Examples trained on.");
    describe_counter!("raftrain_trainer_tasks_done_total", "Tasks trained and reported finished.");
    describe_counter!("raftrain_trainer_tasks_failed_total", "Tasks reported failed for bad data.");
    describe_gauge!("raftrain_trainer_pass", "The pass this trainer works on.");
    describe_gauge!("raftrain_trainer_eval_loss", "The latest evaluation's loss.");
    describe_gauge!("raftrain_trainer_eval_accuracy", "The latest evaluation's accuracy.");
    describe_histogram!(
        "raftrain_trainer_task_seconds",
        Unit::Seconds,
        "From taking a task to reporting it."
    );
}

/// The Prometheus text of every metric recorded so far.
pub fn render() -> String {
    match HANDLE.get() {
        Some(Some(handle)) => {
            handle.run_upkeep();
            handle.render()
        }
        _ => String::new(),
    }
}
