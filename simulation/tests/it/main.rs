//! The simulation crate's tests: the simulated store against openraft's storage contract, the
//! seed sweep, determinism, two jobs at once, membership changes among the faults, and the
//! planted bugs the checkers must catch (the production code's in a nested build with the
//! `planted-bugs` feature).

mod core_restart;
mod determinism;
mod graceful_stop;
mod leader_disk_stall;
mod membership;
mod planted_bugs;
// Runs `planted_bugs` in a nested build with the planted bugs; that build runs them itself.
#[cfg(not(feature = "planted-bugs"))]
mod planted_build;
mod seed_sweep;
mod storage_suite;
mod two_jobs;
