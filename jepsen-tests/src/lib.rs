//! jepsen-tests: the `raftrain` binary as a black box under faults. A supervisor starts real
//! processes, per-link TCP proxies partition the masters, nemeses kill, pause and cut on a
//! seeded schedule, workload clients record every operation, and checkers judge the history.

pub mod binary;
pub mod chart;
pub mod checker;
pub mod cluster;
pub mod history;
pub mod nemesis;
pub mod netns;
pub mod proxy;
pub mod report;
pub mod run;
/// The process supervisor, now a crate of its own (`supervisor`), kept at this path for the
/// harness's modules.
pub use ::supervisor;
pub mod workload;
