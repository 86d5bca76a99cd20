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

/// Installs the process's recorder (once; later calls only describe) and records
/// `raftrain_build_info`. Each crate describes the metrics it records next to its code:
/// `describe_each` are those functions (for example the master's and the Raft node's).
pub fn install(describe_each: &[fn()]) {
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
        for describe_one in describe_each {
            describe_one();
        }
        metrics::gauge!("raftrain_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    }
}

/// The HELP lines of the metrics this crate records (the build and every gRPC server's).
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_gauge!("raftrain_build_info", "Always 1; the version label says which build runs.");
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
