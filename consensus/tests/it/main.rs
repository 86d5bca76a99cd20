//! The consensus integration tests: one binary, one module per scenario or invariant.

mod cluster;
mod router;

mod append_stream;
mod cluster_info_grpc;
mod confirm_leadership;
mod election;
mod forged_terms;
mod half_done_change;
mod handoff;
mod leader_crash;
mod leader_isolation;
mod lossy_links;
mod lost_disk;
mod membership;
mod membership_answers;
mod pending_writes;
mod refuse_to_start;
mod restart;
mod snapshot_catch_up;
mod step_up;
mod storage_suite;
mod tidy_security;

/// Logs to the test's captured output; `RUST_LOG=debug` shows openraft's view.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn"));
    // Another test in this binary may have installed it already.
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}
