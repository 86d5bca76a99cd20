//! The simulation crate's tests: the simulated store against openraft's storage contract, the
//! seed sweep, determinism, and the planted bugs the checkers must catch.

mod core_restart;
mod determinism;
mod graceful_stop;
mod planted_bugs;
mod seed_sweep;
mod storage_suite;
