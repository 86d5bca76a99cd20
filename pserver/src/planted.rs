//! Bugs planted on purpose in the pserver, switched by `platform::planted` like every crate's
//! (only with the `planted-bugs` feature, which the simulation's turns on):
//!
//! - `push-across-restore`: a shard applies a push whatever model restore it was computed
//!   on, so a gradient of the model a restore replaced lands in the restored one.

/// The pserver's planted bugs, by name.
pub const BUG_NAMES: &[&str] = &["push-across-restore"];

platform::planted_bug_switch!(BUG_NAMES);
